"""Learning per-head λ to rank heads by how much they need input-dependent attention (paper 3.2).

Every head mixes its attention with its constant matrix, B = λA + (1 − λ)C, λ = sigmoid(θ) starting at 0.5;
θ trains together with a probe on the task. Heads with the smallest λ are replaced first.
"""
from __future__ import annotations

import torch

from papa.method.controller import PapaController
from papa.probing.features import EncodedTask, FeatureSource
from papa.probing.training import TrainSettings, make_probe, train_probe
from papa.tasks.registry import TaskSpec


def learn_lambdas(controller: PapaController, spec: TaskSpec, train: EncodedTask, settings: TrainSettings, *,
                  seed: int = 0, lambda_lr: float | None = None, progress: bool = True) -> torch.Tensor:
    """Train a probe and θ of every head jointly; return λ [L, H] (the heads go back to their previous modes)."""
    if controller.constants is None:
        raise ValueError("learning λ needs constants to mix with: call controller.set_constants(...) first")
    model = controller.model
    saved_modes, saved_theta = controller.modes.clone(), controller.theta.detach().clone()
    torch.manual_seed(seed)
    probe = make_probe(spec, model, train.inputs["input_ids"].shape[1]).to(controller.theta.device)
    try:
        controller.mix()  # all heads, λ = 0.5
        source = FeatureSource(model, train, trainable_backbone=True, progress=False)
        train_probe(probe, spec.kind, source, settings, seed=seed, extra_parameters=[controller.theta],
                    extra_lr=lambda_lr, progress=progress, desc=f"learn λ ({spec.name})")
        lambdas = controller.lambdas.detach().cpu().clone()
    finally:
        controller.modes.copy_(saved_modes)
        with torch.no_grad():
            controller.theta.copy_(saved_theta)
    return lambdas

"""Learning per-head λ to rank heads by how much they need input-dependent attention (paper 3.2).

Every head mixes its attention with its constant matrix, B = λA + (1 − λ)C, λ = sigmoid(θ) starting at 0.5;
θ trains together with a probe on the task. Heads with the smallest λ are replaced first.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import torch

from papa.core.errors import InputError
from papa.method.controller import PapaController
from papa.probing.checkpoint import TrainingCheckpoint
from papa.probing.features import EncodedTask, FeatureSource
from papa.probing.standardize import input_statistics
from papa.probing.training import TrainSettings, make_probe, train_probe
from papa.tasks.registry import TaskSpec


@dataclass
class LambdaTrace:
    """λ [L, H] recorded while it learns, after every `every` steps and the last, with the step and seconds."""

    every: int | None = None
    steps: list[int] = field(default_factory=list)
    lambdas: list[torch.Tensor] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.every is not None and (isinstance(self.every, bool) or not isinstance(self.every, int)
                                       or self.every < 1):
            raise InputError(f"LambdaTrace(every={self.every!r}): record λ every positive whole number of steps "
                             "(e.g. 10), or give None to record the final λ only.")

    @property
    def total_steps(self) -> int:
        """Optimizer steps of the whole run (0 before it ran)."""
        return self.steps[-1] if self.steps else 0

    def record(self, step: int, lambdas: torch.Tensor, seconds: float) -> None:
        """Add λ after `step` steps (a CPU copy is kept)."""
        self.steps.append(int(step))
        self.lambdas.append(lambdas.detach().cpu().clone())
        self.seconds.append(float(seconds))

    def to_tensors(self) -> dict[str, torch.Tensor]:
        """The record as tensors (``steps``, ``seconds``, ``lambdas`` [records, L, H]), to save with a checkpoint."""
        return {"steps": torch.tensor(self.steps, dtype=torch.int64, device="cpu"),
                "seconds": torch.tensor(self.seconds, dtype=torch.float64, device="cpu"),
                "lambdas": torch.stack(self.lambdas) if self.lambdas else torch.zeros(0, device="cpu")}

    def load_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        """Replace the record by the one `to_tensors` saved (nothing saved: an empty record)."""
        self.steps = [int(v) for v in tensors.get("steps", torch.zeros(0, device="cpu")).tolist()]
        self.seconds = [float(v) for v in tensors.get("seconds", torch.zeros(0, device="cpu")).tolist()]
        self.lambdas = list(tensors["lambdas"].unbind(0)) if self.steps else []


def learn_lambdas(controller: PapaController, spec: TaskSpec, train: EncodedTask, settings: TrainSettings, *,
                  seed: int = 0, lambda_lr: float | None = None, progress: bool = True,
                  trace: LambdaTrace | None = None, standardize: bool = False,
                  checkpoint: TrainingCheckpoint | None = None) -> torch.Tensor:
    """Train a probe and θ of every head jointly; return λ [L, H] (the heads go back to their previous modes).
    `lambda_lr` is θ's learning rate (None: the probe's); `trace` records λ along the way; `standardize` standardises
    the probe's inputs with statistics taken at the start; `checkpoint` makes it resumable."""
    if controller.constants is None:
        raise ValueError("learning λ needs constants to mix with: call controller.set_constants(...) first")
    model = controller.model
    saved_modes, saved_theta = controller.modes.clone(), controller.theta.detach().clone()
    torch.manual_seed(seed)
    probe = make_probe(spec, model, train.inputs["input_ids"].shape[1]).to(controller.theta.device)
    start = time.perf_counter()
    clock = (lambda: time.perf_counter() - start) if checkpoint is None else checkpoint.elapsed  # noqa: E731
    if checkpoint is not None and trace is not None:
        checkpoint.carry, checkpoint.on_restore = trace.to_tensors, trace.load_tensors

    def on_step(step: int) -> None:
        if trace.every is not None and step % trace.every == 0:
            with torch.no_grad():
                trace.record(step, controller.lambdas, clock())

    try:
        controller.mix()  # all heads, λ = 0.5
        source = FeatureSource(model, train, trainable_backbone=True, progress=False)
        if standardize:  # the source streams (no cache), and the statistics take no gradient
            probe.set_input_statistics(input_statistics(probe, source))
        losses = train_probe(probe, spec.kind, source, replace(settings, extra_learning_rate=lambda_lr), seed=seed,
                             extra_parameters=[controller.theta], progress=progress, desc=f"learn λ ({spec.name})",
                             on_step=None if trace is None else on_step, checkpoint=checkpoint)
        lambdas = controller.lambdas.detach().cpu().clone()
        if trace is not None and (not trace.steps or trace.total_steps != len(losses)):
            trace.record(len(losses), lambdas, clock())
    finally:
        controller.load_modes(saved_modes)
        with torch.no_grad():
            controller.theta.copy_(saved_theta)
    return lambdas

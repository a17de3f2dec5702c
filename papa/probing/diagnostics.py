"""Why a probe does not learn, in numbers: what its first layer reads, how saturated its hidden units are, and
whether its predictions are constant. A decoder's few massive dimensions can dominate a probe's inputs."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch
from torch import nn

from papa.core.vocabulary import PAPER_PROBE_INPUTS, PROBE_INPUTS
from papa.probing.probes import IGNORE_INDEX, SentenceProbe, TokenProbe
from papa.probing.standardize import input_statistics
from papa.probing.training import evaluate_probe, make_probe, train_probe

__all__ = ["ProbeDiagnosis", "constant_prediction_share", "diagnose_probe", "hidden_saturation", "input_scale",
           "mlp_inputs", "raw_vs_standardized"]

#: |pre-activation| above which tanh's gradient is below 0.071 (tanh'(2) = 1 - tanh(2)^2): a saturated unit.
SATURATED = 2.0


@torch.no_grad()
def mlp_inputs(probe: nn.Module, source, *, batch_size: int = 64) -> torch.Tensor:
    """The vectors `probe`'s MLP reads, [items, (L+1)*d], float64 on the CPU, over all of `source`: an item is an
    example (sentence probe) or a labelled token (token probe)."""
    if not isinstance(probe, (SentenceProbe, TokenProbe)):
        raise TypeError(f"mlp_inputs reads a SentenceProbe or TokenProbe, got {type(probe).__name__}")
    n = len(source.data)
    if n == 0:
        raise ValueError("the feature source holds no examples")
    out = []
    for start in range(0, n, batch_size):
        feats, mask, labels = source(torch.arange(start, min(start + batch_size, n), device="cpu"))
        x = probe.pool(feats, mask) if isinstance(probe, SentenceProbe) else probe.token_inputs(
            feats, labels != IGNORE_INDEX)
        out.append(x.double().cpu())
    return torch.cat(out)


def input_scale(inputs: torch.Tensor, num_layers: int, hidden_size: int) -> pd.DataFrame:
    """Per input dimension, largest `rms` first: its layer, dim, `rms`, `mean`, `std` and `share` of the inputs'
    sum of squares."""
    if inputs.dim() != 2 or inputs.shape[1] != num_layers * hidden_size:
        raise ValueError(f"inputs must be [items, {num_layers} * {hidden_size}], got {tuple(inputs.shape)}")
    x = inputs.double()
    square = (x ** 2).mean(0)
    dims = torch.arange(x.shape[1], device="cpu")
    table = pd.DataFrame({
        "layer": (dims // hidden_size).numpy(), "dim": (dims % hidden_size).numpy(),
        "rms": square.sqrt().numpy(), "mean": x.mean(0).numpy(), "std": x.std(0, correction=0).numpy(),
        "share": (square / square.sum().clamp_min(torch.finfo(torch.float64).tiny)).numpy(),
    })
    return table.sort_values("rms", ascending=False, kind="stable").reset_index(drop=True)


@torch.no_grad()
def hidden_saturation(probe: nn.Module, inputs: torch.Tensor, threshold: float = SATURATED) -> tuple[float, float]:
    """(share of the first hidden layer's pre-activations beyond ±`threshold`, their std) over `mlp_inputs`."""
    first = probe.mlp[0]
    pre = inputs.to(first.weight.dtype) @ first.weight.T + first.bias
    return float((pre.abs() > threshold).double().mean()), float(pre.double().std(correction=0))


def constant_prediction_share(predictions) -> float:
    """The share of items given the most frequent predicted label (1.0: the probe predicts one class for all)."""
    labels = torch.as_tensor(predictions, device="cpu").reshape(-1)
    if labels.numel() == 0:
        raise ValueError("no predictions")
    return float(torch.bincount(labels - labels.min()).max()) / labels.numel()


@dataclass(frozen=True)
class ProbeDiagnosis:
    """One probe's numbers: see `diagnose_probe`."""

    items: int
    saturated: float
    preactivation_std: float
    constant_predictions: float
    top_share: float
    top_dims: int
    top_std_over_rms: float


@torch.no_grad()
def diagnose_probe(probe: nn.Module, source, *, top: int = 10, batch_size: int = 64) -> ProbeDiagnosis:
    """Saturation, constant predictions and input scale of `probe` on `source`; `top_share` and `top_std_over_rms`
    describe the `top` largest input dimensions (0: the same value for every input)."""
    probe.eval()
    x = mlp_inputs(probe, source, batch_size=batch_size)
    saturated, spread = hidden_saturation(probe, x)
    logits = probe.mlp(x.to(probe.mlp[0].weight.dtype))
    scale = input_scale(x, probe.num_layers, probe.hidden_size).head(top)
    return ProbeDiagnosis(
        items=x.shape[0], saturated=saturated, preactivation_std=spread,
        constant_predictions=constant_prediction_share(logits.argmax(-1)),
        top_share=float(scale["share"].sum()), top_dims=len(scale),
        top_std_over_rms=float(scale["std"].sum() / max(scale["rms"].sum(), 1e-300)),
    )


def raw_vs_standardized(spec, model, train, evaluation, settings, *, seed: int = 0) -> pd.DataFrame:
    """One row per probe inputs (raw, standardized): the probe diagnosed before and after training on `train`, its
    first and last loss, and its metric on `evaluation`."""
    rows = {}
    for inputs in PROBE_INPUTS:
        torch.manual_seed(seed)
        probe = make_probe(spec, model, train.data.inputs["input_ids"].shape[1])
        if inputs != PAPER_PROBE_INPUTS:
            probe.set_input_statistics(input_statistics(probe, train))
        before = diagnose_probe(probe, train)
        losses = train_probe(probe, spec.kind, train, settings, seed=seed, progress=False)
        after = diagnose_probe(probe, train)
        rows[inputs] = {"saturated_at_init": before.saturated, "preactivation_std_at_init": before.preactivation_std,
                        "constant_predictions_at_init": before.constant_predictions,
                        "saturated_after": after.saturated, "constant_predictions_after": after.constant_predictions,
                        "first_loss": losses[0], "last_loss": losses[-1],
                        spec.metric: evaluate_probe(probe, spec, evaluation)}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("probe_inputs")

"""FLOPs of the speed table's rows (`bench.py`, `bench_headline.py`): per sequence, from `papa.method.cost`.

A row names its model by label and its variant by what it times; `row_flops_per_seq` counts the variant's FLOPs on
one sequence of the row's length (every slot, padding included): the forward variants a backbone pass with the
variant's share of heads constant (Q/K dropped), the steps a pass and the backward through the activations
(`papa.method.cost.step_flops`) with the sentence probe's step. Rows it cannot count (fine-tuning, the CoLA grid,
a decoder) get None.
"""
from __future__ import annotations

from papa.method.cost import ModelShape, encoder_shape, pass_flops, probe_flops, step_flops

#: The speed table's encoders by label: BERT-base and RoBERTa-large (random weights: the paper's shapes), MiniLM-L6.
BENCH_SHAPES: dict[str, ModelShape] = {
    "BERT-base (random)": encoder_shape(768, 3072, 12),
    "RoBERTa-large (random)": encoder_shape(1024, 4096, 24),
    "MiniLM-L6": encoder_shape(384, 1536, 6),
}
#: (prefix of a row's `what`, share of heads constant, kind): ``pass`` a forward, ``step`` a frozen-weight training
#: step with the sentence probe, ``lambda`` the λ step (every head mixed). First match wins.
VARIANTS: tuple[tuple[str, float, str], ...] = (
    ("plain forward", 0.0, "pass"), ("capture", 0.0, "pass"), ("naive", 0.0, "pass"),
    ("attention-free", 1.0, "pass"), ("1/2 input-dependent", 0.5, "pass"), ("1/8 input-dependent", 7 / 8, "pass"),
    ("1/16 input-dependent", 15 / 16, "pass"), ("plain step: frozen", 0.0, "step"), ("λ step", 0.0, "lambda"),
)


def shape_of(model: str) -> ModelShape | None:
    """The shape of a speed-table model label (a trailing " (random)" optional), or None."""
    return BENCH_SHAPES.get(model) or BENCH_SHAPES.get(f"{model} (random)")


def row_flops_per_seq(model: str, what: str, n: int) -> float | None:
    """FLOPs of one sequence of `n` tokens in the row of `model` that times `what`, or None (module docstring)."""
    shape = shape_of(model)
    match = next(((share, kind) for prefix, share, kind in VARIANTS if what.startswith(prefix)), None)
    if shape is None or match is None:
        return None
    share, kind = match
    if kind == "pass":
        return float(pass_flops(shape, n, replaced_share=share))
    probe = probe_flops("sentence", shape.num_layers + 1, shape.hidden, n, 2, step=True)
    return float(step_flops(shape, n, mixed=kind == "lambda") + probe)

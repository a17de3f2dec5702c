"""The speed table's headline: the method at the grid's shapes and at a saturating batch, beside its FLOPs.

    python -m benchmarks.bench --headline --hub DIR --device cuda --dtype bf16 --models bert-base

For BERT-base (random weights) and RoBERTa-large (DIR/roberta-large's config, random weights: time does not depend on
the weights' values), at Table 3's batch and length of each grid task (`GRID_TASKS`; tasks of one shape share a row)
and at a saturating batch (at least `SATURATING_TOKENS` tokens per timed call, in batches of at most
`BATCH_TOKENS`, so that a step's activations fit), one timing call per model and shape times: the plain forward,
capture, half the heads input-dependent (Q/K dropped), every head constant (Q/K dropped), the plain step (frozen
weights, gradient through the activations) and the λ step; every ratio divides two medians of that call. Each row
carries its FLOPs per sequence (`papa.method.cost`), TFLOP/s and share of the device's dense peak (`peaks.py`), and
is marked launch-bound under `peaks.LAUNCH_BOUND_SHARE` of it. Targets (capture ≥ 0.85×, half the heads ≥ 1.0×, the
λ step ≤ 1.3× the plain step) are judged on the saturating rows, where the arithmetic, not launches, sets the time.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from functools import partial

import torch

import papa
from papa.method.attention_free import restore_query_key
from papa.method.constants import data_free_constants
from papa.method.cost import config_ceiling, model_shape, pass_flops, probe_flops, step_flops
from papa.method.selection import replacement_order
from papa.tasks.registry import get_task

from benchmarks.cases import Case, EncoderBench

#: The grid's tasks whose Table-3 shapes the headline times (MNLI's n = 256 is the cost's, `full_cost.py`).
GRID_TASKS = ("sst2", "cola", "mrpc", "ner", "pos")
#: Tokens per timed call of the saturating shape, its length, and the most tokens in one of its batches.
SATURATING_TOKENS, SATURATING_LENGTH, BATCH_TOKENS = 65536, 128, 16384


@dataclass(frozen=True)
class Shape:
    """A headline shape: `label`, length `n`, `batch` sequences per batch, `batches` per timed call; `saturating`
    ones carry the targets."""

    label: str
    n: int
    batch: int
    batches: int
    saturating: bool = False


def headline_shapes(tasks: tuple[str, ...] = GRID_TASKS, tokens: int = SATURATING_TOKENS,
                    batch_tokens: int = BATCH_TOKENS, n: int = SATURATING_LENGTH) -> list[Shape]:
    """Table 3's (length, batch) of each task, tasks of one shape in one, then the saturating shape: batches of
    `batch_tokens` // n sequences of length n, enough of them for `tokens` tokens per call."""
    grouped: dict[tuple[int, int], list[str]] = {}
    for task in tasks:
        hp = get_task(task).hparams
        grouped.setdefault((hp.max_length, hp.batch_size), []).append(task)
    shapes = [Shape(f"{'/'.join(t.upper() for t in names)} (Table 3)", length, batch, 1)
              for (length, batch), names in grouped.items()]
    per = max(1, min(batch_tokens, tokens) // n)
    batches = math.ceil(tokens / (per * n))
    shapes.append(Shape(f"saturating, {per * batches * n:,} tokens per call", n, per, batches, saturating=True))
    return shapes


class HeadlineBench(EncoderBench):
    """One model at one headline shape: the six variants in one timing call (module docstring)."""

    def __init__(self, case: Case, texts: list[str]):
        from papa.probing.probes import SentenceProbe

        super().__init__(case, texts)
        cfg = case.model.config
        self.ctrl.set_constants(data_free_constants("toeplitz", self.ctrl.signature, case.n, self.layout))
        self.capture_model = copy.deepcopy(case.model)
        self.capture_ctrl = papa.attach(self.capture_model, model_name=case.name)
        self.frozen = copy.deepcopy(case.model).requires_grad_(False)
        self.labels = [torch.randint(2, (b["input_ids"].shape[0],), generator=torch.Generator().manual_seed(i)
                                     ).to(case.device) for i, b in enumerate(self.batches)]
        self.probe = SentenceProbe(cfg.num_hidden_layers + 1, cfg.hidden_size, case.n, 2).to(case.device)
        self.order = replacement_order("random", self.ctrl.num_layers, self.ctrl.num_heads, seed=0)

    def _mix(self) -> None:
        restore_query_key(self.ctrl)
        self.ctrl.keep_all()
        self.ctrl.mix()

    def time_all(self) -> dict[str, float]:
        """Medians of the six variants, one call (the model's first: two untimed rounds)."""
        variants = {"plain": self.run(self.plain), "capture": self.run(self.capture_model),
                    "1/2": (partial(self._configure, self.order, "1/2"), self.run(self.work)),
                    "attention-free": (partial(self._configure, self.order, "0"), self.run(self.work)),
                    "plain step": partial(self._steps, self.frozen, embeds=True),
                    "λ step": (self._mix, partial(self._steps, self.work))}
        with self.capture_ctrl.capturing(self.case.n):
            t = self.time(variants, warmup=2)
        restore_query_key(self.ctrl)
        self.ctrl.keep_all()
        return t


def flops_per_seq(config, n: int) -> dict[str, float]:
    """FLOPs of one sequence of each variant (the steps with the sentence probe's step)."""
    probe = probe_flops("sentence", config.num_hidden_layers + 1, config.hidden_size, n, 2, step=True)
    return {"plain": pass_flops(config, n), "capture": pass_flops(config, n),
            "1/2": pass_flops(config, n, replaced_share=0.5), "attention-free": pass_flops(config, n, replaced_share=1.0),
            "plain step": step_flops(config, n) + probe, "λ step": step_flops(config, n, mixed=True) + probe}


def headline_rows(bench: HeadlineBench, shape: Shape, t: dict[str, float]) -> None:
    """The six rows of one call's medians `t`, ratios within the call, targets on the saturating shape."""
    cfg, n, seqs = bench.case.model.config, bench.case.n, bench.seqs
    flops = flops_per_seq(cfg, n)
    judged = shape.saturating
    common = dict(batch=shape.batch)

    def add(key: str, what: str, ratio=None, of="", target="", met=None, note="") -> None:
        bench.add(f"[{shape.label}] {what}", seqs / t[key], ratio, of, None, target if judged else "",
                  met if judged else None, note, flops_per_seq=flops[key], **common)

    add("plain", "plain forward (sdpa)")
    r = t["plain"] / t["capture"]
    add("capture", "capture (papa)", r, "of plain", "≥ 0.85× plain", r >= 0.85)
    r = t["plain"] / t["1/2"]
    add("1/2", "1/2 input-dependent, Q/K dropped", r, "of plain", "≥ 1.0×", r >= 1.0)
    r, ceiling = t["plain"] / t["attention-free"], config_ceiling(model_shape(cfg), n)
    add("attention-free", "attention-free (all heads constant, Q/K dropped)", r, "of plain",
        note=f"{r / ceiling:.0%} of the MAC ceiling {ceiling:.2f}×")
    add("plain step", "plain step: frozen weights, grad through activations")
    r = t["λ step"] / t["plain step"]
    add("λ step", "λ step (θ + probe trainable)", r, "time of frozen plain step", "≤ 1.3×", r <= 1.3)


def bench_headline(case_for, models: list[tuple[str, object, object]], shapes: list[Shape], texts: list[str]) -> None:
    """Every model of `models` ((label, model, tokenizer)) at every shape; `case_for(label, model, tokenizer, shape)`
    makes the shape's `Case`."""
    for label, model, tok in models:
        for shape in shapes:
            bench = HeadlineBench(case_for(label, model, tok, shape), texts)
            headline_rows(bench, shape, bench.time_all())
            papa.detach(bench.work)
            papa.detach(bench.capture_model)
            del bench

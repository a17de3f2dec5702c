"""What parts 1, 2, 3 and 5 of the suite time on one model at one length (`Case`): the shared set-up (`ModelBench`)
and the encoder's parts (`EncoderBench`: capture, replacement, compiled variants, the λ step)."""
from __future__ import annotations

import copy
import gc
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial

import torch

import papa
from benchmarks.inputs import encoded_batches
from benchmarks.report import Report, Row
from benchmarks.timing import Variant, interleaved, peak_mib
from papa.method.attention_free import drop_query_key, restore_query_key
from papa.method.cost import config_speedups
from papa.method.selection import heads_to_replace, replacement_order

FRACTIONS = ("1/2", "1/8", "1/16")


@dataclass(frozen=True)
class Case:
    """One model at one length and how it is timed: `n_batches` batches of `batch_size` sequences each, `repeats`
    timed rounds under `autocast` on `device`, rows added to `report` under `name`."""

    name: str
    model: torch.nn.Module
    tokenizer: object
    n: int
    batch_size: int
    n_batches: int
    repeats: int
    autocast: Callable[[], AbstractContextManager]
    device: torch.device
    report: Report


def forward_pass(model, batches: list[dict[str, torch.Tensor]], autocast, **kwargs) -> None:
    """`model` over every batch without gradient, under `autocast`: what a forward variant times."""
    with torch.no_grad(), autocast():
        for b in batches:
            model(**b, **kwargs)


def naive_pass(model, batches: list[dict[str, torch.Tensor]], autocast, sums: torch.Tensor,
               counts: torch.Tensor | None = None, **kwargs) -> None:
    """The naive method: every layer's attention returned by the eager `model` (``output_attentions=True``),
    stacked and accumulated into `sums`, and the mask products into `counts` where given."""
    with torch.no_grad(), autocast():
        for b in batches:
            out = model(**b, **kwargs, output_attentions=True)
            probs = torch.stack(out.attentions, dim=1).float()  # [B, L, H, n, n]
            v = b["attention_mask"].to(probs.dtype)
            sums.add_(torch.einsum("blhij,bi,bj->lhij", probs, v, v))
            if counts is not None:
                counts.add_(torch.einsum("bi,bj->ij", v, v))


class ModelBench:
    """A case's batches, its plain model and a copy of the model papa is attached to (`work`, `ctrl`)."""

    #: The layout the batches are encoded in, and the keywords every forward variant passes.
    layout = "sep_last"
    forward_kwargs: dict = {}

    def __init__(self, case: Case, texts: list[str]):
        self.case = case
        self.batches = encoded_batches(case.tokenizer, texts, case.n, case.batch_size, case.n_batches, self.layout,
                                       case.model.config.model_type, case.device)
        self.seqs = sum(b["input_ids"].shape[0] for b in self.batches)  # what was timed, not what was asked
        self.plain = case.model
        self.work = copy.deepcopy(case.model)
        self.ctrl = papa.attach(self.work, model_name=case.name)

    def run(self, model) -> Callable[[], None]:
        """A forward variant: `model` over the case's batches (`forward_pass`)."""
        return partial(forward_pass, model, self.batches, self.case.autocast, **self.forward_kwargs)

    def time(self, variants: dict[str, Variant], warmup: int = 1) -> dict[str, float]:
        """`interleaved` at the case's repeats and device."""
        return interleaved(variants, self.case.repeats, self.case.device, warmup=warmup)

    def add(self, what: str, *args, **kwargs) -> Row:
        """A row of the case's model and length."""
        return self.case.report.add(self.case.name, self.case.n, what, *args, **kwargs)

    def naive_copy(self):
        """An eager-attention copy of the plain model, for the naive method."""
        eager = copy.deepcopy(self.case.model)
        eager.set_attn_implementation("eager")
        return eager


# ---- parts 1, 2, 3, 5 on one model and one length -----------------------------------------------------------------

class EncoderBench(ModelBench):
    """Parts 1, 2, 3 and 5, and the compiled variants, on one encoder at one length."""

    def capture(self) -> None:
        """Part 1: capture vs the plain forward vs the naive method; the captured averages become the constants."""
        c, cfg, ctrl = self.case, self.case.model.config, self.ctrl
        eager = self.naive_copy()
        # Both accumulators are allocated once, as for a corpus, so the timings are the per-batch cost of extraction.
        sums = torch.zeros(cfg.num_hidden_layers, cfg.num_attention_heads, c.n, c.n, dtype=torch.float64,
                           device=c.device)
        counts = torch.zeros(c.n, c.n, dtype=torch.float64, device=c.device)
        naive = partial(naive_pass, eager, self.batches, c.autocast, sums, counts)
        capture = self.run(self.work)
        with ctrl.capturing(c.n):
            # A model's first timing call is discarded (run once untimed, whole): a fresh model's first call ran whole
            # rounds slower on a GPU, which no one warm-up round absorbed.
            t = self.time({"plain": self.run(self.plain), "capture": capture, "naive": naive}, warmup=c.repeats + 1)
            mem = {k: peak_mib(fn_one, c.device) for k, fn_one in (
                ("plain", self.run(self.plain)), ("capture", capture), ("naive", naive))}
        sums.zero_(), counts.zero_()
        naive()
        with ctrl.capturing(c.n) as stats:
            capture()
        agree = float((stats.sums.to(c.device) - sums).abs().max() / sums.abs().max())
        accumulator_mib = stats.sums.numel() * stats.sums.element_size() / 2**20
        self.add("plain forward (sdpa)", self.seqs / t["plain"], peak_mib=mem["plain"])
        self.add("capture (papa)", self.seqs / t["capture"], t["plain"] / t["capture"], "of plain", mem["capture"],
                 "≥ 0.85× plain", t["plain"] / t["capture"] >= 0.85,
                 f"sums equal naive's to {agree:.0e} (relative); float64 accumulator {accumulator_mib:.0f} MiB, "
                 "allocated once per corpus")
        ok = t["naive"] / t["capture"] >= 2 and (mem["capture"] or 0) < (mem["naive"] or float("inf"))
        self.add("naive (eager, output_attentions)", self.seqs / t["naive"], t["naive"] / t["capture"],
                 "capture faster", mem["naive"], "capture ≥ 2× naive, less memory", ok)
        ctrl.set_constants(stats.to_constants(ctrl.signature, layout="sep_last"))
        del eager, naive, stats, sums, counts
        gc.collect()

    def replacement(self) -> torch.Tensor:
        """Parts 2 and 3: every head constant, and 1/2, 1/8, 1/16 of them input-dependent (Q/K dropped), vs the plain
        model. Returns the heads' replacement order (seeded random); leaves every head kept, Q/K restored."""
        c, ctrl = self.case, self.ctrl
        order = replacement_order("random", ctrl.num_layers, ctrl.num_heads, seed=0)
        configs = {"all replaced, Q/K dropped": "0", **{f"{f} input-dependent, Q/K dropped": f for f in FRACTIONS}}
        t = self.time({"plain": self.run(self.plain), **{
            k: (partial(self._configure, order, f), self.run(self.work)) for k, f in configs.items()}})
        theory = config_speedups(c.model.config, c.n)
        ceiling, head = theory["model_speedup_ceiling"], theory["head_speedup"]
        self.add("plain forward (sdpa), again", self.seqs / t["plain"])
        speed = t["plain"] / t["all replaced, Q/K dropped"]
        self.add("attention-free (all heads constant, Q/K dropped)", self.seqs / t["all replaced, Q/K dropped"],
                 speed, "of plain", None, f"≥ 95% of ceiling {ceiling:.2f}×", speed >= 0.95 * ceiling,
                 f"{speed / ceiling:.0%} of ceiling; MAC ceiling {ceiling:.2f}×, §3.4 head-level {head:.2f}×")
        for key, fraction in configs.items():
            if fraction == "0":
                continue
            kept = int((~heads_to_replace(order, fraction, ctrl.num_layers, ctrl.num_heads, "down")).sum())
            r = t["plain"] / t[key]
            self.add(key, self.seqs / t[key], r, "of plain", None, "≥ 1.0×", r >= 1.0, f"{kept} heads kept")
        restore_query_key(ctrl)
        ctrl.keep_all()
        return order

    def _configure(self, order: torch.Tensor, fraction: str) -> None:
        """A replacement variant's untimed set-up: `fraction` of the heads input-dependent, the others' Q/K dropped."""
        restore_query_key(self.ctrl)
        self.ctrl.keep_all()
        self.ctrl.replace(heads_to_replace(order, fraction, self.ctrl.num_layers, self.ctrl.num_heads, "down"))
        drop_query_key(self.ctrl)

    def compiled(self, order: torch.Tensor, backend: str) -> None:
        """`--compile`: the plain model and papa's variants under `torch.compile(backend)` (papa's variants with
        fullgraph=True: its forward pass has no host read); ratios against the compiled plain forward, and the eager
        plain forward timed in the same call (the "of eager plain" ratio and the notes). Each variant is its own copy
        of the model, configured once, so each compiles once, in the untimed warm-up round."""
        # Dynamo keeps the graphs of every earlier call under the same code objects (the layers' forward): four
        # variants per model and length passed its recompile limit of 8 at the second length of the second model.
        torch._dynamo.reset()
        half = heads_to_replace(order, "1/2", self.ctrl.num_layers, self.ctrl.num_heads, "down")
        capture_ctrl, capture_model = self._compiled_variant("keep", backend)
        variants = {"eager": self.run(self.plain), "plain": self.run(torch.compile(self.plain, backend=backend)),
                    "capture": self.run(capture_model),
                    "attention-free": self.run(self._compiled_variant(None, backend)[1]),
                    "1/2": self.run(self._compiled_variant(half, backend)[1])}
        # Two untimed rounds: a variant's second call compiled again in the smoke run (a guard on state its first call
        # set), which one warm-up round left inside the timed one (ratios of 0.00× at --repeats 1).
        with capture_ctrl.capturing(self.case.n):  # statistics allocated once, as for a corpus
            t = self.time(variants, warmup=2)
        self._compiled_rows(t, f"compiled ({backend})")

    def _compiled_variant(self, heads: torch.Tensor | None | str, backend: str):
        """(controller, compiled model) of a copy of the plain model with the constants set: `heads` replaced (None:
        every head) with their Q/K dropped, or "keep": nothing replaced (capture)."""
        model = copy.deepcopy(self.plain)
        c = papa.attach(model, model_name=self.case.name)
        c.set_constants(self.ctrl.constant_set)
        if not isinstance(heads, str):
            c.replace(heads)
            drop_query_key(c)
        return c, torch.compile(model, backend=backend, fullgraph=True)

    def _compiled_rows(self, t: dict[str, float], label: str) -> None:
        """The compiled variants' rows from one timing call's medians `t`."""
        seqs = self.seqs
        note = {key: f"{t['eager'] / t[key]:.2f}× this call's eager plain forward"
                for key in ("capture", "attention-free", "1/2")}
        self.add(f"plain forward (sdpa), eager, timed with the {label} rows", seqs / t["eager"])
        self.add(f"plain forward (sdpa), {label}", seqs / t["plain"], t["eager"] / t["plain"],
                 "of eager plain (same call)")
        self.add(f"capture (papa), {label}", seqs / t["capture"], t["plain"] / t["capture"], "of compiled plain", None,
                 "≥ 0.85× plain", t["plain"] / t["capture"] >= 0.85, note["capture"])
        self.add(f"attention-free (all heads constant, Q/K dropped), {label}", seqs / t["attention-free"],
                 t["plain"] / t["attention-free"], "of compiled plain", note=note["attention-free"])
        r = t["plain"] / t["1/2"]
        self.add(f"1/2 input-dependent, Q/K dropped, {label}", seqs / t["1/2"], r, "of compiled plain", None, "≥ 1.0×",
                 r >= 1.0, note["1/2"])

    def lambda_step(self) -> None:
        """Part 5: a λ-mixing training step (θ and a probe trainable) vs plain forward + backward steps; detaches papa
        from the work copy."""
        from papa.probing.probes import SentenceProbe

        c, cfg, ctrl = self.case, self.case.model.config, self.ctrl
        self.labels = [torch.randint(2, (b["input_ids"].shape[0],), generator=torch.Generator().manual_seed(i)
                                     ).to(c.device) for i, b in enumerate(self.batches)]
        self.probe = SentenceProbe(cfg.num_hidden_layers + 1, cfg.hidden_size, c.n, 2).to(c.device)
        finetune = copy.deepcopy(c.model).train()
        for mod in finetune.modules():  # dropout off: time the arithmetic, not the random masks
            if isinstance(mod, torch.nn.Dropout):
                mod.p = 0.0
        frozen = copy.deepcopy(c.model)
        frozen.requires_grad_(False)
        ctrl.mix()
        lam, frozen_steps = partial(self._lambda_steps, True), partial(self._steps, frozen, embeds=True)
        t = self.time({"lambda": lam, "lambda_plain_path": partial(self._lambda_steps, False),
                       "frozen": frozen_steps, "finetune": partial(self._steps, finetune)})
        mem_lam = peak_mib(lam, c.device)
        self.add("plain step: frozen weights, grad through activations", self.seqs / t["frozen"],
                 peak_mib=peak_mib(frozen_steps, c.device))
        self.add("plain step: fine-tuning (all weights trainable)", self.seqs / t["finetune"])
        r = t["lambda"] / t["frozen"]
        self.add("λ step (θ + probe trainable)", self.seqs / t["lambda"], r, "time of frozen plain step", mem_lam,
                 "≤ 1.3×", r <= 1.3, f"{t['lambda'] / t['finetune']:.2f}× the fine-tuning step's time")
        self.add("λ step, materialised probabilities (fast_paths=False)", self.seqs / t["lambda_plain_path"],
                 t["lambda_plain_path"] / t["frozen"], "time of frozen plain step")
        ctrl.keep_all()
        papa.detach(self.work)

    def _steps(self, model, embeds: bool = False) -> None:
        """A training step per batch: the probe's loss on `model`'s hidden states, backward; the gradients dropped."""
        from papa.probing.features import hidden_features

        for b, y in zip(self.batches, self.labels):
            with self.case.autocast():
                if embeds:  # frozen weights, gradient through every layer's activations (as λ needs)
                    x = model.embeddings.word_embeddings(b["input_ids"]).detach().requires_grad_()
                    rest = {k: v for k, v in b.items() if k != "input_ids"}
                    feats = torch.stack(model(inputs_embeds=x, **rest, output_hidden_states=True).hidden_states, 1)
                else:
                    feats = hidden_features(model, b)
                loss = torch.nn.functional.cross_entropy(self.probe(feats.float(), b["attention_mask"]), y)
            loss.backward()
        self.probe.zero_grad(set_to_none=True)
        model.zero_grad(set_to_none=True)
        self.ctrl.theta.grad = None

    def _lambda_steps(self, fast: bool) -> None:
        """λ steps on the work copy, papa's fast paths on or off (off: the probabilities materialised)."""
        self.ctrl.fast_paths = fast
        self._steps(self.work)
        self.ctrl.fast_paths = True


def bench_model(case: Case, texts: list[str], compile_backend: str | None = None) -> None:
    """Parts 1, 2, 3 and 5 on one encoder at one length, on batches of `texts` (with `compile_backend`, also its
    variants under `torch.compile`)."""
    encoder = EncoderBench(case, texts)
    encoder.capture()
    order = encoder.replacement()
    if compile_backend:
        encoder.compiled(order, compile_backend)
    encoder.lambda_step()

"""What the suite times on one model at one length (`Case`): capture, replacement, the compiled variants and the λ
step on an encoder (`EncoderBench`), capture and scoring text on a causal LM (`DecoderBench`)."""
from __future__ import annotations

import copy
import gc
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial

import torch

import papa
from benchmarks.suite import Report, Row, encoded_batches, interleaved, peak_mib
from papa.method.architectures import backbone
from papa.method.attention_free import drop_query_key, query_key_dropped_while, restore_query_key
from papa.method.cost import config_ceiling, config_speedups, head_speedup, model_cost, model_shape
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
    """The naive method: every layer's attention returned by the eager `model` (``output_attentions=True``), stacked
    and accumulated into `sums`, and the mask products into `counts` where given."""
    with torch.no_grad(), autocast():
        for b in batches:
            probs = torch.stack(model(**b, **kwargs, output_attentions=True).attentions, dim=1).float()
            v = b["attention_mask"].to(probs.dtype)
            sums.add_(torch.einsum("blhij,bi,bj->lhij", probs, v, v))
            if counts is not None:
                counts.add_(torch.einsum("bi,bj->ij", v, v))


class ModelBench:
    """A case's batches, its plain model, a copy papa is attached to (`work`, `ctrl`), and part 1 on them."""

    #: The layout the batches are encoded in, the keywords every forward variant passes, what a forward times of the
    #: model (the whole model, or a decoder's backbone), and what the rows of part 1 add to their names.
    layout, forward_kwargs, suffix = "sep_last", {}, ""

    def __init__(self, case: Case, texts: list[str]):
        self.case = case
        self.batches = encoded_batches(case.tokenizer, texts, case.n, case.batch_size, case.n_batches, self.layout,
                                       case.model.config.model_type, case.device)
        self.seqs = sum(b["input_ids"].shape[0] for b in self.batches)  # what was timed, not what was asked
        self.plain, self.work = case.model, copy.deepcopy(case.model)
        self.ctrl = papa.attach(self.work, model_name=case.name)

    def inner(self, model):
        """What a forward variant runs of `model`."""
        return model

    def run(self, model) -> Callable[[], None]:
        """A forward variant: `model` over the case's batches (`forward_pass`)."""
        return partial(forward_pass, model, self.batches, self.case.autocast, **self.forward_kwargs)

    def time(self, variants: dict, warmup: int = 1) -> dict[str, float]:
        """`interleaved` at the case's repeats and device."""
        return interleaved(variants, self.case.repeats, self.case.device, warmup=warmup)

    def add(self, what: str, *args, **kwargs) -> Row:
        """A row of the case's model and length."""
        return self.case.report.add(self.case.name, self.case.n, what, *args, **kwargs)

    def capture(self, counted: bool = True) -> None:
        """Part 1: capture vs the plain forward vs the naive method (eager, every layer's attention returned; with
        `counted`, the mask products too); the captured averages become the constants."""
        c, ctrl = self.case, self.ctrl
        eager = copy.deepcopy(c.model)
        eager.set_attn_implementation("eager")
        # Both accumulators are allocated once, as for a corpus: the timings are extraction's per-batch cost.
        sums = torch.zeros(ctrl.num_layers, ctrl.num_heads, c.n, c.n, dtype=torch.float64, device=c.device)
        counts = torch.zeros(c.n, c.n, dtype=torch.float64, device=c.device) if counted else None
        fns = {"plain": self.run(self.inner(self.plain)), "capture": self.run(self.inner(self.work)),
               "naive": partial(naive_pass, self.inner(eager), self.batches, c.autocast, sums, counts,
                                **self.forward_kwargs)}
        whole = {} if self.inner(self.work) is self.work else {"capture_lm": self.run(self.work)}
        with ctrl.capturing(c.n):
            # A model's first timing call is discarded (run once untimed, whole): a fresh model's first call ran whole
            # rounds slower on a GPU, which no one warm-up round absorbed.
            t = self.time({**fns, **whole}, warmup=c.repeats + 1)
            mem = {k: peak_mib(fn, c.device) for k, fn in fns.items()}
        sums.zero_()
        fns["naive"]()
        with ctrl.capturing(c.n) as stats:
            fns["capture"]()
        agree = float((stats.sums.to(c.device) - sums).abs().max() / sums.abs().max())
        mib = stats.sums.numel() * stats.sums.element_size() / 2**20
        r = t["plain"] / t["capture"]
        self.add(f"plain forward (sdpa){self.suffix}", self.seqs / t["plain"], peak_mib=mem["plain"])
        self.add(f"capture (papa){self.suffix}", self.seqs / t["capture"], r, "of plain", mem["capture"],
                 "≥ 0.85× plain", r >= 0.85, f"sums equal naive's to {agree:.0e} (relative); float64 accumulator "
                 f"{mib:.0f} MiB, allocated once per corpus")
        if whole:
            self.add("capture through the LM head (the whole model)", self.seqs / t["capture_lm"],
                     t["plain"] / t["capture_lm"], "of plain", note="what capture costs when the whole LM runs (the "
                     "vocabulary projection is thrown away); extract_constants runs the backbone, the row above")
        ok = t["naive"] / t["capture"] >= 2 and (mem["capture"] or 0) < (mem["naive"] or float("inf"))
        self.add("naive (eager, output_attentions)", self.seqs / t["naive"], t["naive"] / t["capture"],
                 "capture faster", mem["naive"], "capture ≥ 2× naive, less memory", ok)
        ctrl.set_constants(stats.to_constants(ctrl.signature, layout=self.layout))
        del eager, fns, stats, sums, counts
        gc.collect()


class EncoderBench(ModelBench):
    """Parts 1, 2, 3 and 5, and the compiled variants, on one encoder at one length."""

    def replacement(self) -> torch.Tensor:
        """Parts 2 and 3: every head constant, and 1/2, 1/8, 1/16 of them input-dependent (Q/K dropped), vs the plain
        model. Returns the heads' replacement order (seeded random); leaves every head kept, Q/K restored."""
        c, ctrl = self.case, self.ctrl
        order = replacement_order("random", ctrl.num_layers, ctrl.num_heads, seed=0)
        configs = {"all replaced, Q/K dropped": "0", **{f"{f} input-dependent, Q/K dropped": f for f in FRACTIONS}}
        t = self.time({"plain": self.run(self.plain), **{
            k: (partial(self.configure, order, f), self.run(self.work)) for k, f in configs.items()}})
        theory = config_speedups(c.model.config, c.n)
        ceiling, head = theory["model_speedup_ceiling"], theory["head_speedup"]
        self.add("plain forward (sdpa), again", self.seqs / t["plain"])
        speed = t["plain"] / t["all replaced, Q/K dropped"]
        self.add("attention-free (all heads constant, Q/K dropped)", self.seqs / t["all replaced, Q/K dropped"],
                 speed, "of plain", None, f"≥ 95% of ceiling {ceiling:.2f}×", speed >= 0.95 * ceiling,
                 f"{speed / ceiling:.0%} of ceiling; MAC ceiling {ceiling:.2f}×, §3.4 head-level {head:.2f}×")
        for key, fraction in list(configs.items())[1:]:
            kept = int((~heads_to_replace(order, fraction, ctrl.num_layers, ctrl.num_heads, "down")).sum())
            r = t["plain"] / t[key]
            self.add(key, self.seqs / t[key], r, "of plain", None, "≥ 1.0×", r >= 1.0, f"{kept} heads kept")
        restore_query_key(ctrl)
        ctrl.keep_all()
        return order

    def configure(self, order: torch.Tensor, fraction: str | None) -> None:
        """A variant's untimed set-up: `fraction` of the heads input-dependent, the others' Q/K dropped (None: every
        head mixed, Q/K kept)."""
        restore_query_key(self.ctrl)
        self.ctrl.keep_all()
        if fraction is None:
            self.ctrl.mix()
            return
        self.ctrl.replace(heads_to_replace(order, fraction, self.ctrl.num_layers, self.ctrl.num_heads, "down"))
        drop_query_key(self.ctrl)

    def compiled(self, order: torch.Tensor, backend: str) -> None:
        """`--compile`: the plain model and papa's variants (fullgraph: papa's forward has no host read) under
        `torch.compile(backend)`, each its own copy configured once, so each compiles once in the untimed rounds;
        ratios against the compiled plain forward and the eager one timed in the same call."""
        # Dynamo keeps the graphs of every earlier call under the same code objects (the layers' forward): four
        # variants per model and length passed its recompile limit of 8 at the second length of the second model.
        torch._dynamo.reset()
        half = heads_to_replace(order, "1/2", self.ctrl.num_layers, self.ctrl.num_heads, "down")
        capture_ctrl, capture_model = self._compiled_variant("keep", backend)
        t = {"eager": self.run(self.plain), "plain": self.run(torch.compile(self.plain, backend=backend)),
             "capture": self.run(capture_model), "attention-free": self.run(self._compiled_variant(None, backend)[1]),
             "1/2": self.run(self._compiled_variant(half, backend)[1])}
        # Two untimed rounds: a variant's second call compiled again in the smoke run (a guard on state its first call
        # set), which one warm-up round left inside the timed one.
        with capture_ctrl.capturing(self.case.n):  # statistics allocated once, as for a corpus
            t = self.time(t, warmup=2)
        label, seqs = f"compiled ({backend})", self.seqs
        note = {k: f"{t['eager'] / t[k]:.2f}× this call's eager plain forward" for k in t}
        self.add(f"plain forward (sdpa), eager, timed with the {label} rows", seqs / t["eager"])
        self.add(f"plain forward (sdpa), {label}", seqs / t["plain"], t["eager"] / t["plain"],
                 "of eager plain (same call)")
        r = t["plain"] / t["capture"]
        self.add(f"capture (papa), {label}", seqs / t["capture"], r, "of compiled plain", None, "≥ 0.85× plain",
                 r >= 0.85, note["capture"])
        self.add(f"attention-free (all heads constant, Q/K dropped), {label}", seqs / t["attention-free"],
                 t["plain"] / t["attention-free"], "of compiled plain", note=note["attention-free"])
        r = t["plain"] / t["1/2"]
        self.add(f"1/2 input-dependent, Q/K dropped, {label}", seqs / t["1/2"], r, "of compiled plain", None, "≥ 1.0×",
                 r >= 1.0, note["1/2"])

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

    def step_setup(self) -> None:
        """The steps' probe (sentence, 2 classes) and each batch's seeded labels."""
        from papa.probing.probes import SentenceProbe

        c, cfg = self.case, self.case.model.config
        self.labels = [torch.randint(2, (b["input_ids"].shape[0],), generator=torch.Generator().manual_seed(i)
                                     ).to(c.device) for i, b in enumerate(self.batches)]
        self.probe = SentenceProbe(cfg.num_hidden_layers + 1, cfg.hidden_size, c.n, 2).to(c.device)

    def lambda_step(self) -> None:
        """Part 5: a λ step (θ and a probe trainable) vs plain forward + backward steps; detaches papa from `work`."""
        c, ctrl = self.case, self.ctrl
        self.step_setup()
        finetune = copy.deepcopy(c.model).train()
        for mod in finetune.modules():  # dropout off: time the arithmetic, not the random masks
            if isinstance(mod, torch.nn.Dropout):
                mod.p = 0.0
        frozen = copy.deepcopy(c.model).requires_grad_(False)
        ctrl.mix()
        lam, frozen_steps = partial(self._lambda_steps, True), partial(self.steps, frozen, embeds=True)
        t = self.time({"lambda": lam, "lambda_plain_path": partial(self._lambda_steps, False),
                       "frozen": frozen_steps, "finetune": partial(self.steps, finetune)})
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

    def steps(self, model, embeds: bool = False) -> None:
        """A training step per batch: the probe's loss on `model`'s hidden states, backward (with `embeds`, through
        every layer's activations into frozen weights, as λ needs); the gradients dropped."""
        from papa.probing.features import hidden_features

        for b, y in zip(self.batches, self.labels):
            with self.case.autocast():
                if embeds:
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
        self.steps(self.work)
        self.ctrl.fast_paths = True


def bench_model(case: Case, texts: list[str], compile_backend: str | None = None) -> None:
    """Parts 1, 2, 3 and 5 on one encoder at one length (with `compile_backend`, also under `torch.compile`)."""
    encoder = EncoderBench(case, texts)
    encoder.capture()
    order = encoder.replacement()
    if compile_backend:
        encoder.compiled(order, compile_backend)
    encoder.lambda_step()


# ---- the decoder -------------------------------------------------------------------------------------------------

def decoder_texts(tokenizer, paragraphs: list[str], n: int, count: int) -> list[str]:
    """`count` texts of at least `n` tokens, each consecutive paragraphs joined by newlines (as a causal LM scores a
    document: full windows, no padding). Raises when the paragraphs run out."""
    texts, start = [], 0
    while len(texts) < count:
        end = start + 1
        while len(tokenizer("\n".join(paragraphs[start:end]))["input_ids"]) < n:
            end += 1
            if end > len(paragraphs):
                raise ValueError(f"{len(paragraphs)} paragraphs give only {len(texts)} texts of {n} tokens")
        texts.append("\n".join(paragraphs[start:end]))
        start = end
    return texts


LOGITS_CHUNK_BYTES = 16 << 20  # logits scored at once: a [B, n, vocab] tensor is 200 MB at B·n = 1024


def score_pass(model, batches: list[dict[str, torch.Tensor]], autocast) -> None:
    """Score every batch's text without gradient: the negative log-likelihood of each real token after the first, the
    LM head applied a chunk of positions at a time (`LOGITS_CHUNK_BYTES`), every position's logits computed."""
    head = model.get_output_embeddings()
    rows = max(1, LOGITS_CHUNK_BYTES // (4 * head.out_features))
    with torch.no_grad(), autocast():
        for b in batches:
            hidden = backbone(model)(**b, use_cache=False).last_hidden_state[:, :-1].flatten(0, 1)
            targets, real = b["input_ids"][:, 1:].flatten(), b["attention_mask"][:, 1:].flatten()
            for r in range(0, hidden.shape[0], rows):
                nll = torch.nn.functional.cross_entropy(head(hidden[r:r + rows]).float(), targets[r:r + rows],
                                                        reduction="none")
                float((nll * real[r:r + rows]).sum())


class DecoderBench(ModelBench):
    """Parts 1 and 2 on a causal LM, on windows of consecutive paragraphs: capture on the backbone's hidden states
    (and through the LM head), and scoring text with every head constant and Q/K dropped vs the original."""

    layout, forward_kwargs, suffix = "standard", {"use_cache": False}, ", hidden states"

    def __init__(self, case: Case, paragraphs: list[str]):
        super().__init__(case, decoder_texts(case.tokenizer, paragraphs, case.n, case.batch_size * case.n_batches))

    def inner(self, model):
        return backbone(model)

    def score(self) -> None:
        """Part 2: scoring text (LM head) and hidden states, every head constant with Q/K dropped, vs the original,
        each against its whole-model MAC ceiling; detaches papa from the work copy."""
        c, ctrl, n, seqs = self.case, self.ctrl, self.case.n, self.seqs
        score, score_const = (partial(score_pass, m, self.batches, c.autocast) for m in (self.plain, self.work))
        ctrl.keep_all()
        ctrl.replace()
        with query_key_dropped_while(ctrl):
            t = self.time({"score": score, "score_const": score_const, "hidden": self.run(backbone(self.plain)),
                           "hidden_const": self.run(backbone(self.work))})
            mem = {"score": peak_mib(score, c.device), "score_const": peak_mib(score_const, c.device)}
        ctrl.keep_all()
        papa.detach(self.work)
        del score_const
        self.work = None
        gc.collect()
        cfg = c.model.config
        tokens = sum(int(b["attention_mask"].sum()) for b in self.batches)
        shape = model_shape(cfg)
        grouped = shape.num_kv_heads < shape.num_heads
        for key, label, lm_head in (("score", "score text (LM head, log-probs)", True),
                                    ("hidden", "hidden states (no LM head)", False)):
            ceiling = config_ceiling(cfg, n, lm_head=lm_head)
            triangular = config_ceiling(cfg, n, lm_head=lm_head, triangular=True)
            # What papa's own path can reach (full n² products on both sides): K kept where keys are grouped.
            papa_path = model_cost(cfg, n, lm_head=lm_head).total / model_cost(
                cfg, n, replaced_share=1.0, kv_replaced_share=0.0 if grouped else 1.0, lm_head=lm_head).total
            self.add(f"{label}, original", seqs / t[key], peak_mib=mem.get(key),
                     note=f"{tokens / t[key]:.0f} tokens/s; {tokens} real tokens in {seqs * n} slots")
            speed = t[key] / t[f"{key}_const"]
            self.add(f"{label}, all heads constant, Q/K dropped", seqs / t[f"{key}_const"], speed, "of plain",
                     mem.get(f"{key}_const"), f"≥ 95% of ceiling {ceiling:.2f}×", speed >= 0.95 * ceiling,
                     f"{speed / ceiling:.0%} of ceiling; {tokens / t[f'{key}_const']:.0f} tokens/s; MAC ceiling "
                     f"{ceiling:.3f}× (full n² products; {triangular:.3f}× triangular; {papa_path:.3f}× with K kept, "
                     f"as papa's grouped-query path runs), §3.4 head-level {head_speedup(n, shape.head_dim):.2f}×")


def bench_decoder(case: Case, paragraphs: list[str]) -> None:
    """Parts 1 and 2 on a causal LM at one length (`DecoderBench`), on windows of consecutive `paragraphs`."""
    decoder = DecoderBench(case, paragraphs)
    decoder.capture(counted=False)
    decoder.score()

"""PAPA performance suite (issue 6): one process, the same batches for every variant, a markdown table at the end.

    python benchmarks/bench.py            # full run (2 CPU threads: several minutes)
    python benchmarks/bench.py --quick    # smoke run: small batches, fewer repeats
    python benchmarks/bench.py --dtype bf16 --device cuda
    python benchmarks/bench.py --models smollm2   # the decoder alone

Comparisons, per model (the offline all-MiniLM-L6-v2 and a random BERT-base: 12 layers, 768 hidden, 12 heads)
and sequence length (128, 512):

1. capture of attention statistics inside attention (`ctrl.capturing`) vs the plain sdpa forward and vs the naive
   method (eager model, ``output_attentions=True``, every layer stacked and accumulated); both accumulate into
   statistics allocated once, as extraction does once per corpus;
2. attention-free inference (every head constant, Q/K projections dropped) vs the plain model, beside the
   section-3.4 head-level ratio and the whole-model multiply-accumulate ceiling;
3. partial replacement (1/2, 1/8, 1/16 of heads input-dependent, heads in a seeded random ranking order, Q/K
   computed for kept heads only) vs the plain model;
5. one λ-mixing training step (forward + backward, θ and a probe trainable) vs plain forward + backward steps;

on the decoder SmolLM2-135M-Instruct (``--models smollm2``: 30 layers, 9 query heads sharing 3 key/value heads, the
offline 4-bit GGUF dequantised to float32), on WikiText windows of n tokens (consecutive paragraphs joined, so no
padding, as a causal LM scores a document):

1. capture vs the plain sdpa forward of the backbone (hidden states, what extraction needs) and vs the naive
   method, plus capture through the whole model (LM head included, as `extract_constants` calls it);
2. scoring text (logits of every token, log-probabilities of the real ones) with every head constant and Q/K dropped
   vs the original, against the whole-model MAC ceiling with the LM head (`papa.method.cost`), and the same on
   hidden states against the ceiling without it;

and once, on MiniLM:

4. the probing grid of CoLA (5 fractions x 3 seeds x 15 epochs) with stored features (the runner's feature store)
   vs re-running the backbone for every batch (``PAPA_FEATURE_STORE=backbone``), on a subset (sizes printed).

Timings interleave the variants (round-robin, `--repeats` rounds after an untimed one) and report medians, so slow
drift of a shared machine hits every variant alike; every ratio divides medians of one such timing call, and each
model's first call is run once untimed and discarded. Every batch holds exactly the sequences `--batch` asks for
(the run stops otherwise), and seq/s divides by the sequences timed. Peak memory on the CPU is the rise of the
process's peak RSS during one batch (Linux /proc; large allocations are forced to mmap so freed memory is returned),
on CUDA the allocator's peak.
"""
from __future__ import annotations

import argparse
import copy
import ctypes
import gc
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import torch

import papa
from papa.method.attention_free import drop_query_key, restore_query_key
from papa.method.cost import config_speedups
from papa.method.layout import encode
from papa.method.selection import heads_to_replace, replacement_order

FRACTIONS = ("1/2", "1/8", "1/16")


# ---- measurement helpers ----------------------------------------------------------------------------------------

def cpu_name() -> str:
    """The CPU's model name and core count (platform.processor() is empty on many Linux machines)."""
    try:
        with open("/proc/cpuinfo") as fh:
            name = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        name = platform.processor() or platform.machine()
    return f"{name}, {os.cpu_count()} cores"


def _mmap_threshold(size: int) -> None:
    """glibc's M_MMAP_THRESHOLD: blocks above it are mmap-ed and go back to the OS when freed."""
    try:
        ctypes.CDLL("libc.so.6").mallopt(-3, size)
    except (OSError, AttributeError):
        pass


def _rss_kib(field_name: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field_name):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def peak_mib(fn: Callable[[], None], device: torch.device) -> float | None:
    """Extra peak memory (MiB) of one call of `fn`."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn()
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - base) / 2**20
    # Small threshold while measuring only: every large block then shows in RSS and is returned on free (timed
    # runs keep glibc's large threshold, since page-faulting fresh mmaps would slow them down).
    _mmap_threshold(1 << 16)
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # resets VmHWM to the current RSS
    except (OSError, AttributeError):
        _mmap_threshold(32 << 20)
        return None
    base = _rss_kib("VmRSS:")
    fn()
    top = _rss_kib("VmHWM:")
    _mmap_threshold(32 << 20)
    return None if base is None or top is None else (top - base) / 1024


Variant = Callable[[], None] | tuple[Callable[[], None], Callable[[], None]]
#: What `interleaved` times with: wall-clock seconds (default), or the process's CPU seconds (``--clock cpu``), which
#: on a machine shared with other jobs counts only the time this process ran (use with ``--threads 1``: with more
#: threads, OpenMP's spin-waits for a descheduled thread count as CPU time too).
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = CLOCKS["wall"]


def interleaved(variants: dict[str, Variant], repeats: int, device: torch.device, warmup: int = 1
                ) -> dict[str, float]:
    """Median seconds of each variant, measured round-robin after `warmup` untimed rounds.

    A variant is a callable, or (setup, callable) where the untimed setup runs before each timed call. Every ratio
    the suite reports divides two medians of one call: variants timed in different calls moved apart by up to 1.7×
    on a GPU (a fresh model's first call, H200 bf16: plain forward 8,670 vs 14,664 seq/s later in the process).
    """
    times: dict[str, list[float]] = {k: [] for k in variants}
    for r in range(repeats + warmup):
        for name, variant in variants.items():
            setup, fn = variant if isinstance(variant, tuple) else (None, variant)
            if setup is not None:
                setup()
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = clock()
            fn()
            if device.type == "cuda":
                torch.cuda.synchronize()
            if r >= warmup:
                times[name].append(clock() - start)
    return {k: statistics.median(v) for k, v in times.items()}


# ---- inputs and models ------------------------------------------------------------------------------------------

def texts_for(count: int, data_dir: str | None) -> tuple[list[str], str]:
    """Long real texts (WikiText paragraphs) when the data directory has them, else seeded random words."""
    try:
        from papa.tasks.corpus import task_corpus

        texts = [t for t in task_corpus("mlm", "train", data_dir=data_dir).texts if len(t.split()) > 60]
        if len(texts) >= count:
            return texts[:count], "WikiText-103 validation paragraphs (> 60 words)"
    except Exception as exc:  # noqa: BLE001 -- any data problem: fall back to synthetic text
        print(f"(no WikiText: {exc}; using random words)", file=sys.stderr)
    g = torch.Generator().manual_seed(0)
    words = "the a of and to in is was film good bad very not it this that plot actor story city river".split()
    texts = [" ".join(words[i] for i in torch.randint(len(words), (400,), generator=g).tolist()) for _ in range(count)]
    return texts, "seeded random words"


def batch_sizes(lengths: list[int], batch: list[int] | None, quick: bool) -> dict[int, int]:
    """Sequences per batch at each length: `batch` in the order of `lengths`, else 8 at n = 128 and 2 at 512 (--quick
    4 and 1; 2 at any other length)."""
    if batch is not None and len(batch) != len(lengths):
        raise ValueError(f"--batch gives {len(batch)} sizes for {len(lengths)} lengths {lengths}")
    default = {128: 4 if quick else 8, 512: 1 if quick else 2}
    return dict(zip(lengths, batch)) if batch else {n: default.get(n, 2) for n in lengths}


def texts_needed(sizes: dict[int, int], n_batches: int) -> int:
    """Texts the encoders' batches take: every length draws its batches from the same texts."""
    return n_batches * max(sizes.values())


def encoded_batches(tokenizer, texts: list[str], n: int, batch_size: int, n_batches: int, layout: str,
                    model_type: str, device: torch.device) -> list[dict[str, torch.Tensor]]:
    """`n_batches` batches of exactly `batch_size` texts each, encoded at length `n`. Raises when the texts run out:
    a short batch would be timed as if it held `batch_size` sequences (GPU tables before issue 39 reported seq/s at
    n = 128 twice too high that way)."""
    if len(texts) < batch_size * n_batches:
        raise ValueError(f"{n_batches} batches of {batch_size} sequences need {batch_size * n_batches} texts, "
                         f"got {len(texts)}")
    batches = []
    for i in range(n_batches):
        chunk = texts[i * batch_size:(i + 1) * batch_size]
        inputs = encode(tokenizer, chunk, max_length=n, layout=layout, model_type=model_type).inputs
        if inputs["input_ids"].shape[0] != batch_size:
            raise ValueError(f"batch {i} holds {inputs['input_ids'].shape[0]} sequences, not {batch_size}")
        batches.append({k: v.to(device) for k, v in inputs.items()})
    return batches


#: A smoke run's model size (`random_model_dir(tiny=True)`): the code paths of the real size, in milliseconds.
TINY = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128}


def random_model_dir(config_dir: Path, out: Path, seed: int = 0, tiny: bool = False) -> Path:
    """Save a model built from `config_dir`'s config with seeded random weights, beside its tokenizer files (where a
    model's weights cannot travel: time does not depend on their values). `tiny` shrinks it to `TINY`."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    config = AutoConfig.from_pretrained(config_dir)
    if tiny:
        for key, value in TINY.items():
            setattr(config, key, value)
    torch.manual_seed(seed)
    model = AutoModel.from_config(config)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(config_dir).save_pretrained(out)
    return out


def bert_base(vocab_size: int, seed: int = 0, tiny: bool = False):
    """A random BERT-base-sized encoder (12 layers, 768 hidden, 12 heads, 3072 feed-forward; `tiny`: `TINY`)."""
    from transformers import AutoModel, BertConfig

    size = TINY if tiny else dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
    config = BertConfig(vocab_size=vocab_size, max_position_embeddings=512, **size)
    torch.manual_seed(seed)
    model = AutoModel.from_config(config, attn_implementation="sdpa").eval()
    model.config._name_or_path = "random-bert-base"
    return model


@dataclass
class Row:
    model: str
    n: int
    what: str
    seq_s: float | None = None
    ratio: float | None = None
    ratio_of: str = ""
    peak_mib: float | None = None
    target: str = ""
    met: bool | None = None
    note: str = ""
    batch: int | None = None              # sequences per batch, where the row's differs from the run's
    flops_per_seq: float | None = None    # `bench_flops` / `papa.method.cost`
    tflops: float | None = None           # seq/s × FLOPs per sequence
    peak_share: float | None = None       # of the device's dense peak in the run's precision (`peaks.py`)
    launch_bound: bool | None = None      # under `peaks.LAUNCH_BOUND_SHARE` of that peak


def arithmetic(row: Row, peak: float | None, count: bool = True) -> None:
    """Fill `row`'s FLOPs per sequence (where it has none: `bench_flops`, when `count`), TFLOP/s, share of `peak` and
    launch-bound mark."""
    from bench_flops import row_flops_per_seq
    from peaks import launch_bound, share_of_peak

    if row.flops_per_seq is None and count:
        row.flops_per_seq = row_flops_per_seq(row.model, row.what, row.n)
    if row.flops_per_seq and row.seq_s:
        row.tflops = row.seq_s * row.flops_per_seq / 1e12
        row.peak_share, row.launch_bound = share_of_peak(row.tflops, peak), launch_bound(row.tflops, peak)


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    peak: float | None = None   # the device's dense peak in the run's precision (TFLOP/s); None on a CPU
    count: bool = True          # count FLOPs by model label (not for --tiny: the labels name the real sizes)

    def add(self, *args, **kwargs) -> Row:
        row = Row(*args, **kwargs)
        arithmetic(row, self.peak, self.count)
        self.rows.append(row)
        print(_format_row(row), flush=True)
        return row


def _fmt(x: float | None, spec: str) -> str:
    return "–" if x is None else format(x, spec)


def _format_row(r: Row) -> str:
    verdict = "" if r.met is None else ("met" if r.met else "**not met**")
    ratio = "" if r.ratio is None else f"{r.ratio:.2f}× {r.ratio_of}".strip()
    share = "" if r.peak_share is None else f"{r.peak_share:.1%}{', launch-bound' if r.launch_bound else ''}"
    return (f"| {r.model} | {r.n} | {r.what} | {_fmt(r.seq_s, '.1f')} | {_fmt(r.tflops, '.1f')} | {share} | {ratio} | "
            f"{_fmt(r.peak_mib, '.0f')} | {r.target} | {verdict} | {r.note} |")


HEADER = ("| model | n | what | seq/s | TFLOP/s | % of peak | ratio | peak MiB | target | verdict | note |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|")


# ---- what every part times: one model at one length ---------------------------------------------------------------

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


# ---- part 4: the probing grid with and without stored features ---------------------------------------------------

class ProbeGrid:
    """Part 4's probing grid of CoLA (`fractions` x `seeds`, Table 3's epochs) on a copy of a model with average
    constants from the training inputs."""

    fractions, seeds = ("1", "1/2", "1/8", "1/16", "0"), (0, 1, 2)

    def __init__(self, model, tokenizer, train_size: int, eval_size: int, data_dir):
        from papa.probing.features import encode_task
        from papa.probing.training import TrainSettings
        from papa.tasks.data import load_examples
        from papa.tasks.registry import get_task

        self.spec = spec = get_task("cola")
        self.n = n = spec.hparams.max_length
        self.train_size, self.eval_size = train_size, eval_size
        train_examples = load_examples(spec, "train", data_dir, limit=train_size)
        self.train = encode_task(tokenizer, spec, train_examples, max_length=n, model_type="bert", layout="sep_last")
        self.dev = encode_task(tokenizer, spec, load_examples(spec, "eval", data_dir, limit=eval_size), max_length=n,
                               model_type="bert", layout="sep_last")
        self.work = copy.deepcopy(model)
        # Average constants from the training inputs (paper 3.1); not timed, both variants share them.
        self.ctrl = papa.attach(self.work, papa.extract_constants(
            self.work, tokenizer, [e.text for e in train_examples], max_length=n, layout="sep_last", progress=False))
        self.order = replacement_order("random", self.ctrl.num_layers, self.ctrl.num_heads, seed=0)
        self.settings = TrainSettings.from_task(spec)

    def run(self, store: str | None, autocast) -> tuple[float, list[float], list[list[float]]]:
        """(seconds, scores, losses) of the whole grid with ``PAPA_FEATURE_STORE`` = `store`."""
        from papa.probing.feature_store import STORE_ENV
        from papa.probing.features import FeatureSource
        from papa.probing.training import evaluate_probe, make_probe, train_probe

        # The re-run path is forced (PAPA_FEATURE_STORE=backbone): since issue 39 a zero cache budget only sends the
        # features to the next store (disk). None: the store the runner picks.
        if store is None:
            os.environ.pop(STORE_ENV, None)
        else:
            os.environ[STORE_ENV] = store
        ctrl, spec, work = self.ctrl, self.spec, self.work
        start = clock()
        scores, losses = [], []
        for fraction in self.fractions:
            ctrl.keep_all()
            if fraction != "1":
                ctrl.replace(heads_to_replace(self.order, fraction, ctrl.num_layers, ctrl.num_heads, "down"))
            with autocast():
                sources = [FeatureSource(work, d, trainable_backbone=False, progress=False)
                           for d in (self.train, self.dev)]
            for seed in self.seeds:
                torch.manual_seed(seed)
                probe = make_probe(spec, work, self.n).to(next(work.parameters()).device)
                with autocast():
                    losses.append(train_probe(probe, spec.kind, sources[0], self.settings, seed=seed,
                                              progress=False))
                    scores.append(evaluate_probe(probe, spec, sources[1]))
            for source in sources:
                source.close()
        return clock() - start, scores, losses

    def add_rows(self, report: Report, cached: tuple, fresh: tuple) -> None:
        """The rows of the grid timed with stored features (`cached`) and re-running the backbone (`fresh`)."""
        (cached_s, cached_scores, cached_losses), (fresh_s, fresh_scores, fresh_losses) = cached, fresh
        identical = cached_scores == fresh_scores and cached_losses == fresh_losses
        loss_diff = max(abs(a - b) for x, y in zip(cached_losses, fresh_losses) for a, b in zip(x, y))
        runs = len(self.fractions) * len(self.seeds)
        what = (f"CoLA grid, {runs} runs × {self.settings.epochs} epochs, {self.train_size} train / {self.eval_size} "
                "eval")
        report.add("MiniLM-L6", self.n, f"{what}: backbone re-run per batch", runs / fresh_s, note="runs/s")
        r = fresh_s / cached_s
        report.add("MiniLM-L6", self.n, f"{what}: stored features", runs / cached_s, r, "faster", None,
                   "≥ 10×, identical results", r >= 10 and identical,
                   f"{cached_s:.0f} s vs {fresh_s:.0f} s; results {'identical' if identical else 'differ'} "
                   f"(max loss difference {loss_diff:.1e})")


def bench_grid(model, tokenizer, train_size: int, eval_size: int, autocast, report: Report, data_dir) -> None:
    """Part 4: the CoLA grid (`ProbeGrid`) with the features stored as the runner stores them vs re-running the
    backbone for every batch; ``PAPA_FEATURE_STORE`` is put back as it was."""
    from papa.probing.feature_store import STORE_ENV

    grid = ProbeGrid(model, tokenizer, train_size, eval_size, data_dir)
    saved = os.environ.get(STORE_ENV)
    try:
        cached = grid.run(None, autocast)
        fresh = grid.run("backbone", autocast)
    finally:
        if saved is None:
            os.environ.pop(STORE_ENV, None)
        else:
            os.environ[STORE_ENV] = saved
    papa.detach(grid.work)
    grid.add_rows(report, cached, fresh)


# ---- main ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Suite:
    """What every case of one run shares: device, autocast, timed rounds, batches per pass and sizes, the report."""

    device: torch.device
    autocast: Callable[[], AbstractContextManager]
    repeats: int
    n_batches: int
    batch_for: dict[int, int]
    report: Report

    def case(self, name: str, model, tokenizer, n: int) -> Case:
        """`model` at length `n`, timed as every case of the run."""
        return Case(name, model, tokenizer, n, self.batch_for[n], self.n_batches, self.repeats, self.autocast,
                    self.device, self.report)


def _parser() -> argparse.ArgumentParser:
    """The command line (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small batches, few repeats (a smoke run)")
    parser.add_argument("--dtype", choices=("fp32", "bf16", "fp16"), default="fp32",
                        help="autocast dtype for every variant (bf16 on CPU or GPU, fp16 on GPU)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    parser.add_argument("--clock", choices=tuple(CLOCKS), default="wall",
                        help="time variants by wall clock (default) or by the process's CPU time (a shared machine; "
                             "with --threads 1)")
    parser.add_argument("--models", nargs="+", default=["minilm", "bert-base"],
                        choices=("minilm", "bert-base", "smollm2"),
                        help="encoders (parts 1-3, 5) and/or the decoder SmolLM2-135M (parts 1 and 2: capture, "
                             "scoring text)")
    parser.add_argument("--lengths", nargs="+", type=int, default=[128, 512])
    parser.add_argument("--batch", nargs="+", type=int, default=None,
                        help="batch size per length (default 8 at 128, 2 at 512; --quick 4 and 1)")
    parser.add_argument("--batches", type=int, default=1, help="distinct batches per timed pass (default 1)")
    parser.add_argument("--repeats", type=int, default=None, help="timed rounds (default 3, --quick 1)")
    parser.add_argument("--grid-size", type=int, default=None,
                        help="CoLA train and eval examples for part 4 (default 32, --quick 8; 0 skips part 4; "
                             "default 0 when no encoder is in --models)")
    parser.add_argument("--minilm", default=None, metavar="DIR",
                        help="build MiniLM from the config and tokenizer in DIR with seeded random weights (where its "
                             "weights are not installed, e.g. on a GPU machine; default: the installed model)")
    parser.add_argument("--tiny", action="store_true",
                        help="smoke run only: the encoders shrunk to 2 layers of width 64 (TINY), random weights")
    parser.add_argument("--data-dir", default=None, help="local data directory (default: $PAPA_DATA_DIR)")
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    parser.add_argument("--headline", nargs="*", default=None, choices=("bert-base", "roberta-large"),
                        help="only the headline (bench_headline.py): these models (default both; RoBERTa-large from "
                             "--hub) at the grid's shapes and a saturating batch, with FLOPs and % of peak")
    parser.add_argument("--hub", default=None, metavar="DIR",
                        help="folder holding roberta-large/ (and bert-base-uncased/, else BERT-base is built with "
                             "MiniLM's tokenizer): configs and tokenizers, random weights")
    parser.add_argument("--saturate-tokens", type=int, default=None,
                        help="tokens per call of the headline's saturating shape (default 65,536)")
    parser.add_argument("--batch-tokens", type=int, default=None,
                        help="most tokens in one batch of the saturating shape (default 16,384)")
    parser.add_argument("--compile", nargs="?", const="inductor", default=None, metavar="BACKEND",
                        help="also time the encoders' plain forward, capture, attention-free and 1/2 replacement "
                             "under torch.compile (default backend inductor; e.g. aot_eager)")
    return parser


def _minilm(args: argparse.Namespace, device: torch.device, wanted: bool) -> tuple[object, object, str]:
    """(MiniLM, its tokenizer, where its weights come from): (None, None, ...) when no part runs on it."""
    from papa.method.models import DEFAULT_MODEL, load_model, resolve_model_path

    if (args.minilm or args.tiny) and wanted:
        config_dir = Path(args.minilm or resolve_model_path(DEFAULT_MODEL))
        with tempfile.TemporaryDirectory(prefix="papa-minilm-") as tmp:
            minilm, tok = load_model(str(random_model_dir(config_dir, Path(tmp), tiny=args.tiny)), device=device)
        return minilm, tok, (f"all-MiniLM-L6-v2's config and tokenizer ({config_dir}) with seeded random weights"
                             f"{', shrunk to ' + str(TINY) if args.tiny else ''}")
    minilm, tok = load_model(device=device) if wanted else (None, None)
    return minilm, tok, "the installed all-MiniLM-L6-v2 (pretrained weights)"


def _bench_models(args: argparse.Namespace, suite: Suite, minilm, tok, texts: list[str], paragraphs: list[str]
                  ) -> None:
    """Every model of `--models` at every length of `--lengths`."""
    from papa.method.models import load_model

    for which in args.models:
        if which == "smollm2":
            decoder, dec_tok = load_model("smollm2", device=suite.device)
            from bench_decoder import bench_decoder

            for n in args.lengths:
                bench_decoder(suite.case("SmolLM2-135M", decoder, dec_tok, n), paragraphs)
            del decoder
            gc.collect()
            continue
        model = minilm if which == "minilm" else bert_base(len(tok), tiny=args.tiny).to(suite.device)
        label = "MiniLM-L6" if which == "minilm" else "BERT-base (random)"
        for n in args.lengths:
            bench_model(suite.case(label, model, tok, n), texts, compile_backend=args.compile)
        if which != "minilm":
            del model
            gc.collect()


def _headline(args: argparse.Namespace, suite: Suite, tok) -> None:
    """`--headline`: its models at the grid's shapes and a saturating batch (`bench_headline`)."""
    import bench_headline as bh
    from papa.method.models import load_model

    shapes = bh.headline_shapes(tokens=args.saturate_tokens or bh.SATURATING_TOKENS,
                                batch_tokens=args.batch_tokens or bh.BATCH_TOKENS)
    texts, _ = texts_for(max(s.batch * s.batches for s in shapes), args.data_dir)
    models = []
    with tempfile.TemporaryDirectory(prefix="papa-headline-") as tmp:
        for which in args.headline:
            folder = Path(args.hub or "") / ("bert-base-uncased" if which == "bert-base" else which)
            if args.hub and folder.is_dir():
                model, model_tok = load_model(str(random_model_dir(folder, Path(tmp) / which, tiny=args.tiny)),
                                              device=suite.device)
            elif which == "bert-base":
                model, model_tok = bert_base(len(tok), tiny=args.tiny).to(suite.device), tok
            else:
                raise SystemExit(f"bench: --headline {which} needs --hub DIR holding {which}/")
            models.append(("BERT-base (random)" if which == "bert-base" else "RoBERTa-large (random)", model,
                           model_tok))

    def case_for(label: str, model, model_tok, shape) -> Case:
        return Case(label, model, model_tok, shape.n, shape.batch, shape.batches, suite.repeats, suite.autocast,
                    suite.device, suite.report)

    bh.bench_headline(case_for, models, shapes, texts)


def _write_json(args: argparse.Namespace, argv: list[str] | None, suite: Suite, inputs: str, minilm_source: str
                ) -> None:
    """The run's settings and every row to `--json`."""
    device = suite.device
    meta = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name(),
            "torch": torch.__version__, "dtype": args.dtype, "repeats": suite.repeats, "inputs": inputs,
            "threads": torch.get_num_threads(), "clock": args.clock, "batches": suite.n_batches,
            "batch": {str(n): bs for n, bs in suite.batch_for.items()}, "minilm": minilm_source, "tiny": args.tiny,
            "compile": args.compile,
            "command": "python benchmarks/bench.py " + " ".join(sys.argv[1:] if argv is None else argv)}
    with open(args.json, "w") as fh:
        json.dump({**meta, "rows": [r.__dict__ for r in suite.report.rows]}, fh, indent=1)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # local data or synthetic text: never wait on the hub
    torch.set_num_threads(args.threads)
    global clock
    clock = CLOCKS[args.clock]
    _mmap_threshold(32 << 20)  # fixed (glibc's dynamic maximum), so every variant sees the same allocator
    from papa.method.models import resolve_device

    device = resolve_device(args.device)
    dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    autocast = partial(torch.autocast, device.type, dtype=dtype) if dtype is not None else nullcontext
    from peaks import peak_tflops

    peak = peak_tflops(torch.cuda.get_device_name(device), args.dtype) if device.type == "cuda" else None
    suite = Suite(device, autocast, args.repeats or (1 if args.quick else 3), args.batches,
                  batch_sizes(args.lengths, args.batch, args.quick), Report(peak=peak, count=not args.tiny))
    if args.headline is not None:  # the headline alone: MiniLM's tokenizer only for a BERT-base built here
        args.headline = args.headline or ["bert-base", "roberta-large"]
        built = "bert-base" in args.headline and not (args.hub and (Path(args.hub) / "bert-base-uncased").is_dir())
        args.models, args.grid_size = ["bert-base"] if built else [], 0
    encoders = [m for m in args.models if m != "smollm2"]
    grid_size = args.grid_size if args.grid_size is not None else (0 if not encoders else 8 if args.quick else 32)
    minilm, tok, minilm_source = _minilm(args, device, bool(encoders or grid_size))
    texts, source = texts_for(texts_needed(suite.batch_for, suite.n_batches), args.data_dir)
    paragraphs: list[str] = []
    if "smollm2" in args.models:  # consecutive paragraphs joined into full windows of n tokens (decoder_texts)
        paragraphs, decoder_source = texts_for(1000, args.data_dir)
        source += f"; decoder: {decoder_source}, consecutive ones joined by newlines into windows of n tokens"
    print(f"# papa benchmarks: torch {torch.__version__}, {platform.processor() or platform.machine()}, "
          f"device {device}, {torch.get_num_threads()} threads, {args.clock} clock, dtype {args.dtype}, "
          f"repeats {suite.repeats}, batch {', '.join(f'{bs} at n = {n}' for n, bs in suite.batch_for.items())}, "
          f"{suite.n_batches} batches per pass; inputs: {source}\n")
    print(HEADER, flush=True)
    if args.headline is not None:
        _headline(args, suite, tok)
    else:
        _bench_models(args, suite, minilm, tok, texts, paragraphs)
    if grid_size:
        bench_grid(minilm, tok, grid_size, grid_size, autocast, suite.report, args.data_dir)
    print("\n" + HEADER)
    for row in suite.report.rows:
        print(_format_row(row))
    if args.json:
        _write_json(args, argv, suite, source, minilm_source)
    return 0


if __name__ == "__main__":
    sys.exit(main())

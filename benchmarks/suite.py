"""What the suite's benchmarks share: the timing calls, the devices' peaks, the speed table's rows and their FLOPs,
and the inputs and random-weight models they time (docs/performance.md)."""
from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from papa.method.cost import ModelShape, encoder_shape, pass_flops, probe_flops, step_flops
from papa.probing.feature_store import BYTES_PER_VALUE
from papa.reproduce.timings import cpu_model
from papa.method.layout import encode
from papa.probing.features import EncodedTask
from papa.tasks.registry import get_task

# ---- timing ------------------------------------------------------------------------------------------------------


def cpu_name() -> str:
    """The CPU's model name and core count."""
    return f"{cpu_model()}, {os.cpu_count()} cores"


def mmap_threshold(size: int) -> None:
    """Set glibc's M_MMAP_THRESHOLD: blocks above it are mmap-ed and go back to the OS when freed."""
    try:
        ctypes.CDLL("libc.so.6").mallopt(-3, size)
    except (OSError, AttributeError):
        pass


def _status_kib(field_name: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            return next((int(line.split()[1]) for line in fh if line.startswith(field_name)), None)
    except OSError:
        return None


def peak_mib(fn: Callable[[], None], device: torch.device) -> float | None:
    """Extra peak memory (MiB) of one call of `fn`: the allocator's on CUDA, the rise of the peak RSS on a CPU."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn()
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - base) / 2**20
    # A small threshold while measuring only: every large block then shows in RSS and is returned on free (timed
    # runs keep the large one, since page-faulting fresh mmaps would slow them down).
    mmap_threshold(1 << 16)
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # resets VmHWM to the current RSS
    except (OSError, AttributeError):
        mmap_threshold(32 << 20)
        return None
    base = _status_kib("VmRSS:")
    fn()
    top = _status_kib("VmHWM:")
    mmap_threshold(32 << 20)
    return None if base is None or top is None else (top - base) / 1024


Variant = Callable[[], None] | tuple[Callable[[], None], Callable[[], None]]
#: What `interleaved` times with: wall-clock seconds, or the process's CPU seconds (``--clock cpu``: on a machine
#: shared with other jobs only this process's time counts; use one thread, or OpenMP's spin-waits count too).
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
clock = CLOCKS["wall"]


def use_clock(name: str) -> None:
    """Time every later `interleaved` call (and part 4's grid) by clock `name` of `CLOCKS`."""
    global clock
    clock = CLOCKS[name]


def interleaved(variants: dict[str, Variant], repeats: int, device: torch.device, warmup: int = 1
                ) -> dict[str, float]:
    """Median seconds of each variant (a callable, or (untimed set-up, callable)), round-robin after `warmup` untimed
    rounds. Every ratio the suite reports divides two medians of one call: variants timed in different calls moved
    apart by up to 1.7× on a GPU."""
    times: dict[str, list[float]] = {k: [] for k in variants}
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for r in range(repeats + warmup):
        for name, variant in variants.items():
            setup, fn = variant if isinstance(variant, tuple) else (None, variant)
            if setup is not None:
                setup()
            sync()
            start = clock()
            fn()
            sync()
            if r >= warmup:
                times[name].append(clock() - start)
    return {k: statistics.median(v) for k, v in times.items()}


@contextlib.contextmanager
def env(name: str, value: str | None):
    """Environment variable `name` set to `value` (None: unset) inside, put back as it was after."""
    saved = os.environ.pop(name, None)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        os.environ.pop(name, None)
        if saved is not None:
            os.environ[name] = saved


# ---- peaks -------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Peaks:
    """A device's dense peaks (TFLOP/s; no 2:4 sparsity) and bandwidths (GB/s: its memory, the host link one way)."""

    name: str
    bf16: float
    tf32: float
    fp32: float
    hbm: float
    link: float

    def tflops(self, precision: str) -> float:
        """The dense peak of `precision` (bf16, fp16, tf32, fp32, float32: the CUDA cores', TF32 off)."""
        return getattr(self, {"fp16": "bf16", "float32": "fp32"}.get(precision, precision))


#: (substrings of torch.cuda.get_device_name, all of which must appear; peaks), most specific first. From NVIDIA's
#: datasheets: H100 (SXM5 and PCIe, 2023; the sparse figures halved), H200 (SXM, 2024: the H100 SXM's compute),
#: A100 (2021, 80 GB SXM).
DEVICES: tuple[tuple[tuple[str, ...], Peaks], ...] = (
    (("H200",), Peaks("H200 SXM", bf16=989.4, tf32=494.7, fp32=66.9, hbm=4800.0, link=64.0)),
    (("H100", "PCIe"), Peaks("H100 PCIe", bf16=756.5, tf32=378.0, fp32=51.2, hbm=2000.0, link=64.0)),
    (("H100",), Peaks("H100 SXM", bf16=989.4, tf32=494.7, fp32=66.9, hbm=3350.0, link=64.0)),
    (("A100",), Peaks("A100", bf16=312.0, tf32=156.0, fp32=19.5, hbm=2039.0, link=32.0)),
)
#: A row is launch-bound under this share of the dense peak: launches and copies, not the method's arithmetic, set
#: its time, so its ratios say little about the method.
LAUNCH_BOUND_SHARE = 0.10


def device_peaks(device: str) -> Peaks | None:
    """The peaks of the device `torch.cuda.get_device_name` calls `device`, or None for an unknown one (a CPU)."""
    return next((p for keys, p in DEVICES if all(k.lower() in device.lower() for k in keys)), None)


def peak_tflops(device: str, precision: str) -> float | None:
    """The dense peak (TFLOP/s) of `device` in `precision`, or None where the device is not in `DEVICES`."""
    peaks = device_peaks(device)
    return peaks.tflops(precision) if peaks else None


def tflops(flops: float, seconds: float) -> float | None:
    """TFLOP/s of `flops` done in `seconds` (None for no time)."""
    return flops / seconds / 1e12 if seconds > 0 else None


def share_of_peak(rate: float | None, peak: float | None) -> float | None:
    """A rate's share of the peak, or None where either is unknown."""
    return rate / peak if rate is not None and peak else None


def launch_bound(rate: float | None, peak: float | None) -> bool | None:
    """Whether a rate is under `LAUNCH_BOUND_SHARE` of the peak (None where either is unknown)."""
    share = share_of_peak(rate, peak)
    return None if share is None else share < LAUNCH_BOUND_SHARE


def floor_hours(flops: float, peak: float | None) -> float | None:
    """Hours `flops` take at the `peak` (TFLOP/s), or None for an unknown peak."""
    return flops / (peak * 1e12) / 3600 if peak else None


# ---- the rows' FLOPs: the speed table's and the cost's part B --------------------------------------------------------

#: The speed table's encoders by label: BERT-base and RoBERTa-large (random weights: the paper's shapes), MiniLM-L6.
BENCH_SHAPES: dict[str, ModelShape] = {"BERT-base (random)": encoder_shape(768, 3072, 12),
                                       "RoBERTa-large (random)": encoder_shape(1024, 4096, 24),
                                       "MiniLM-L6": encoder_shape(384, 1536, 6)}
#: (prefix of a row's `what`, share of heads constant, kind): ``pass`` a forward, ``step`` a frozen-weight step with
#: the sentence probe's, ``lambda`` the λ step (every head mixed). First match wins.
VARIANTS = (("plain forward", 0.0, "pass"), ("capture", 0.0, "pass"), ("naive", 0.0, "pass"),
            ("attention-free", 1.0, "pass"), ("1/2 input-dependent", 0.5, "pass"),
            ("1/8 input-dependent", 7 / 8, "pass"), ("1/16 input-dependent", 15 / 16, "pass"),
            ("plain step: frozen", 0.0, "step"), ("λ step", 0.0, "lambda"))


def shape_of(model: str) -> ModelShape | None:
    """The shape of a speed-table model label (a trailing " (random)" optional), or None."""
    return BENCH_SHAPES.get(model) or BENCH_SHAPES.get(f"{model} (random)")


def row_flops_per_seq(model: str, what: str, n: int) -> float | None:
    """FLOPs of one sequence of `n` tokens (padding included) in the row of `model` that times `what` (`VARIANTS`),
    or None for a row it cannot count (fine-tuning, the CoLA grid, a decoder)."""
    shape = shape_of(model)
    match = next(((share, kind) for prefix, share, kind in VARIANTS if what.startswith(prefix)), None)
    if shape is None or match is None:
        return None
    share, kind = match
    if kind == "pass":
        return float(pass_flops(shape, n, replaced_share=share))
    probe = probe_flops("sentence", shape.num_layers + 1, shape.hidden, n, 2, step=True)
    return float(step_flops(shape, n, mixed=kind == "lambda") + probe)


#: len(tokenizer) of roberta-base and roberta-large: the MLM probe's output width in benchmarks/full_cost.py.
ROBERTA_VOCAB = 50265


def row_flops(row: dict) -> dict[str, float]:
    """FLOPs of each of a part-B `row`'s measurements (every padded slot; the probe reads `read_per_example`
    positions; a RoBERTa shape): per sequence for the passes and the probe's evaluation, per step of Table 3's batch
    for the steps, each step with its probe's."""
    spec = get_task(row["task"])
    n, batch = spec.hparams.max_length, spec.hparams.batch_size
    shape = encoder_shape(row["hidden"], 4 * row["hidden"], row["layers"])
    probe = [probe_flops(spec.kind, row["layers"] + 1, row["hidden"], row["read_per_example"],
                         ROBERTA_VOCAB if spec.vocabulary_targets else spec.num_labels, step=step)
             for step in (False, True)]
    forward, half = pass_flops(shape, n), pass_flops(shape, n, replaced_share=0.5)
    return {"forward": forward, "capture": forward, "fill": half,
            "fill_constant": pass_flops(shape, n, replaced_share=1.0), "stored_eval": probe[0],
            "stored_step": batch * probe[1], "rerun_step": batch * (half + probe[1]),
            "lambda_step": batch * (step_flops(shape, n, mixed=True) + probe[1]),
            "trainable_step": batch * (step_flops(shape, n, replaced_share=1.0) + probe[1]),
            "plain_step": batch * (step_flops(shape, n) + probe[1])}


def feature_bytes(examples: int, row: dict, value_bytes: int = BYTES_PER_VALUE) -> float:
    """Bytes of a split of `examples` in a store: the read positions' hidden states of every layer."""
    return examples * row["read_per_example"] * (row["layers"] + 1) * row["hidden"] * value_bytes


def arithmetic_rates(bench: dict) -> dict | None:
    """R_pass and R_step (TFLOP/s) from a speed table: of the encoder shapes it timed with both a plain forward and a
    plain step, the one with the most FLOPs per call (the least launch-bound), the lower of its plain-forward timings
    and its plain step; None where there is none."""
    shapes: dict[tuple[str, int, int], dict[str, list[float]]] = {}
    for r in bench.get("rows", []):
        what = r["what"]
        kind = "pass" if what.startswith("plain forward (sdpa)") else "step" if what.startswith(
            "plain step: frozen") else None
        if kind is None or "compiled" in what or not r.get("seq_s") or shape_of(r["model"]) is None:
            continue
        shapes.setdefault((r["model"], r["n"], r.get("batch") or bench["batch"][str(r["n"])]), {}).setdefault(
            kind, []).append(r["seq_s"] * row_flops_per_seq(r["model"], what, r["n"]) / 1e12)
    both = [(k, v) for k, v in shapes.items() if "pass" in v and "step" in v]
    if not both:
        return None
    (model, n, batch), rates = max(both, key=lambda kv: kv[0][2] * row_flops_per_seq(kv[0][0], "plain forward",
                                                                                      kv[0][1]))
    return {"pass": min(rates["pass"]), "step": min(rates["step"]), "model": model, "n": n, "batch": batch,
            "dtype": bench.get("dtype")}


@dataclass
class Row:
    """One measured variant of one model at one length: speed, ratio to its reference, memory, target, verdict, and
    its arithmetic (FLOPs per sequence, TFLOP/s, share of the device's peak, launch-bound or not)."""

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
    batch: int | None = None  # sequences per batch, where the row's differs from the run's
    flops_per_seq: float | None = None
    tflops: float | None = None
    peak_share: float | None = None
    launch_bound: bool | None = None


def arithmetic(row: Row, peak: float | None, count: bool = True) -> None:
    """Fill `row`'s FLOPs per sequence (where it has none, when `count`), TFLOP/s, share of `peak`, launch-bound."""
    if row.flops_per_seq is None and count:
        row.flops_per_seq = row_flops_per_seq(row.model, row.what, row.n)
    if row.flops_per_seq and row.seq_s:
        row.tflops = row.seq_s * row.flops_per_seq / 1e12
        row.peak_share, row.launch_bound = share_of_peak(row.tflops, peak), launch_bound(row.tflops, peak)


@dataclass
class Report:
    """The run's rows, each completed by `arithmetic` (`peak`: the device's in the run's precision; `count`: not for
    --tiny, whose labels name the real sizes) and printed as it is added."""

    rows: list[Row] = field(default_factory=list)
    peak: float | None = None
    count: bool = True

    def add(self, *args, **kwargs) -> Row:
        row = Row(*args, **kwargs)
        arithmetic(row, self.peak, self.count)
        self.rows.append(row)
        print(format_row(row), flush=True)
        return row


def fmt(x: float | None, spec: str) -> str:
    """`x` formatted by `spec`, or a dash where it was not measured."""
    return "–" if x is None else format(x, spec)


def format_row(r: Row) -> str:
    """`r` as a row of the markdown table under `HEADER`."""
    verdict = "" if r.met is None else ("met" if r.met else "**not met**")
    ratio = "" if r.ratio is None else f"{r.ratio:.2f}× {r.ratio_of}".strip()
    share = "" if r.peak_share is None else f"{r.peak_share:.1%}{', launch-bound' if r.launch_bound else ''}"
    return (f"| {r.model} | {r.n} | {r.what} | {fmt(r.seq_s, '.1f')} | {fmt(r.tflops, '.1f')} | {share} | {ratio} | "
            f"{fmt(r.peak_mib, '.0f')} | {r.target} | {verdict} | {r.note} |")


HEADER = ("| model | n | what | seq/s | TFLOP/s | % of peak | ratio | peak MiB | target | verdict | note |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|")


#: Version of the cost files benchmarks/full_cost.py writes: the one benchmarks/cost.py reads, which refuses others.
COST_FORMAT = 2


# ---- inputs and models -------------------------------------------------------------------------------------------

def texts_for(count: int, data_dir: str | None) -> tuple[list[str], str]:
    """`count` long real texts (WikiText paragraphs) when the data directory has them, else seeded random words."""
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
    """Sequences per batch at each length: `batch` in the order of `lengths`, else 8 at n = 128 and 2 at 512 (quick:
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
    """`n_batches` batches of exactly `batch_size` texts each, encoded at length `n`. Raises when the texts run out: a
    short batch would be timed as if it held `batch_size` sequences."""
    if len(texts) < batch_size * n_batches:
        raise ValueError(f"{n_batches} batches of {batch_size} sequences need {batch_size * n_batches} texts, "
                         f"got {len(texts)}")
    batches = []
    for i in range(n_batches):
        inputs = encode(tokenizer, texts[i * batch_size:(i + 1) * batch_size], max_length=n, layout=layout,
                        model_type=model_type).inputs
        if inputs["input_ids"].shape[0] != batch_size:
            raise ValueError(f"batch {i} holds {inputs['input_ids'].shape[0]} sequences, not {batch_size}")
        batches.append({k: v.to(device) for k, v in inputs.items()})
    return batches


def synthetic_task(spec, tokenizer, count: int, n: int, vocab: int, lengths: torch.Tensor | None = None,
                   seed: int = 0) -> EncodedTask:
    """`count` rows of `spec`'s shape with random ids: row i has `lengths[i % len(lengths)]` real tokens (default
    three quarters of n), padding after them; token tasks label every real slot but the first and last."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([n * 3 // 4]) if lengths is None else lengths
    real = lengths.clamp(2, n)[torch.arange(count) % len(lengths)]
    mask = (torch.arange(n)[None, :] < real[:, None]).long()
    ids = torch.randint(min(1000, vocab // 2), vocab, (count, n), generator=g)  # clear of the special tokens
    ids[mask == 0] = tokenizer.pad_token_id
    if spec.kind in ("token", "mlm"):
        labels = torch.randint(vocab if spec.kind == "mlm" else spec.num_labels, (count, n), generator=g)
        labels[mask == 0] = -100
        labels[:, 0] = -100
        labels[torch.arange(count), real - 1] = -100
    else:
        labels = torch.randint(spec.num_labels, (count,), generator=g)
    return EncodedTask(kind=spec.kind, inputs={"input_ids": ids, "attention_mask": mask}, labels=labels)


#: A smoke run's model size (``--tiny``): the code paths of the real size, in milliseconds.
TINY = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128}


def random_model_dir(config_dir: Path, out: Path, seed: int = 0, tiny: bool = False) -> Path:
    """A model built from `config_dir`'s config with seeded random weights, saved beside its tokenizer's files (time
    does not depend on the weights' values); `tiny` shrinks it to `TINY`."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    config = AutoConfig.from_pretrained(config_dir)
    for key, value in (TINY.items() if tiny else ()):
        setattr(config, key, value)
    torch.manual_seed(seed)
    AutoModel.from_config(config).save_pretrained(out)
    AutoTokenizer.from_pretrained(config_dir).save_pretrained(out)
    return out


def bert_base(vocab_size: int, seed: int = 0, tiny: bool = False):
    """A random BERT-base-sized encoder (12 layers, 768 hidden, 12 heads, 3072 feed-forward; `tiny`: `TINY`)."""
    from transformers import AutoModel, BertConfig

    size = TINY if tiny else dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
    torch.manual_seed(seed)
    model = AutoModel.from_config(BertConfig(vocab_size=vocab_size, max_position_embeddings=512, **size),
                                  attn_implementation="sdpa").eval()
    model.config._name_or_path = "random-bert-base"
    return model

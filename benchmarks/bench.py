"""papa's speed table: every variant on the same batches in one process, a markdown table at the end
(docs/performance.md says what each part times and how).

    python -m benchmarks.bench                      # parts 1-5 on MiniLM and a random BERT-base (several minutes)
    python -m benchmarks.bench --quick              # a smoke run: small batches, fewer repeats
    python -m benchmarks.bench --dtype bf16 --device cuda
    python -m benchmarks.bench --models smollm2     # the decoder: capture and scoring text
    python -m benchmarks.bench --headline --hub DIR --device cuda --dtype bf16   # the grid's shapes, a saturating batch
"""
from __future__ import annotations

import argparse
import copy
import gc
import json
import math
import os
import platform
import sys
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch

import papa
from benchmarks import suite
from benchmarks.cases import Case, EncoderBench, bench_decoder, bench_model
from benchmarks.suite import HEADER, TINY, Report, bert_base, env, format_row, random_model_dir, texts_for
from papa.core.artifacts import atomic_path
from papa.method.attention_free import restore_query_key
from papa.method.constants import data_free_constants
from papa.method.cost import config_ceiling, model_shape, pass_flops, probe_flops, step_flops
from papa.method.selection import heads_to_replace, replacement_order
from papa.tasks.registry import get_task


@dataclass(frozen=True)
class Suite:
    """What every case of one run shares: device, autocast, timed rounds, batches per pass and sizes, the report."""

    device: torch.device
    autocast: Callable[[], AbstractContextManager]
    repeats: int
    n_batches: int
    batch_for: dict[int, int]
    report: Report

    def case(self, name: str, model, tokenizer, n: int, batch: int | None = None, batches: int | None = None) -> Case:
        """`model` at length `n`, timed as every case of the run (or at `batch` x `batches`)."""
        return Case(name, model, tokenizer, n, batch or self.batch_for[n], batches or self.n_batches, self.repeats,
                    self.autocast, self.device, self.report)


# ---- the headline: the grid's shapes and a saturating batch -------------------------------------------------------

#: The grid's tasks whose Table-3 shapes the headline times, and its saturating shape: tokens per timed call, length,
#: most tokens in one batch (so that a step's activations fit).
GRID_TASKS = ("sst2", "cola", "mrpc", "ner", "pos")
SATURATING_TOKENS, SATURATING_LENGTH, BATCH_TOKENS = 65536, 128, 16384


@dataclass(frozen=True)
class Shape:
    """A headline shape: length `n`, `batch` sequences per batch, `batches` per timed call; `saturating` ones carry
    the targets."""

    label: str
    n: int
    batch: int
    batches: int
    saturating: bool = False


def headline_shapes(tokens: int = SATURATING_TOKENS, batch_tokens: int = BATCH_TOKENS) -> list[Shape]:
    """Table 3's (length, batch) of each of `GRID_TASKS`, tasks of one shape in one, then the saturating shape:
    batches of `batch_tokens` // n sequences of length n = `SATURATING_LENGTH`, enough for `tokens` tokens per call."""
    n, grouped = SATURATING_LENGTH, {}
    for task in GRID_TASKS:
        hp = get_task(task).hparams
        grouped.setdefault((hp.max_length, hp.batch_size), []).append(task)
    shapes = [Shape(f"{'/'.join(t.upper() for t in names)} (Table 3)", length, batch, 1)
              for (length, batch), names in grouped.items()]
    per = max(1, min(batch_tokens, tokens) // n)
    batches = math.ceil(tokens / (per * n))
    return [*shapes, Shape(f"saturating, {per * batches * n:,} tokens per call", n, per, batches, saturating=True)]


def headline(bench: EncoderBench, shape: Shape) -> None:
    """One model at one shape: the plain forward, capture, half the heads and every head constant (Q/K dropped), the
    plain step and the λ step in one timing call, each row with its FLOPs; targets judged on the saturating shape."""
    c, cfg, n = bench.case, bench.case.model.config, bench.case.n
    bench.ctrl.set_constants(data_free_constants("toeplitz", bench.ctrl.signature, n, bench.layout))
    capture_model = copy.deepcopy(c.model)
    capture_ctrl = papa.attach(capture_model, model_name=c.name)
    frozen = copy.deepcopy(c.model).requires_grad_(False)
    bench.step_setup()
    order = replacement_order("random", bench.ctrl.num_layers, bench.ctrl.num_heads, seed=0)
    variants = {"plain": bench.run(bench.plain), "capture": bench.run(capture_model),
                "1/2": (partial(bench.configure, order, "1/2"), bench.run(bench.work)),
                "attention-free": (partial(bench.configure, order, "0"), bench.run(bench.work)),
                "plain step": partial(bench.steps, frozen, embeds=True),
                "λ step": (partial(bench.configure, order, None), partial(bench.steps, bench.work))}
    with capture_ctrl.capturing(n):
        t = bench.time(variants, warmup=2)  # the model's first call: two untimed rounds
    restore_query_key(bench.ctrl)
    bench.ctrl.keep_all()
    papa.detach(bench.work)
    papa.detach(capture_model)
    probe = probe_flops("sentence", cfg.num_hidden_layers + 1, cfg.hidden_size, n, 2, step=True)
    flops = {"plain": pass_flops(cfg, n), "capture": pass_flops(cfg, n), "1/2": pass_flops(cfg, n, replaced_share=0.5),
             "attention-free": pass_flops(cfg, n, replaced_share=1.0), "plain step": step_flops(cfg, n) + probe,
             "λ step": step_flops(cfg, n, mixed=True) + probe}
    judged = shape.saturating

    def add(key: str, what: str, ratio=None, of="", target="", met=None, note="") -> None:
        bench.add(f"[{shape.label}] {what}", bench.seqs / t[key], ratio, of, None, target if judged else "",
                  met if judged else None, note, batch=shape.batch, flops_per_seq=flops[key])

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


def _headline_models(args: argparse.Namespace, suite_: Suite, tok) -> list[tuple[str, object, object]]:
    """(label, model, tokenizer) of each model of `--headline`: from `--hub`'s folders with random weights, or
    BERT-base built here with MiniLM's tokenizer."""
    from papa.method.models import load_model

    models = []
    with tempfile.TemporaryDirectory(prefix="papa-headline-") as tmp:
        for which in args.headline:
            folder = Path(args.hub or "") / ("bert-base-uncased" if which == "bert-base" else which)
            if args.hub and folder.is_dir():
                model, model_tok = load_model(str(random_model_dir(folder, Path(tmp) / which, tiny=args.tiny)),
                                              device=suite_.device)
            elif which == "bert-base":
                model, model_tok = bert_base(len(tok), tiny=args.tiny).to(suite_.device), tok
            else:
                raise SystemExit(f"bench: --headline {which} needs --hub DIR holding {which}/")
            label = "BERT-base (random)" if which == "bert-base" else "RoBERTa-large (random)"
            models.append((label, model, model_tok))
    return models


# ---- part 4: the probing grid of CoLA ----------------------------------------------------------------------------

def _grid_run(work, ctrl, order, data, autocast) -> tuple[float, list[float], list[list[float]]]:
    """(seconds, scores, losses) of the whole grid, 5 fractions x 3 seeds."""
    from papa.probing.features import FeatureSource
    from papa.probing.training import evaluate_probe, make_probe, train_probe

    spec, n, train, dev, settings = data
    start, scores, losses = suite.clock(), [], []
    for fraction in ("1", "1/2", "1/8", "1/16", "0"):
        ctrl.keep_all()
        if fraction != "1":
            ctrl.replace(heads_to_replace(order, fraction, ctrl.num_layers, ctrl.num_heads, "down"))
        with autocast():
            sources = [FeatureSource(work, d, trainable_backbone=False, progress=False) for d in (train, dev)]
        for seed in (0, 1, 2):
            torch.manual_seed(seed)
            probe = make_probe(spec, work, n).to(next(work.parameters()).device)
            with autocast():
                losses.append(train_probe(probe, spec.kind, sources[0], settings, seed=seed, progress=False))
                scores.append(evaluate_probe(probe, spec, sources[1]))
        for source in sources:
            source.close()
    return suite.clock() - start, scores, losses


def bench_grid(model, tokenizer, size: int, autocast, report: Report, data_dir) -> None:
    """Part 4: CoLA's grid on `size` train and eval examples, on a copy of `model` with average constants from the
    training inputs, with the features stored as the runner stores them vs the backbone re-run for every batch."""
    from papa.probing.feature_store import STORE_ENV
    from papa.probing.features import encode_task
    from papa.probing.training import TrainSettings
    from papa.tasks.data import load_examples

    spec = get_task("cola")
    n = spec.hparams.max_length
    examples = {s: load_examples(spec, s, data_dir, limit=size) for s in ("train", "eval")}
    train, dev = (encode_task(tokenizer, spec, examples[s], max_length=n, model_type="bert", layout="sep_last")
                  for s in ("train", "eval"))
    work = copy.deepcopy(model)
    ctrl = papa.attach(work, papa.extract_constants(work, tokenizer, [e.text for e in examples["train"]],
                                                    max_length=n, layout="sep_last", progress=False))
    order = replacement_order("random", ctrl.num_layers, ctrl.num_heads, seed=0)
    data = (spec, n, train, dev, TrainSettings.from_task(spec))
    with env(STORE_ENV, None):  # the store the runner picks
        cached_s, cached_scores, cached_losses = _grid_run(work, ctrl, order, data, autocast)
    with env(STORE_ENV, "backbone"):  # forced: a zero budget would only send the features to the next store
        fresh_s, fresh_scores, fresh_losses = _grid_run(work, ctrl, order, data, autocast)
    papa.detach(work)
    identical = cached_scores == fresh_scores and cached_losses == fresh_losses
    loss_diff = max(abs(a - b) for x, y in zip(cached_losses, fresh_losses) for a, b in zip(x, y))
    what = f"CoLA grid, 15 runs × {data[4].epochs} epochs, {size} train / {size} eval"
    report.add("MiniLM-L6", n, f"{what}: backbone re-run per batch", 15 / fresh_s, note="runs/s")
    r = fresh_s / cached_s
    report.add("MiniLM-L6", n, f"{what}: stored features", 15 / cached_s, r, "faster", None,
               "≥ 10×, identical results", r >= 10 and identical, f"{cached_s:.0f} s vs {fresh_s:.0f} s; results "
               f"{'identical' if identical else 'differ'} (max loss difference {loss_diff:.1e})")


# ---- the command line --------------------------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    """The command line (module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small batches, few repeats (a smoke run)")
    p.add_argument("--dtype", choices=("fp32", "bf16", "fp16"), default="fp32",
                   help="autocast dtype for every variant (bf16 on CPU or GPU, fp16 on GPU)")
    p.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    p.add_argument("--clock", choices=tuple(suite.CLOCKS), default="wall",
                   help="time by wall clock (default) or by the process's CPU time (a shared machine; --threads 1)")
    p.add_argument("--models", nargs="+", default=["minilm", "bert-base"], choices=("minilm", "bert-base", "smollm2"),
                   help="encoders (parts 1-3, 5) and/or the decoder SmolLM2-135M (parts 1 and 2)")
    p.add_argument("--lengths", nargs="+", type=int, default=[128, 512])
    p.add_argument("--batch", nargs="+", type=int, default=None,
                   help="batch size per length (default 8 at 128, 2 at 512; --quick 4 and 1)")
    p.add_argument("--batches", type=int, default=1, help="distinct batches per timed pass (default 1)")
    p.add_argument("--repeats", type=int, default=None, help="timed rounds (default 3, --quick 1)")
    p.add_argument("--grid-size", type=int, default=None, help="CoLA train and eval examples for part 4 (default "
                   "32, --quick 8; 0 skips part 4; default 0 when no encoder is in --models)")
    p.add_argument("--minilm", default=None, metavar="DIR", help="build MiniLM from the config and tokenizer in DIR "
                   "with seeded random weights (where its weights are not installed)")
    p.add_argument("--tiny", action="store_true", help="smoke run only: the encoders shrunk to TINY, random weights")
    p.add_argument("--data-dir", default=None, help="local data directory (default: $PAPA_DATA_DIR)")
    p.add_argument("--json", default=None, help="also write the rows to this JSON file")
    p.add_argument("--headline", nargs="*", default=None, choices=("bert-base", "roberta-large"),
                   help="only the headline: these models (default both; RoBERTa-large from --hub) at the grid's "
                   "shapes and a saturating batch, with FLOPs and %% of peak")
    p.add_argument("--hub", default=None, metavar="DIR", help="folder holding roberta-large/ (and bert-base-uncased/, "
                   "else BERT-base is built with MiniLM's tokenizer): configs and tokenizers, random weights")
    p.add_argument("--saturate-tokens", type=int, default=None,
                   help="tokens per call of the headline's saturating shape (default 65,536)")
    p.add_argument("--batch-tokens", type=int, default=None,
                   help="most tokens in one batch of the saturating shape (default 16,384)")
    p.add_argument("--compile", nargs="?", const="inductor", default=None, metavar="BACKEND",
                   help="also time the encoders' plain forward, capture, attention-free and 1/2 replacement under "
                   "torch.compile (default backend inductor; e.g. aot_eager)")
    return p


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


def _bench_models(args: argparse.Namespace, suite_: Suite, minilm, tok, texts: list[str], paragraphs: list[str]
                  ) -> None:
    """Every model of `--models` at every length of `--lengths` (the decoder on windows of `paragraphs`)."""
    from papa.method.models import load_model

    for which in args.models:
        if which == "smollm2":
            model, model_tok = load_model("smollm2", device=suite_.device)
        else:
            model, model_tok = (minilm, tok) if which == "minilm" else (bert_base(len(tok), tiny=args.tiny), tok)
        label = {"minilm": "MiniLM-L6", "bert-base": "BERT-base (random)", "smollm2": "SmolLM2-135M"}[which]
        for n in args.lengths:
            if which == "smollm2":
                bench_decoder(suite_.case(label, model, model_tok, n), paragraphs)
            else:
                bench_model(suite_.case(label, model.to(suite_.device), model_tok, n), texts, args.compile)
        del model
        gc.collect()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # local data or synthetic text: never wait on the hub
    torch.set_num_threads(args.threads)
    suite.use_clock(args.clock)
    suite.mmap_threshold(32 << 20)  # fixed (glibc's dynamic maximum), so every variant sees the same allocator
    from papa.method.models import resolve_device

    device = resolve_device(args.device)
    dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    autocast = partial(torch.autocast, device.type, dtype=dtype) if dtype is not None else nullcontext
    peak = suite.peak_tflops(torch.cuda.get_device_name(device), args.dtype) if device.type == "cuda" else None
    run = Suite(device, autocast, args.repeats or (1 if args.quick else 3), args.batches,
                suite.batch_sizes(args.lengths, args.batch, args.quick), Report(peak=peak, count=not args.tiny))
    if args.headline is not None:  # the headline alone: MiniLM's tokenizer only for a BERT-base built here
        args.headline = args.headline or ["bert-base", "roberta-large"]
        built = "bert-base" in args.headline and not (args.hub and (Path(args.hub) / "bert-base-uncased").is_dir())
        args.models, args.grid_size = ["bert-base"] if built else [], 0
    encoders = [m for m in args.models if m != "smollm2"]
    grid_size = args.grid_size if args.grid_size is not None else (0 if not encoders else 8 if args.quick else 32)
    minilm, tok, minilm_source = _minilm(args, device, bool(encoders or grid_size))
    texts, source = texts_for(suite.texts_needed(run.batch_for, run.n_batches), args.data_dir)
    paragraphs: list[str] = []
    if "smollm2" in args.models:  # consecutive paragraphs joined into full windows of n tokens
        paragraphs, decoder_source = texts_for(1000, args.data_dir)
        source += f"; decoder: {decoder_source}, consecutive ones joined by newlines into windows of n tokens"
    print(f"# papa benchmarks: torch {torch.__version__}, {platform.processor() or platform.machine()}, "
          f"device {device}, {torch.get_num_threads()} threads, {args.clock} clock, dtype {args.dtype}, "
          f"repeats {run.repeats}, batch {', '.join(f'{bs} at n = {n}' for n, bs in run.batch_for.items())}, "
          f"{run.n_batches} batches per pass; inputs: {source}\n")
    print(HEADER, flush=True)
    if args.headline is not None:
        shapes = headline_shapes(args.saturate_tokens or SATURATING_TOKENS, args.batch_tokens or BATCH_TOKENS)
        texts, _ = texts_for(max(s.batch * s.batches for s in shapes), args.data_dir)
        for label, model, model_tok in _headline_models(args, run, tok):
            for shape in shapes:
                headline(EncoderBench(run.case(label, model, model_tok, shape.n, shape.batch, shape.batches), texts),
                         shape)
    else:
        _bench_models(args, run, minilm, tok, texts, paragraphs)
    if grid_size:
        bench_grid(minilm, tok, grid_size, autocast, run.report, args.data_dir)
    print("\n" + HEADER + "".join(f"\n{format_row(row)}" for row in run.report.rows))
    if args.json:
        meta = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else suite.cpu_name(),
                "torch": torch.__version__, "dtype": args.dtype, "repeats": run.repeats, "inputs": source,
                "threads": torch.get_num_threads(), "clock": args.clock, "batches": run.n_batches,
                "batch": {str(n): bs for n, bs in run.batch_for.items()}, "minilm": minilm_source, "tiny": args.tiny,
                "compile": args.compile,
                "command": "python -m benchmarks.bench " + " ".join(sys.argv[1:] if argv is None else argv)}
        with atomic_path(args.json) as tmp:
            tmp.write_text(json.dumps({**meta, "rows": [r.__dict__ for r in run.report.rows]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

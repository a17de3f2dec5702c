"""PAPA performance suite: one process, the same batches for every variant, a markdown table at the end.

    python -m benchmarks.bench            # full run (2 CPU threads: several minutes)
    python -m benchmarks.bench --quick    # smoke run: small batches, fewer repeats
    python -m benchmarks.bench --dtype bf16 --device cuda
    python -m benchmarks.bench --models smollm2   # the decoder alone

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
import gc
import json
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

from benchmarks import timing
from benchmarks.cases import Case, bench_model
from benchmarks.inputs import TINY, batch_sizes, bert_base, random_model_dir, texts_for, texts_needed
from benchmarks.probe_grid import bench_grid
from benchmarks.report import HEADER, Report, format_row

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
    parser.add_argument("--clock", choices=tuple(timing.CLOCKS), default="wall",
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
                             "--hub) at the grid's shapes and a saturating batch, with FLOPs and %% of peak")
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
            from benchmarks.bench_decoder import bench_decoder

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
    from benchmarks import bench_headline as bh
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
    meta = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else timing.cpu_name(),
            "torch": torch.__version__, "dtype": args.dtype, "repeats": suite.repeats, "inputs": inputs,
            "threads": torch.get_num_threads(), "clock": args.clock, "batches": suite.n_batches,
            "batch": {str(n): bs for n, bs in suite.batch_for.items()}, "minilm": minilm_source, "tiny": args.tiny,
            "compile": args.compile,
            "command": "python -m benchmarks.bench " + " ".join(sys.argv[1:] if argv is None else argv)}
    with open(args.json, "w") as fh:
        json.dump({**meta, "rows": [r.__dict__ for r in suite.report.rows]}, fh, indent=1)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # local data or synthetic text: never wait on the hub
    torch.set_num_threads(args.threads)
    timing.use_clock(args.clock)
    timing.mmap_threshold(32 << 20)  # fixed (glibc's dynamic maximum), so every variant sees the same allocator
    from papa.method.models import resolve_device

    device = resolve_device(args.device)
    dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    autocast = partial(torch.autocast, device.type, dtype=dtype) if dtype is not None else nullcontext
    from benchmarks.peaks import peak_tflops

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
        print(format_row(row))
    if args.json:
        _write_json(args, argv, suite, source, minilm_source)
    return 0


if __name__ == "__main__":
    sys.exit(main())

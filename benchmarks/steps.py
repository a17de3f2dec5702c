"""Training steps without launch overhead: eager vs graphed vs compiled steps at the grid's shapes (Table 3's batch
and length, synthetic rows, random-weight models from DIR's configs; docs/performance.md).

    python -m benchmarks.steps --hub DIR --device cuda --json steps.json [--precision bf16] [--peak-tflops 989]
    python -m benchmarks.steps --smoke --device cpu --json smoke.json      # tiny sizes, under a minute on a CPU

Each kind (``stored``: a probe over stored features, half the heads replaced; ``lambda``: a λ step; ``trainable``:
a trained-constants step) has its modes timed in one round-robin call; FLOPs per step are counted.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path
from types import SimpleNamespace

import torch

import papa
from benchmarks.suite import cpu_name, interleaved, peak_tflops, share_of_peak, synthetic_task, tflops
from papa.core.artifacts import write_json_atomic
from papa.core.vocabulary import PRECISIONS, STEP_MODES
from papa.method.attention_free import query_key_dropped_while
from papa.method.constants import data_free_constants
from papa.method.cost import probe_flops, step_flops
from papa.method.precision import backbone_autocast, check_precision
from papa.method.selection import heads_to_replace, replacement_order
from papa.probing.features import FeatureSource
from papa.probing.step_modes import DEFAULT_BACKEND, check_step_mode, fetcher, make_step, new_optimizer
from papa.probing.training import make_probe
from papa.tasks.registry import get_task

MODELS, TASKS = ("bert-base-uncased", "roberta-large"), ("sst2", "mnli", "ner")
KINDS = ("stored", "lambda", "trainable")
#: --smoke: a tiny BERT, short rows, small batches (every code path, no hub folder needed).
SMOKE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000,
             max_position_embeddings=64)
SMOKE_SHAPE = {"n": 16, "batch_size": 4}


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hub", type=Path, help="folder of the models' config folders (not needed with --smoke)")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--models", nargs="+", default=list(MODELS))
    p.add_argument("--tasks", nargs="+", default=list(TASKS))
    p.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    p.add_argument("--modes", nargs="+", default=None, choices=STEP_MODES,
                   help="default: every mode the device runs (graphed only on CUDA)")
    p.add_argument("--precision", default="float32", choices=PRECISIONS)
    p.add_argument("--backend", default=None, help=f"compiled mode's backend (default {DEFAULT_BACKEND}; --smoke: "
                   "aot_eager, which generates no code)")
    p.add_argument("--steps", type=int, default=None, help="steps per timed call (default 10; --smoke 3)")
    p.add_argument("--repeats", type=int, default=None, help="timed rounds, medians (default 3; --smoke 2)")
    p.add_argument("--peak-tflops", type=float, default=None, help="the device's dense peak (default: by its name)")
    p.add_argument("--smoke", action="store_true", help="a tiny model and shapes: every path in under a minute")
    p.add_argument("--json", type=Path, required=True, help="where to write the rows")
    return p.parse_args(argv)


def check(args: argparse.Namespace) -> argparse.Namespace:
    """Every input checked before any work; the defaults that depend on others filled in."""
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: CUDA is not available here; give --device cpu")
    args.modes = args.modes or [m for m in STEP_MODES if m != "graphed" or args.device == "cuda"]
    for check_one, value, flag in [(check_step_mode, m, f"--modes {m}: ") for m in args.modes] + [
            (check_precision, args.precision, "")]:
        try:
            check_one(value, args.device)
        except ValueError as exc:
            raise SystemExit(f"{flag}{exc}") from None
    for name, default, smoke in (("steps", 10, 3), ("repeats", 3, 2)):
        if getattr(args, name) is None:
            setattr(args, name, smoke if args.smoke else default)
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.peak_tflops is not None and not args.peak_tflops > 0:
        raise SystemExit(f"--peak-tflops must be positive, got {args.peak_tflops}")
    for task in args.tasks:
        if not get_task(task).trains_probe:
            raise SystemExit(f"--tasks {task}: it trains no probe, so it has no training step")
    if not args.smoke:
        if args.hub is None or not args.hub.is_dir():
            raise SystemExit(f"--hub {args.hub}: give the folder holding the models' config folders (or --smoke)")
        missing = [m for m in args.models if not (args.hub / m.replace("/", "--") / "config.json").is_file()]
        if missing:
            raise SystemExit(f"no config.json for {', '.join(missing)} under --hub {args.hub}")
    if not args.json.parent.is_dir():
        raise SystemExit(f"--json {args.json}: its folder {args.json.parent} does not exist")
    args.backend = args.backend or ("aot_eager" if args.smoke else DEFAULT_BACKEND)
    return args


def build(name: str, args: argparse.Namespace):
    """(label, model in eval mode on the device, pad id) of a random-weight model from its config."""
    from transformers import AutoConfig, AutoModel, BertConfig

    config = BertConfig(**SMOKE) if args.smoke else AutoConfig.from_pretrained(args.hub / name.replace("/", "--"))
    torch.manual_seed(0)
    return ("tiny-bert" if args.smoke else name), AutoModel.from_config(config).to(args.device).eval(), \
        config.pad_token_id or 0


class KindBench:
    """One model, task and kind: the heads set as the runner sets them, the batches, one trained probe per mode."""

    def __init__(self, model, ctrl, task: str, kind: str, args: argparse.Namespace, pad: int):
        self.model, self.ctrl, self.kind, self.args, self.spec = model, ctrl, kind, args, get_task(task)
        h = self.spec.hparams
        self.n, self.bs = (SMOKE_SHAPE["n"], SMOKE_SHAPE["batch_size"]) if args.smoke else (h.max_length, h.batch_size)
        vocab = model.config.vocab_size
        self.data = synthetic_task(self.spec, SimpleNamespace(pad_token_id=pad), self.bs * args.steps, self.n, vocab)
        self.num_labels = vocab if self.spec.vocabulary_targets else self.spec.num_labels
        self.batches = [torch.arange(i, i + self.bs) for i in range(0, len(self.data), self.bs)]

    def heads(self) -> list:
        """Set the kind's heads; the parameters its step trains beside the probe."""
        ctrl = self.ctrl
        ctrl.set_constants(data_free_constants("toeplitz", ctrl.signature, self.n), trainable=self.kind == "trainable")
        ctrl.keep_all()
        if self.kind == "stored":  # the features a frozen point stores: half the heads replaced
            order = replacement_order("random", ctrl.num_layers, ctrl.num_heads, seed=0)
            ctrl.replace(heads_to_replace(order, "1/2", ctrl.num_layers, ctrl.num_heads, "down"))
            return []
        if self.kind == "lambda":
            ctrl.mix()
            return [ctrl.theta]
        ctrl.replace()
        return [ctrl.constants]

    def runner(self, mode: str, source, extra: list):
        """A timed call of `mode`: `--steps` steps of a fresh probe (its own optimizer and step) over the batches."""
        torch.manual_seed(0)
        probe = make_probe(self.spec, self.model, self.n, self.num_labels).to(self.args.device).train()
        lr = self.spec.hparams.learning_rate
        groups = [{"params": list(probe.parameters()), "lr": lr}] + ([{"params": extra, "lr": lr}] if extra else [])
        fetch, features = fetcher(source)
        step = make_step(mode, probe, new_optimizer(mode, groups), self.spec.kind, features, backend=self.args.backend)

        def run() -> None:
            with backbone_autocast(self.args.precision, self.args.device) if self.kind != "stored" else nullcontext():
                for idx in self.batches:
                    step(fetch(idx))
        return run

    def source(self) -> FeatureSource:
        """The kind's features: stored once (on the device, or in host memory on a CPU), or the backbone's pass."""
        if self.kind != "stored":
            return FeatureSource(self.model, self.data, trainable_backbone=True, progress=False)
        with backbone_autocast(self.args.precision, self.args.device):
            return FeatureSource(self.model, self.data, trainable_backbone=False, progress=False,
                                 folder=Path(tempfile.gettempdir()),
                                 store="device" if self.args.device == "cuda" else "host")

    def time(self) -> dict[str, float]:
        """Median seconds per step of every mode, in one timing call."""
        extra = self.heads()
        dropped = query_key_dropped_while(self.ctrl, where_possible=True) if self.kind == "trainable" else nullcontext()
        with dropped:
            source = self.source()
            variants = {mode: self.runner(mode, source, extra) for mode in self.args.modes}
            t = interleaved(variants, self.args.repeats, torch.device(self.args.device), warmup=1)
            source.close()
        return {mode: seconds / len(self.batches) for mode, seconds in t.items()}

    def rows(self, label: str, task: str, t: dict[str, float]) -> list[dict]:
        """The JSON rows of the kind's modes: each step's time, FLOPs (the probe's forward and backward over every
        slot; λ and trained constants add the backbone's pass and backward), TFLOP/s, share of peak, × eager."""
        cfg, args = self.model.config, self.args
        probe = probe_flops(self.spec.kind, cfg.num_hidden_layers + 1, cfg.hidden_size, self.n, self.num_labels,
                            step=True)
        backbone = 0 if self.kind == "stored" else step_flops(
            cfg, self.n, replaced_share=1.0 if self.kind == "trainable" else 0.0, mixed=self.kind == "lambda")
        flops = float(self.bs * (probe + backbone))
        top = args.peak_tflops if args.peak_tflops is not None or args.device != "cuda" else peak_tflops(
            torch.cuda.get_device_name(), args.precision)
        device = torch.cuda.get_device_name() if args.device == "cuda" else cpu_name()
        return [{"model": label, "task": task, "kind": self.kind, "mode": mode, "n": self.n, "batch_size": self.bs,
                 "precision": args.precision, "device": device, "backend": args.backend, "steps": args.steps,
                 "repeats": args.repeats, "step_s": seconds, "flops_per_step": flops, "tflops": tflops(flops, seconds),
                 "peak_tflops": top, "peak_share": share_of_peak(tflops(flops, seconds), top),
                 "speedup_vs_eager": t["eager"] / seconds if "eager" in t else None} for mode, seconds in t.items()]


def table(rows: list[dict]) -> str:
    """The rows as a Markdown table."""
    def fmt(value, spec: str) -> str:
        return "-" if value is None else format(value, spec)
    lines = ["| model | task | n | batch | kind | mode | ms/step | × eager | TFLOP/s | % of peak |",
             "|---|---|---:|---:|---|---|---:|---:|---:|---:|"]
    lines += [f"| {r['model']} | {r['task']} | {r['n']} | {r['batch_size']} | {r['kind']} | {r['mode']} | "
              f"{1e3 * r['step_s']:.2f} | {fmt(r['speedup_vs_eager'], '.2f')} | {r['tflops']:.3f} | "
              f"{fmt(None if r['peak_share'] is None else 100 * r['peak_share'], '.2f')} |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = check(_arguments(argv))
    tasks = ["sst2", "ner"] if args.smoke and args.tasks == list(TASKS) else args.tasks
    rows = []
    for name in ["tiny-bert"] if args.smoke else args.models:
        label, model, pad = build(name, args)
        ctrl = papa.attach(model)
        try:
            for task in tasks:
                for kind in args.kinds:
                    bench = KindBench(model, ctrl, task, kind, args, pad)
                    torch._dynamo.reset()  # each kind compiles its own graphs
                    rows += bench.rows(label, task, bench.time())
                    print(table(rows[-len(args.modes):]).split("\n", 2)[-1], flush=True)
                    save(args, rows, complete=False)  # a stopped run keeps every kind it measured
        finally:
            ctrl.detach()
    print(table(rows))
    save(args, rows, complete=True)
    print(f"wrote {args.json}")
    return 0


def save(args, rows: list[dict], *, complete: bool) -> None:
    """The rows so far, written atomically to ``--json``; `complete` says whether every kind ran."""
    write_json_atomic(args.json, {"format": 1, "smoke": args.smoke, "complete": complete, "rows": rows})


if __name__ == "__main__":
    sys.exit(main())

"""Ops per forward pass: what each of papa's modes adds to the plain forward, counted, not timed.

    python -m benchmarks.ops [--model minilm|bert-base|NAME] [--batch 2] [--length 16] [--repeats 50]

On a GPU at the paper's batch sizes a small model's forward pass is set by kernel launches and the Python that
issues them rather than by arithmetic (docs/performance.md, the H200 table): every op papa adds to a layer costs about
the same there whatever its size. This counts the aten ops of one forward pass (a `TorchDispatchMode`; each is at
least one launch in eager mode) for the plain model and for each mode, the ops added per layer beyond the plain
forward, and the host time of a pass at a tiny shape on this machine (where arithmetic is negligible; a proxy for
the launch-bound regime, noisy to about ±10%). Counts are exact and the same on every run; they are taken on a
second pass, after the first has prepared what papa makes once per head configuration. `TARGETS` holds each mode's
target, and tests/unit/test_ops_bounds.py bounds the counts.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import statistics
import sys
import time
from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import papa
from papa.method.attention_free import drop_query_key
from papa.method.selection import heads_to_replace


class OpCounter(TorchDispatchMode):
    """Counts the aten ops run inside it, by name: all of them, and those that are not views (a view costs host
    time but launches no kernel on an accelerator)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter = Counter()
        self.kernels: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[func.overloadpacket.__name__] += 1
        if not func.is_view:
            self.kernels[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def _model(name: str):
    from papa.method.models import load_model

    if name != "bert-base":
        return load_model(name)
    from benchmarks.inputs import bert_base  # a random BERT-base, as the suite builds it

    _, tok = load_model()
    return bert_base(len(tok)), tok


def _variants(model, batch, n: int) -> dict:
    """name -> (model, controller or None); papa's variants carry average constants captured on `batch`."""
    work = copy.deepcopy(model)
    ctrl = papa.attach(work)
    with ctrl.capturing(n) as stats, torch.no_grad():
        work(**batch)
    constants = stats.to_constants(ctrl.signature, layout="sep_last")
    L, H = ctrl.num_layers, ctrl.num_heads
    order = [(int(i) // H, int(i) % H) for i in torch.randperm(L * H, generator=torch.Generator().manual_seed(0))]
    setups = {
        "capture": lambda c: None,
        "attention-free (all constant, Q/K dropped)": lambda c: (c.replace(None), drop_query_key(c)),
        "1/2 input-dependent, Q/K dropped": lambda c: (c.replace(heads_to_replace(order, "1/2", L, H, "down")),
                                                       drop_query_key(c)),
        "λ mix (every head)": lambda c: c.mix(None),
    }
    out = {"plain": (copy.deepcopy(model), None)}
    for name, setup in setups.items():
        m = copy.deepcopy(model)
        c = papa.attach(m)
        c.set_constants(constants)
        setup(c)
        out[name] = (m, c)
    return out


#: The targets of added ops per layer (MiniLM, batch 2 x 16, one padded example: this script's defaults).
TARGETS = {"attention-free (all constant, Q/K dropped)": 8, "1/2 input-dependent, Q/K dropped": 12,
           "λ mix (every head)": 15, "capture": 15}


def _batch(batch: int, n: int) -> dict:
    ids = torch.randint(1000, 2000, (batch, n), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(batch, n, dtype=torch.long)
    mask[-1, n // 2:] = 0  # one padded example, as probing batches have
    return {"input_ids": ids, "attention_mask": mask}


def added_ops(model, batch: dict, n: int) -> dict[str, tuple[Counter, Counter]]:
    """Per variant: (ops of one forward pass by name, the same for ops that are not views), counted on a second
    pass (the first fills per-configuration caches, as any run's first batch does)."""
    counts = {}
    for name, (m, ctrl) in _variants(model, batch, n).items():
        with _mode(name, ctrl, n), torch.no_grad():
            m(**batch)
            with OpCounter() as counter:
                m(**batch)
        counts[name] = (counter.ops, counter.kernels)
    return counts


def _mode(name: str, ctrl, n: int):
    """The capture variant runs inside a capture; the others as they are."""
    return ctrl.capturing(n) if name == "capture" else contextlib.nullcontext()


def per_layer(counts: dict, layers: int) -> dict[str, tuple[float, float]]:
    """Per variant other than plain: (ops, ops that are not views) added per layer beyond the plain forward."""
    plain, plain_kernels = (sum(c.values()) for c in counts["plain"])
    return {name: ((sum(ops.values()) - plain) / layers, (sum(kernels.values()) - plain_kernels) / layers)
            for name, (ops, kernels) in counts.items() if name != "plain"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="minilm", help="minilm (default), bert-base (random) or a model name")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--length", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=50, help="timed passes per variant (median of 5 rounds)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--regime", choices=("device", "accelerator"), default="device",
                        help="accelerator: run (and count) the paths papa takes where launches set the time, here")
    args = parser.parse_args(argv)
    if args.regime == "accelerator":
        import papa.method.capture

        papa.method.capture.launch_bound = lambda device: True
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model, _ = _model("sentence-transformers/all-MiniLM-L6-v2" if args.model == "minilm" else args.model)
    model.eval()
    B, n = args.batch, args.length
    batch = _batch(B, n)
    layers = model.config.num_hidden_layers
    defaults = args.model == "minilm" and (B, n) == (2, 16)
    print(f"# papa ops per forward pass: {args.model}, batch {B} x {n} tokens, torch {torch.__version__}, "
          f"{args.threads} threads, {args.regime} regime; host time: median of 5 rounds of {args.repeats} passes\n")
    print("| variant | aten ops per pass | added per layer | of which not views | target "
          "| host ms per pass | most frequent ops |")
    print("|---|---|---|---|---|---|---|")
    counts = added_ops(model, batch, n)
    added = per_layer(counts, layers)
    for name, (m, ctrl) in _variants(model, batch, n).items():
        with _mode(name, ctrl, n), torch.no_grad():
            m(**batch)
            rounds = []
            for _ in range(5):
                start = time.perf_counter()
                for _ in range(args.repeats):
                    m(**batch)
                rounds.append((time.perf_counter() - start) / args.repeats)
        ops = counts[name][0]
        more, kernels = added.get(name, (None, None))
        target = TARGETS.get(name)
        met = "" if target is None or not defaults else f"≤ {target} ({'met' if more <= target else 'not met'})"
        top = ", ".join(f"{op} {k}" for op, k in ops.most_common(6))
        print(f"| {name} | {sum(ops.values())} | {'' if more is None else f'{more:+.1f}'} | "
              f"{'' if kernels is None else f'{kernels:+.1f}'} | {met} | {statistics.median(rounds) * 1e3:.2f} | "
              f"{top} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

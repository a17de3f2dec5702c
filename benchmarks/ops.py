"""What each of papa's modes adds to a forward pass, in aten ops (counted, not timed; each is a launch on an
accelerator), with the host time of a pass at a tiny shape (docs/performance.md, "Ops per layer").

    python -m benchmarks.ops [--model minilm|bert-base|NAME] [--batch 2] [--length 16] [--regime accelerator]
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

#: The targets of added ops per layer (MiniLM, batch 2 x 16, one padded example: the defaults);
#: tests/unit/test_ops_bounds.py bounds the counts.
TARGETS = {"attention-free (all constant, Q/K dropped)": 8, "1/2 input-dependent, Q/K dropped": 12,
           "λ mix (every head)": 15, "capture": 15}


class OpCounter(TorchDispatchMode):
    """Counts the aten ops run inside it, by name: all, and those that are not views (no kernel of their own)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops, self.kernels = Counter(), Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[func.overloadpacket.__name__] += 1
        if not func.is_view:
            self.kernels[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def _batch(batch: int, n: int) -> dict:
    ids = torch.randint(1000, 2000, (batch, n), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(batch, n, dtype=torch.long)
    mask[-1, n // 2:] = 0  # one padded example, as probing batches have
    return {"input_ids": ids, "attention_mask": mask}


def _variants(model, batch, n: int) -> dict:
    """name -> (model, controller or None); papa's variants carry average constants captured on `batch`."""
    work = copy.deepcopy(model)
    ctrl = papa.attach(work)
    with ctrl.capturing(n) as stats, torch.no_grad():
        work(**batch)
    constants = stats.to_constants(ctrl.signature, layout="sep_last")
    L, H = ctrl.num_layers, ctrl.num_heads
    order = [(int(i) // H, int(i) % H) for i in torch.randperm(L * H, generator=torch.Generator().manual_seed(0))]
    setups = {"capture": lambda c: None,
              "attention-free (all constant, Q/K dropped)": lambda c: (c.replace(None), drop_query_key(c)),
              "1/2 input-dependent, Q/K dropped": lambda c: (c.replace(heads_to_replace(order, "1/2", L, H, "down")),
                                                             drop_query_key(c)),
              "λ mix (every head)": lambda c: c.mix(None)}
    out = {"plain": (copy.deepcopy(model), None)}
    for name, setup in setups.items():
        m = copy.deepcopy(model)
        c = papa.attach(m)
        c.set_constants(constants)
        setup(c)
        out[name] = (m, c)
    return out


def _mode(name: str, ctrl, n: int):
    """The capture variant runs inside a capture; the others as they are."""
    return ctrl.capturing(n) if name == "capture" else contextlib.nullcontext()


def added_ops(model, batch: dict, n: int) -> dict[str, tuple[Counter, Counter]]:
    """Per variant: (ops of one forward pass by name, those that are not views), counted on a second pass (the first
    fills per-configuration caches, as any run's first batch does)."""
    counts = {}
    for name, (m, ctrl) in _variants(model, batch, n).items():
        with _mode(name, ctrl, n), torch.no_grad():
            m(**batch)
            with OpCounter() as counter:
                m(**batch)
        counts[name] = (counter.ops, counter.kernels)
    return counts


def per_layer(counts: dict, layers: int) -> dict[str, tuple[float, float]]:
    """Per variant but plain: (ops, ops that are not views) added per layer beyond the plain forward."""
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
    from papa.method.models import load_model

    if args.model == "bert-base":  # a random BERT-base, as the suite builds it
        from benchmarks.suite import bert_base

        model = bert_base(len(load_model()[1]))
    else:
        model = load_model("sentence-transformers/all-MiniLM-L6-v2" if args.model == "minilm" else args.model)[0]
    model.eval()
    n, batch = args.length, _batch(args.batch, args.length)
    defaults = args.model == "minilm" and (args.batch, n) == (2, 16)
    print(f"# papa ops per forward pass: {args.model}, batch {args.batch} x {n} tokens, torch {torch.__version__}, "
          f"{args.threads} threads, {args.regime} regime; host time: median of 5 rounds of {args.repeats} passes\n")
    print("| variant | aten ops per pass | added per layer | of which not views | target | host ms per pass "
          "| most frequent ops |\n|---|---|---|---|---|---|---|")
    counts = added_ops(model, batch, n)
    added = per_layer(counts, model.config.num_hidden_layers)
    for name, (m, ctrl) in _variants(model, batch, n).items():
        rounds = []
        with _mode(name, ctrl, n), torch.no_grad():
            m(**batch)
            for _ in range(5):
                start = time.perf_counter()
                for _ in range(args.repeats):
                    m(**batch)
                rounds.append((time.perf_counter() - start) / args.repeats)
        ops, (more, kernels), target = counts[name][0], added.get(name, (None, None)), TARGETS.get(name)
        met = "" if target is None or not defaults else f"≤ {target} ({'met' if more <= target else 'not met'})"
        print(f"| {name} | {sum(ops.values())} | {'' if more is None else f'{more:+.1f}'} | "
              f"{'' if kernels is None else f'{kernels:+.1f}'} | {met} | {statistics.median(rounds) * 1e3:.2f} | "
              f"{', '.join(f'{op} {k}' for op, k in ops.most_common(6))} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

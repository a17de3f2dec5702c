"""Ops per forward pass: what each of papa's modes adds to the plain forward, counted, not timed.

    python benchmarks/ops.py [--model minilm|bert-base|NAME] [--batch 2] [--length 16] [--repeats 50]

On a GPU at the paper's batch sizes a small model's forward pass is set by kernel launches and the Python that
issues them rather than by arithmetic (docs/performance.md, the H200 table): every op papa adds to a layer costs about
the same there whatever its size. This counts the aten ops of one forward pass (a `TorchDispatchMode`; each is at
least one launch in eager mode) for the plain model and for each mode, the ops added per layer beyond the plain
forward, and the host time of a pass at a tiny shape on this machine (where arithmetic is negligible; a proxy for
the launch-bound regime, noisy to about ±10%). Counts are exact and the same on every run.
"""
from __future__ import annotations

import argparse
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
    """Counts the aten ops run inside it, by name."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def _model(name: str):
    from papa.method.models import load_model

    if name != "bert-base":
        return load_model(name)
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from bench import bert_base  # a random BERT-base, as bench.py builds it

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="minilm", help="minilm (default), bert-base (random) or a model name")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--length", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=50, help="timed passes per variant (median of 5 rounds)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model, _ = _model("sentence-transformers/all-MiniLM-L6-v2" if args.model == "minilm" else args.model)
    model.eval()
    B, n = args.batch, args.length
    ids = torch.randint(1000, 2000, (B, n), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(B, n, dtype=torch.long)
    mask[-1, n // 2:] = 0  # one padded example, as probing batches have
    batch = {"input_ids": ids, "attention_mask": mask}
    layers = model.config.num_hidden_layers
    print(f"# papa ops per forward pass: {args.model}, batch {B} x {n} tokens, torch {torch.__version__}, "
          f"{args.threads} threads; host time: median of 5 rounds of {args.repeats} passes\n")
    print("| variant | aten ops per pass | added per layer | host ms per pass | most frequent ops |")
    print("|---|---|---|---|---|")
    plain_ops = None
    for name, (m, ctrl) in _variants(model, batch, n).items():
        capture = ctrl.capturing(n) if name == "capture" else None
        if capture is not None:
            capture.__enter__()
        try:
            with torch.no_grad():
                m(**batch)  # a first pass fills per-configuration caches
                with OpCounter() as counter:
                    m(**batch)
                rounds = []
                for _ in range(5):
                    start = time.perf_counter()
                    for _ in range(args.repeats):
                        m(**batch)
                    rounds.append((time.perf_counter() - start) / args.repeats)
        finally:
            if capture is not None:
                capture.__exit__(None, None, None)
        total = sum(counter.ops.values())
        plain_ops = total if plain_ops is None else plain_ops
        added = "" if name == "plain" else f"{(total - plain_ops) / layers:+.1f}"
        top = ", ".join(f"{op} {k}" for op, k in counter.ops.most_common(6))
        print(f"| {name} | {total} | {added} | {statistics.median(rounds) * 1e3:.2f} | {top} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

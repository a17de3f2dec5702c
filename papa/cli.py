"""The `papa` command line. Each subcommand parses its arguments and calls one library function."""
from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

from .models import DEFAULT_MODEL


def constants_filename(model_name: str, corpus: str, max_length: int, layout: str, kind: str = "average") -> str:
    """A file name that says what the constants are: <model>__<corpus>__<kind>-<layout>-n<N>.safetensors."""
    slug = lambda s: re.sub(r"[^A-Za-z0-9._-]+", "-", s).strip("-")  # noqa: E731
    return f"{slug(model_name)}__{slug(corpus)}__{kind}-{layout}-n{max_length}.safetensors"


def _extract(args: argparse.Namespace) -> int:
    from .corpus import file_corpus, task_corpus
    from .extract import extract_constants
    from .models import canonical_model_name, load_model

    if Path(args.task).is_file():
        corpus = file_corpus(args.task, args.text_column, args.pair_column, limit=args.limit)
    else:
        corpus = task_corpus(args.task, args.split, data_dir=args.data_dir, limit=args.limit)
    model, tokenizer = load_model(args.model, device=args.device)
    start = time.perf_counter()
    constants = extract_constants(model, tokenizer, corpus.texts, corpus.pairs, max_length=args.max_length,
                                  batch_size=args.batch_size, layout=args.layout, corpus=corpus.name,
                                  model_name=canonical_model_name(args.model), progress=not args.quiet)
    name = canonical_model_name(args.model)
    path = constants.save(Path(args.out) / constants_filename(name, corpus.name, args.max_length, args.layout))
    meta = constants.metadata
    print(f"wrote {path}\n  model {name} ({meta.model.num_layers} layers x {meta.model.num_heads} heads), "
          f"{meta.num_examples} examples from {corpus.name}, length {meta.max_length}, layout {meta.layout}, "
          f"{time.perf_counter() - start:.1f}s")
    return 0


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"hub id or local directory of the encoder (default: {DEFAULT_MODEL}, installed offline)")
    p.add_argument("--data-dir", default=None,
                   help="local data directory (GLUE TSVs, CoNLL-2003, WikiText); default $PAPA_DATA_DIR, else the hub")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, … or auto (default: cpu)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="papa",
        description="PAPA: replace a frozen encoder's attention with constant matrices and probe what is left "
                    "(Hassid et al., Findings of EMNLP 2022).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("extract", help="average every head's attention over an unlabeled corpus (paper 3.1)",
                       description="Average every head's attention over a corpus and save the constant matrices "
                                   "(safetensors with metadata).")
    _add_common(p)
    p.add_argument("--task", required=True,
                   help="a task name (cola, sst2, mrpc, mnli, ner, pos, mlm) or a .txt/.tsv file")
    p.add_argument("--split", default="train", choices=["train", "eval"], help="the task's split (default: train)")
    p.add_argument("--max-length", type=int, required=True, help="fixed sequence length N of the constants")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--limit", type=int, default=None, help="use only the first LIMIT examples")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--layout", default="sep_last", choices=["sep_last", "standard"],
                   help="input layout (default: sep_last, paper Appendix A)")
    p.add_argument("--text-column", default=None, help="TSV column holding the text")
    p.add_argument("--pair-column", default=None, help="TSV column holding the second text of a pair")
    p.set_defaults(func=_extract)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    from .errors import PapaError

    try:
        return args.func(args)
    except (PapaError, FileNotFoundError, ValueError) as exc:
        print(f"papa {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

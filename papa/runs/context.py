"""The run context a command is given (model, data folder, output folder, device, length), checked once at the edge,
before any data or model is read. `FIELDS` checks them cheapest first, none touching the network."""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from papa.core.vocabulary import SPLITS

__all__ = ["FIELDS", "Field", "RunContext", "check_run_context", "command_context"]


@dataclass(frozen=True)
class RunContext:
    """What a command runs with, as given; `reads` are the tasks whose local files it reads, each with its splits."""

    models: tuple[str, ...] = ()
    data_dir: str | os.PathLike | None = None
    reads: tuple[tuple[str, tuple[str, ...]], ...] = ()
    out: str | os.PathLike | None = None
    device: str | None = None
    max_length: int | None = None


@dataclass(frozen=True)
class Field:
    """One field of the run context: its name, what it accepts, and the check that refuses anything else."""

    name: str
    accepts: str
    check: Callable[[RunContext], None]


def _model(ctx: RunContext) -> None:
    from papa.method.models import check_model_name

    for model in ctx.models:
        check_model_name(model)


def _data(ctx: RunContext) -> None:
    from papa.tasks.data import check_data_dir, check_task_files

    check_data_dir(ctx.data_dir)
    for task, splits in ctx.reads:
        check_task_files(task, splits, ctx.data_dir)


def _out(ctx: RunContext) -> None:
    from papa.core.artifacts import check_output_dir

    if ctx.out is not None:
        check_output_dir(ctx.out)


def _device(ctx: RunContext) -> None:
    from papa.method.models import resolve_device

    if ctx.device is not None:
        resolve_device(ctx.device)


def _max_length(ctx: RunContext) -> None:
    from papa.runs.constants_cache import check_length_here

    if ctx.max_length is not None:
        for model in ctx.models:
            check_length_here(model, ctx.max_length)


#: What each field accepts, checked in this order (cheapest first).
FIELDS: tuple[Field, ...] = (
    Field("model", "a hub id (org/name), a packaged model's alias, or an existing local folder holding config.json; "
                   "a path is checked here, a hub id only when it loads", _model),
    Field("data_dir", "unset (then $PAPA_DATA_DIR, else the Hugging Face hub), or an existing folder holding the "
                      "files of the tasks the command reads (glue_data/, conll2003/, wikitext/)", _data),
    Field("out", "a folder this process can write in (created if missing)", _out),
    Field("device", "cpu, cuda, cuda:N, mps or auto, available on this machine", _device),
    Field("max_length", "a positive length within the model's positions (read off its config where it is here)",
          _max_length),
)


def check_run_context(ctx: RunContext) -> None:
    """Refuse the first field of `ctx` that `FIELDS` does not accept (a `PapaError` or `ValueError` naming it)."""
    for field in FIELDS:
        field.check(ctx)


def command_context(args) -> RunContext | None:
    """The run context a `papa` command's parsed flags give, or None for a command that takes none."""
    if not hasattr(args, "device"):
        return None

    reads: list[tuple[str, tuple[str, ...]]] = []
    task = getattr(args, "task", None)
    if args.command == "extract":
        # a corpus file (or a path that is not one, which extract_to_file refuses in its own words) reads no data folder
        if not Path(task).exists() and Path(task).suffix.lower() not in (".txt", ".tsv"):
            reads.append((task, (args.split,)))
    elif task is not None:  # rank, probe: the task's splits, and another task's training inputs for its constants
        reads.append((task, SPLITS))
        if args.constants_corpus != "task" and args.constants_file is None:
            reads.append((args.constants_corpus, ("train",)))
    # --models of reproduce and jobs: checked with the notebooks' grids (papa.reproduce.notebooks.check_batch)
    return RunContext(models=(args.model,) if hasattr(args, "model") else (), data_dir=args.data_dir,
                      reads=tuple(reads), out=args.out, device=args.device,
                      max_length=getattr(args, "max_length", None))

"""The `papa` command line. Each subcommand parses its arguments and calls one library function."""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

from papa.core.run_folder import RunFolder
from papa.core.settings import Resources
from papa.core.vocabulary import (BATCH_ORDERS, CONSTANTS_KINDS, DECODER_LAYOUT, DECODER_PROBE_INPUTS,
                                   DEFAULT_BATCH_ORDER, DEFAULT_DTYPE, DEFAULT_EXECUTION, DEFAULT_PRECISION,
                                   DEFAULT_STEP_MODE, JOB_ACTIONS, LAYOUTS, MODEL_DTYPES, NOTEBOOKS as NOTEBOOK_NAMES,
                                   PAPER_PROBE_INPUTS, PRECISIONS, PROBE_INPUTS, PROFILE_NAMES, REPRODUCTION_LAYOUT,
                                   ROUNDINGS, SELECTION_METHODS, SPLITS, STEP_MODES, SUBMITIT_CLUSTERS)
from papa.method.models import DEFAULT_MODEL
from papa.reproduce.batch import Batch
from papa.tasks.registry import task_names


def _extract(args: argparse.Namespace) -> int:
    from papa.runs.constants_cache import extract_to_file
    from papa.tasks.corpus import CorpusSource

    source = CorpusSource(args.task, split=args.split, limit=args.limit, text_column=args.text_column,
                          pair_column=args.pair_column)
    constants, path, seconds = extract_to_file(args.model, source, max_length=args.max_length, into=args.out,
                                               layout=args.layout, dtype=args.dtype, batch_size=args.batch_size,
                                               resources=Resources(args.data_dir, args.device, not args.quiet))
    if path is None:  # not the main process under `accelerate launch`
        return 0
    meta = constants.metadata
    print(f"wrote {path}\n  model {meta.model.model_name} ({meta.model.num_layers} layers x {meta.model.num_heads} "
          f"heads), {meta.num_examples} examples from {meta.corpus}, length {meta.max_length}, layout {meta.layout}, "
          f"{args.dtype}, {seconds:.1f}s")
    return 0


def _grid_config(args: argparse.Namespace, **overrides):
    from papa.runs.experiment import GridConfig

    return GridConfig(task=args.task, model=args.model, profile=args.profile, data_dir=args.data_dir, folder=args.out,
                      device=args.device, constants_corpus=args.constants_corpus, rounding=args.rounding,
                      force=args.force, layout=args.layout, dtype=args.dtype, probe_inputs=args.probe_inputs,
                      precision=args.precision, compile=args.compile, steps=args.steps, batch_order=args.batch_order,
                      constants_file=args.constants_file, **overrides)


def _rank(args: argparse.Namespace) -> int:
    from papa.core import distributed
    from papa.runs.lambda_ranking import learn_ranking

    ranking, path = learn_ranking(_grid_config(args), kind=args.constants, seed=args.rank_seed, part=args.part,
                                  progress=not args.quiet)
    if not distributed.is_main():
        return 0
    lam = ranking.lambdas
    print(f"wrote {path}\n  λ over {lam.numel()} heads: min {lam.min():.4f}, median {lam.median():.4f}, "
          f"max {lam.max():.4f}; first to replace: {ranking.order[:5]}")
    return 0


def _probe(args: argparse.Namespace) -> int:
    from papa.core import distributed
    from papa.runs.experiment import run_grid
    from papa.runs.results import aggregate, report_order, with_heads_kept

    cfg = _grid_config(args, constants=tuple(args.constants), selections=tuple(args.selection),
                       fractions=None if args.fractions is None else tuple(args.fractions),
                       seeds=None if args.seeds is None else tuple(args.seeds))
    rows = run_grid(cfg, progress=not args.quiet)
    if not distributed.is_main():
        return 0
    print(_table(with_heads_kept(report_order(aggregate(rows)), rows)))
    baseline = _majority_line(cfg)
    if baseline:
        print(baseline)
    print(f"results: {cfg.folder.results}")
    return 0


def _majority_line(cfg) -> str | None:
    """The score of always predicting the training subset's majority class, on the examples the probe is scored on
    (None for a task without classes)."""
    from papa.paper.baselines import majority_baselines
    from papa.tasks.registry import get_task

    resolved = cfg.resolved()
    table = majority_baselines([resolved.task], profile=resolved.profile, data_dir=resolved.data_dir)
    if table.empty:
        return None
    return (f"majority-class baseline: {float(table['majority'].iloc[0]):.4f} ({get_task(resolved.task).metric} of "
            "always predicting the training subset's most frequent label, on the same evaluation examples)")


def _report(args: argparse.Namespace) -> int:
    from papa.core.artifacts import check_output_file, write_table
    from papa.runs.results import ResultsTable, aggregate, report_order

    results = Path(args.results)
    if results.is_dir():
        inside = RunFolder(results).results
        hint = (f"the one inside it: --results {inside}" if inside.is_file() else
                "the results.csv that `papa probe` or `papa reproduce` wrote")
        raise ValueError(f"--results {results} is a directory: give a results table, {hint}")
    if not results.is_file():
        raise FileNotFoundError(f"no results table at {results}: pass --results with the results.csv that `papa "
                                "probe` (default: artifacts/runs/) or `papa reproduce` (artifacts/<profile>/) wrote")
    if args.out:
        check_output_file(args.out)
    df = ResultsTable(results).read()
    for column in ("model", "task", "profile"):
        wanted = getattr(args, column)
        if wanted:
            df = df[df[column].isin(wanted) | df[column].str.endswith(tuple("/" + w for w in wanted))]
    if df.empty:  # a question with no answer, not bad input: exit code 1, as grep's
        asked = [f"--{c} {' '.join(getattr(args, c))}" for c in ("model", "task", "profile") if getattr(args, c)]
        print(f"papa report: no rows of {results} match {' '.join(asked)}: leave a filter out to see what it holds"
              if asked else f"papa report: {results} holds no results yet: run `papa probe` or `papa reproduce` first",
              file=sys.stderr)
        return 1
    if args.compare:
        from papa.runs.compare import compare

        column, reference, other = args.compare
        for value in (reference, other):
            if column in df and value not in set(df[column].astype(str)):
                raise ValueError(f"--compare {column} {reference} {other}: no row has {column} {value!r}; it holds "
                                 f"{', '.join(sorted(set(df[column].astype(str))))}")
        agg = compare(df, column, reference, other, folder=RunFolder.at(results.parent))
        if agg.empty:
            print(f"papa report: no setting of {results} ran with both {column} {reference!r} and {other!r}",
                  file=sys.stderr)
            return 1
    else:
        agg = report_order(aggregate(df))
    if args.out:
        write_table(agg, args.out, index=False)
        print(f"wrote {args.out}")
    print(_table(agg))
    stability = _stability_lines(results.parent, set(df.model), set(df.task))
    if stability:
        print(stability)
    return 0


def _stability_lines(out: Path, models: set[str], tasks: set[str]) -> str:
    """Per ranking of `models` on `tasks` in the run folder `out`: Spearman's ρ of every pair of its draws with its
    95% interval, and whether the claims read its λ-dependent parts."""
    from papa.runs.stability import STABLE_RHO, draw_agreement, gate_reason, learned_once, rho_text

    rankings = RunFolder.at(out).rankings
    if not rankings.is_dir():
        return ""
    table = draw_agreement(rankings)
    table = table[table.model.isin(models) & table.task.isin(tasks)]
    once = [path.name for path in learned_once(rankings) if path.name.split("__")[1] in tasks]
    alone = ("λ rankings learned once (no second draw: their stability is not measured and the claims do not read "
             "their λ-dependent parts; `papa rank --seed 1` or `--part 1` learns one): "
             + ", ".join(once)) if once else ""
    if table.empty:
        return alone
    lines = [f"λ rankings, every pair of draws, Spearman's ρ [95% interval] (the claims read a ranking drawn on "
             f"disjoint data too where no pair lies below ρ {STABLE_RHO} beyond its interval):"]
    for (model, task, profile, ranking), pairs in table.groupby(["model", "task", "profile", "ranking"], sort=False):
        why = gate_reason(pairs, "its draws")
        verdict = "read" if why is None else f"not read: {why}"
        lines.append(f"  {str(model).split('/')[-1]} {task} ({profile}): {verdict} ({ranking})")
        lines += [f"    {a:>12} {b:>12}  ρ = {rho_text(rho, n)}"
                  for a, b, rho, n in zip(pairs.a, pairs.b, pairs.spearman, pairs.heads)]
    return "\n".join(lines + [alone] * bool(alone))


def _executor(args: argparse.Namespace, out: Path):
    """A submitit executor when --submitit is given (None: the local pool or this process)."""
    if not args.submitit:
        return None
    from papa.reproduce.jobs import submitit_executor

    params = {"timeout_min": args.slurm_time}
    if args.submitit == "slurm":
        params.update(gpus_per_node=args.slurm_gpus, slurm_array_parallelism=args.slurm_array_parallelism)
        if args.slurm_partition:
            params["slurm_partition"] = args.slurm_partition
    return submitit_executor(out.jobs / "submitit", cluster=args.submitit, **params)


def _run_job_list(jobs, args: argparse.Namespace, out: Path) -> int:
    from papa.reproduce.jobs import run_jobs

    report = run_jobs(jobs, out, Resources(args.data_dir, args.device, not args.quiet), workers=args.workers,
                      executor=_executor(args, out))
    print(report.summary(), file=sys.stderr if report.failed else sys.stdout)
    return 1 if report.failed else 0


def _batch(args: argparse.Namespace, since: float | None = None) -> Batch:
    """The batch reproduction the command's flags name: the notebooks named, else those that can run on its models
    or tasks (each left out said, with why), else all."""
    batch = Batch(args.profile, names=args.notebooks or NOTEBOOK_NAMES, with_models=args.models,
                  with_tasks=args.tasks, out_dir=args.out, data_dir=args.data_dir, device=args.device,
                  force=getattr(args, "force", False), progress=not args.quiet, command=args.command_line,
                  since=since)
    if args.notebooks or not (args.models or args.tasks):
        return batch
    from papa.reproduce.notebooks import applicable_notebooks

    kept, left = applicable_notebooks(batch)
    for name, why in left.items():
        print(f"papa {args.command}: leaving out {name}: {why}", file=sys.stderr)
    return replace(batch, names=kept)


def _jobs(args: argparse.Namespace) -> int:
    from papa.reproduce.jobs import batch_jobs, finished, select

    batch = _batch(args)
    out, jobs = batch.out, batch_jobs(batch)
    if args.action == "list":
        done = finished(jobs, out)
        for j in jobs:
            print(f"{j.id}  {'done' if j.key in done else 'todo'}  {j.key}")
        print(f"{len(done)} of {len(jobs)} jobs done ({out.results})")
        return 0
    if not args.ids:
        raise ValueError("give the ids (or keys) of the jobs to run: `papa jobs list --profile P` lists them")
    return _run_job_list(select(jobs, args.ids), args, out)


def _reproduce(args: argparse.Namespace) -> int:
    from papa.reproduce.jobs import batch_jobs, done_runs
    from papa.reproduce.notebooks import check_batch, reproduction_summary, run_notebooks
    from papa.reproduce.timings import phases_text, plan_text, read_run, reference

    start, began = time.perf_counter(), time.time()
    batch = _batch(args, since=began)
    names, out = batch.names, batch.out
    # Before any job or kernel starts: a notebook would fail on these with a kernel's traceback.
    prof = check_batch(batch)
    expected = reference(prof.name)
    if not args.quiet:
        print(plan_text(prof.name, names, out, expected, done_runs(batch)), flush=True)
    # The grid's jobs first, spread out; the notebooks then find every run done and only draw.
    if (args.workers > 1 or args.submitit) and _run_job_list(batch_jobs(batch), args, out):
        print("papa reproduce: jobs failed, notebooks not run; fix and re-run (finished jobs are kept)",
              file=sys.stderr)
        return 1
    times = run_notebooks(batch)
    print(times[["notebook", "seconds", "new_runs"]].to_string(index=False))
    print(phases_text(read_run(out.run_record)))
    took = time.perf_counter() - start
    versus = "" if expected is None else (f" (these notebooks took {expected.notebooks_seconds(names):.0f} s in the "
                                          f"reference run of profile {prof.name})")
    print(f"done in {took:.0f} s{versus}; executed notebooks in {out.notebooks}, figures in {out.figures}, tables "
          f"in {out.tables}, results in {out.results}, times in {out.notebook_times}\n")
    print(reproduction_summary(args.profile, names=names, folder=out))
    return 0


def _table(agg) -> str:
    cols = ["model", "task", "layout", "dtype", "probe_inputs", "precision", "execution", "batch_order", "constants",
            "constants_corpus", "selection", "fraction_label", "heads_kept", "n", "mean", "ci95", "reference", "other",
            "difference", "low", "high", "seeds", "examples", "detectable"]
    view = agg[[c for c in cols if c in agg.columns]].copy()
    for column, default in (("precision", DEFAULT_PRECISION), ("execution", DEFAULT_EXECUTION),
                            ("batch_order", DEFAULT_BATCH_ORDER)):
        if column in view and view[column].eq(default).all():  # shown only where some run used the option
            view = view.drop(columns=column)
    if "constants_corpus" in view and view["constants_corpus"].nunique() <= 1:  # shown where it tells rows apart
        view = view.drop(columns="constants_corpus")
    view["model"] = view["model"].str.split("/").str[-1]
    return view.to_string(index=False, float_format=lambda x: f"{x:.4f}")


def _group() -> argparse.ArgumentParser:
    """A parent parser: its options go to every subcommand that names it."""
    return argparse.ArgumentParser(add_help=False)


def _run_parents() -> dict[str, argparse.ArgumentParser]:
    """The model, where and how a command runs, the profile, --force."""
    model = _group()
    model.add_argument("--model", default=DEFAULT_MODEL,
                       help=f"hub id or local directory of the encoder (default: {DEFAULT_MODEL}, installed offline)")
    model.add_argument("--dtype", default=DEFAULT_DTYPE, choices=MODEL_DTYPES,
                       help=f"the model's precision (default: {DEFAULT_DTYPE}, whatever the checkpoint stores); "
                            "recorded in constants, rankings and results")

    runtime = _group()
    runtime.add_argument("--data-dir", default=None,
                         help="local data directory (GLUE TSVs, CoNLL-2003, WikiText); default $PAPA_DATA_DIR, else "
                              "the hub")
    runtime.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, … or auto (default: cpu)")
    runtime.add_argument("--quiet", action="store_true", help="no progress bars or lines")

    profile = _group()
    profile.add_argument("--profile", default="quick",
                         help=f"{', '.join(PROFILE_NAMES)} (papa.runs.profiles: quick = minutes on a CPU, cpu = about "
                              "2.5 h on a CPU, full = the paper's settings) or a JSON profile file")

    force = _group()
    force.add_argument("--force", action="store_true", help="recompute finished runs and cached artifacts")
    return dict(model=model, runtime=runtime, profile=profile, force=force)


def _grid_parent() -> argparse.ArgumentParser:
    """One probing grid on one task (rank, probe)."""
    grid = _group()
    grid.add_argument("--task", required=True, help=f"{', '.join(task_names())}")
    grid.add_argument("--out", default="artifacts/runs", help="directory for constants, rankings and results.csv")
    grid.add_argument("--constants-corpus", default="task",
                      help="corpus for average constants: 'task' (its own training inputs, paper 4.1) or a task name")
    grid.add_argument("--constants-file", default=None, metavar="PATH",
                      help="average constants that `papa extract` wrote for this model, length and layout, instead of "
                           "the grid's own; runs over another corpus record it as their constants corpus")
    grid.add_argument("--rounding", default=None, choices=ROUNDINGS,
                      help="when a fraction is not a whole number of heads (default: the profile's)")
    grid.add_argument("--layout", default=None, choices=LAYOUTS,
                      help=f"input layout (default: the profile's, {REPRODUCTION_LAYOUT!r} = the authors' released "
                           "preprocessing; 'sep_last' = papa's own, see papa.method.layout)")
    grid.add_argument("--probe-inputs", default=None, choices=PROBE_INPUTS,
                      help=f"what the probe reads (default: {PAPER_PROBE_INPUTS!r}, the paper's, for encoders; "
                           f"{DECODER_PROBE_INPUTS!r} for causal LMs, whose un-normalised hidden states saturate the "
                           "paper's probe; see papa.probing.standardize)")
    grid.add_argument("--precision", default=DEFAULT_PRECISION, choices=PRECISIONS,
                      help=f"how the backbone computes (default: {DEFAULT_PRECISION}, the protocol's): tf32 = "
                           "TensorFloat-32 CUDA matmuls, bf16 = bfloat16 autocast of its forward passes (the probe "
                           "trains in float32), bf16_store = the backbone in float32 and its stored features kept "
                           "in bfloat16 (half the bytes), bf16_with_store = both; recorded in every row "
                           "(papa.method.precision)")
    grid.add_argument("--compile", action="store_true",
                      help="compile the backbone (torch.compile: one graph per head configuration); recorded in "
                           "every row as execution=compiled")
    grid.add_argument("--steps", default=DEFAULT_STEP_MODE, choices=STEP_MODES,
                      help=f"how each training step runs (default: {DEFAULT_STEP_MODE!r}, the reference): 'graphed' "
                           "replays a CUDA graph of the whole step (CUDA only), 'compiled' compiles it "
                           "(torch.compile, reduce-overhead); results equal eager's within float rounding; recorded "
                           "in a row's extra as steps=<mode> when not eager (papa.probing.step_modes)")
    grid.add_argument("--batch-order", default=DEFAULT_BATCH_ORDER, choices=BATCH_ORDERS,
                      help=f"{DEFAULT_BATCH_ORDER!r} (default, the protocol's): each seed shuffles the whole split "
                           "every epoch; 'blocks': the backbone runs over a block of examples once per epoch and "
                           "every seed trains on it, shuffling within it (for features that fit no store); 'chunks': "
                           "the split is stored once (on disk where it fits no memory) and read every epoch in "
                           "large sequential chunks in an order shared by the seeds, each seed shuffling within a "
                           "chunk (the backbone runs once per point). Both are a stated change of batch order, "
                           "recorded in every row")
    return grid


def _reproduction_parents() -> dict[str, argparse.ArgumentParser]:
    """The section notebooks' grids (reproduce, jobs), and how their jobs are spread out."""
    reproduction = _group()
    reproduction.add_argument("--notebooks", nargs="+", default=None, choices=NOTEBOOK_NAMES, metavar="NAME",
                              help=f"only these notebooks (default: all): {' '.join(NOTEBOOK_NAMES)}")
    reproduction.add_argument("--out", default=None,
                              help="default: artifacts/<profile>, or with --models/--tasks a folder named for them "
                                   "(artifacts/<profile>--<models>[--<tasks>])")
    reproduction.add_argument("--models", nargs="+", default=None, metavar="MODEL",
                              help="run the notebooks on these models instead of their own: hub ids, aliases or "
                                   "local folders, encoders or causal LMs (a notebook that takes one model takes one)")
    reproduction.add_argument("--tasks", nargs="+", default=None, metavar="TASK",
                              help=f"run the notebooks on these tasks instead of their own ({', '.join(task_names())})")

    scale_out = _group()
    scale_out.add_argument("--workers", type=_positive, default=1,
                           help="run the grid's jobs on N local processes first (with GPUs: one GPU each, round "
                                "robin)")
    scale_out.add_argument("--submitit", choices=SUBMITIT_CLUSTERS, default=None,
                           help="submit the jobs through submitit: to Slurm, or to its local executor")
    scale_out.add_argument("--slurm-partition", default=None, help="Slurm partition (--submitit slurm)")
    scale_out.add_argument("--slurm-time", type=_positive, default=120, help="minutes per job (default: 120)")
    scale_out.add_argument("--slurm-gpus", type=int, default=1, help="GPUs per job (default: 1)")
    scale_out.add_argument("--slurm-array-parallelism", type=_positive, default=32,
                           help="jobs running at once (default: 32)")
    return dict(reproduction=reproduction, scale_out=scale_out)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="papa",
        description="PAPA: replace a frozen encoder's attention with constant matrices and probe what is left "
                    "(Hassid et al., Findings of EMNLP 2022).",
    )
    from papa import __version__

    parser.add_argument("--version", action="version", version=f"papa {__version__}")
    # The option groups several subcommands share, each declared once (argparse parent parsers).
    shared = {**_run_parents(), "grid": _grid_parent(), **_reproduction_parents()}
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_extract(sub, shared)
    _add_grid_commands(sub, shared)
    _add_report(sub)
    _add_batch_commands(sub, shared)
    return parser


def _add_extract(sub: argparse._SubParsersAction, shared: dict[str, argparse.ArgumentParser]) -> None:
    """extract: average constants as a file."""
    p = sub.add_parser("extract", help="average every head's attention over an unlabeled corpus (paper 3.1)",
                       description="Average every head's attention over a corpus and save the constant matrices "
                                   "(safetensors with metadata).",
                       parents=[shared["model"], shared["runtime"]])
    p.add_argument("--task", required=True, help=f"a task name ({', '.join(task_names())}) or a .txt/.tsv file")
    p.add_argument("--split", default="train", choices=SPLITS, help="the task's split (default: train)")
    p.add_argument("--max-length", type=_positive, required=True, help="fixed sequence length N of the constants")
    p.add_argument("--out", default="artifacts/runs/constants",
                   help="output directory (default: artifacts/runs/constants, where `papa probe` and `papa rank` "
                        "with their default --out look for the same model, corpus, length and layout)")
    p.add_argument("--limit", type=_positive, default=None, help="use only the first LIMIT examples")
    p.add_argument("--batch-size", type=_positive, default=32)
    p.add_argument("--layout", default=None, choices=LAYOUTS,
                   help=f"input layout (default: {REPRODUCTION_LAYOUT}, the authors' released preprocessing, for "
                        f"encoders; {DECODER_LAYOUT} for decoders; sep_last: papa's own; see papa.method.layout)")
    p.add_argument("--text-column", default=None, help="TSV column holding the text")
    p.add_argument("--pair-column", default=None, help="TSV column holding the second text of a pair")
    p.set_defaults(func=_extract)


def _add_grid_commands(sub: argparse._SubParsersAction, shared: dict[str, argparse.ArgumentParser]) -> None:
    """rank and probe: one probing grid on one task."""
    grid_parents = [shared["model"], shared["runtime"], shared["profile"], shared["grid"], shared["force"]]
    p = sub.add_parser("rank", help="learn per-head λ and save the head ranking (paper 3.2)",
                       description="Train a probe and every head's λ jointly; save λ and the replacement order.",
                       parents=grid_parents)
    # No choices= for kinds and methods: the library's error names the known ones in the CLI's one-line format.
    p.add_argument("--constants", default="average", help="constants to mix with (default: average)")
    p.add_argument("--seed", "--rank-seed", dest="rank_seed", type=int, default=0, metavar="S",
                   help="the seed λ learns with (default 0, the grid's ranking; another seed's is saved apart and read "
                        "by the selection lambda@seed<S>)")
    p.add_argument("--part", type=int, default=0, metavar="K",
                   help="learn λ on the K-th training subset disjoint from the profile's (default 0: the profile's "
                        "own; a profile that trains on the whole split, such as full, draws its two halves, K = 1 "
                        "or 2); read by the selection lambda@part<K>")
    p.set_defaults(func=_rank)

    p = sub.add_parser("probe", help="probe one task over fractions x seeds x constants x selection methods",
                       description="Run (or resume) a probing grid on one task and print mean and 95%% interval.",
                       parents=grid_parents)
    p.add_argument("--constants", nargs="+", default=["average"], help=" ".join(CONSTANTS_KINDS))
    p.add_argument("--selection", nargs="+", default=["lambda"],
                   help=f"{' '.join(SELECTION_METHODS)}; another draw of an order as <method>@<variant>: "
                        "lambda@seed1, lambda@part2, lambda@full (the ranking the full profile learned), random@3")
    p.add_argument("--fractions", nargs="+", default=None,
                   help="shares of input-dependent heads, e.g. 1 1/2 0 (default: the profile's)")
    p.add_argument("--seeds", nargs="+", type=int, default=None, help="probe seeds (default: the profile's)")
    p.set_defaults(func=_probe)


def _add_report(sub: argparse._SubParsersAction) -> None:
    """report: a results table aggregated, or two settings compared."""
    p = sub.add_parser("report", help="aggregate a results table: mean and 95%% interval over seeds")
    p.add_argument("--results", default="artifacts/runs/results.csv", help="results.csv written by probe/reproduce")
    p.add_argument("--out", default=None, help="also write the aggregate as CSV here")
    p.add_argument("--model", nargs="+", default=None, help="only these models (hub id or its last part)")
    p.add_argument("--task", nargs="+", default=None, help="only these tasks")
    p.add_argument("--profile", nargs="+", default=None, help="only these profiles")
    p.add_argument("--compare", nargs=3, metavar=("COLUMN", "REFERENCE", "OTHER"), default=None,
                   help="instead of the aggregate: OTHER - REFERENCE of COLUMN (layout, constants, selection, "
                        "fraction_label, ...) paired by seed for every setting run with both, with its 95%% interval "
                        "(the evaluation examples resampled where predictions are stored) and the smallest "
                        "difference it could detect, e.g. --compare layout official sep_last")
    p.set_defaults(func=_report)


def _add_batch_commands(sub: argparse._SubParsersAction, shared: dict[str, argparse.ArgumentParser]) -> None:
    """reproduce and jobs: the section notebooks' grids."""
    p = sub.add_parser("reproduce", help="run the section notebooks with papermill (every paper section, and decoders)",
                       description="Execute notebooks/01_method … 08_decoders for a profile (its seeds and "
                                   "fractions); finished pieces (constants, rankings, runs) are reused, --force "
                                   "recomputes them.",
                       parents=[shared["profile"], shared["reproduction"], shared["runtime"], shared["force"],
                                shared["scale_out"]])
    p.set_defaults(func=_reproduce)

    p = sub.add_parser("jobs", help="the reproduction's probe runs as jobs: list them, or run some alone",
                       description="List the jobs (id, done/todo, key) that the section notebooks run for a profile, "
                                   "or run chosen jobs (e.g. one that failed) here, on a pool or through submitit.",
                       parents=[shared["profile"], shared["reproduction"], shared["runtime"], shared["scale_out"]])
    p.add_argument("action", choices=JOB_ACTIONS)
    p.add_argument("ids", nargs="*", help="run: the ids (or keys) of the jobs to run")
    p.set_defaults(func=_jobs)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse's parser, with its errors on one line like papa's own (no usage block above them)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# What an interrupted command leaves, said instead of a KeyboardInterrupt traceback.
_INTERRUPTED = {
    "extract": "nothing was written (constants are saved whole, at the end); run the same command again",
    "rank": "λ learning saved where it stopped (in <out>/checkpoints), nothing half-written is left; run the same "
            "command again to resume it",
    "probe": "finished runs are kept in the results table, nothing half-written is left; run the same command again "
             "to resume",
    "reproduce": "finished constants, rankings and runs are kept, nothing half-written is left; run the same command "
                 "again to resume",
    "jobs": "finished jobs are kept, nothing half-written is left; run the same command again to resume",
    "report": "nothing was written",
}


def _fresh_line() -> None:
    """Close the progress bars still drawn, so that what is printed next starts on a line of its own."""
    tqdm_module = sys.modules.get("tqdm.std")
    if tqdm_module is None:
        return
    for bar in list(getattr(tqdm_module.tqdm, "_instances", ())):
        try:
            bar.close()
        except Exception:  # noqa: BLE001 -- a bar that cannot close must not hide the message
            pass


def _say(args: argparse.Namespace, kind: str, message: str) -> None:
    _fresh_line()
    # One line, whatever the message holds (library messages may span lines).
    print(f"papa {args.command}: {kind}: {' '.join(str(message).split())}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and getattr(args, "command", None) == "jobs" and not any(e.startswith("-") for e in extra):
        args.ids = [*args.ids, *extra]  # `papa jobs run --profile cpu ID ...`: ids after the options
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.command_line = " ".join(["papa", *(sys.argv[1:] if argv is None else argv)])  # as typed, for run records
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    from papa.core.errors import PapaError

    transformers_logger = logging.getLogger("transformers")
    level = transformers_logger.level
    with warnings.catch_warnings():
        if getattr(args, "quiet", False):  # --quiet: no progress and no warnings; errors still say what went wrong
            warnings.simplefilter("ignore")
            transformers_logger.setLevel(logging.ERROR)
        try:
            from papa.runs.context import check_run_context, command_context

            context = command_context(args)
            if context is not None:  # once, at the edge: before any data or model is read
                check_run_context(context)
            return args.func(args)
        except (PapaError, FileNotFoundError, ValueError) as exc:
            # the library's advice names its arguments (rounding='down'); here it names the flags (--rounding down)
            _say(args, "error", exc.cli_message() if isinstance(exc, PapaError) else exc)
            return 2
        except KeyboardInterrupt:
            _say(args, "interrupted", _INTERRUPTED.get(args.command, "run the same command again"))
            return 130
        except BrokenPipeError:  # `papa report ... | head`: the reader has what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
            return 0
        except OSError as exc:  # a disk that fills up, a file that vanishes: not the input, so exit code 1
            _say(args, "error", f"{exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}")
            return 1
        except Exception as exc:
            if os.environ.get("PAPA_DEBUG"):
                raise
            _say(args, "error", f"internal error ({type(exc).__name__}: {exc}); this is a bug in papa: please report "
                                "it with the command, and run it again with PAPA_DEBUG=1 for the traceback")
            return 1
        finally:
            transformers_logger.setLevel(level)


if __name__ == "__main__":
    sys.exit(main())

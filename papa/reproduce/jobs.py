"""The reproduction as a list of independent jobs, run in this process, on a pool of workers, or through submitit.

A `Job` is one probe run, with a stable `key` and `id`; the jobs are read off the notebooks' grid declarations
without executing them. They run in two waves of units (`plan_units`): preparation (constants and λ rankings, so
that no two workers compute the same artifact), then points (a point's seeds share its features). A job is finished
when ``results.csv`` holds its row; a failed unit does not stop the others.
"""
from __future__ import annotations

import hashlib
import os
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path

from papa.core.errors import InputError
from papa.core.run_folder import RunFolder
from papa.core.settings import Resources
from papa.core.vocabulary import DEFAULT_DTYPE, NONE, NOTEBOOKS, PAPER_PROBE_INPUTS, RANKED
from papa.reproduce.batch import Batch


@dataclass(frozen=True, order=True)
class Job:
    """One probe run of the reproduction, as recorded in the results table."""

    model: str
    task: str
    constants: str          # "none" at fraction 1 (nothing replaced)
    constants_corpus: str   # "task", another task's name, or "none" (fraction 1, data-free kinds)
    selection: str          # "none" at fractions 1 and 0
    fraction: str           # label: "1", "1/2", ..., "0"
    seed: int
    profile: str
    layout: str             # input layout (papa.method.layout)
    probe_inputs: str = PAPER_PROBE_INPUTS   # raw or standardized (papa.probing.standardize)
    #: where the model loads from when that is not its recorded name (a local folder; `model` is the folder's name)
    source: str = field(default="", compare=False)

    @property
    def key(self) -> str:
        values = asdict(self)
        del values["source"]  # what ran, not where the model lay
        return "|".join(str(v) for v in values.values())

    @property
    def id(self) -> str:
        return hashlib.sha256(self.key.encode("utf-8")).hexdigest()[:10]

    @property
    def point(self) -> tuple:
        """What the jobs of one unit share: everything but the seed."""
        return (self.model, self.task, self.constants, self.constants_corpus, self.selection, self.fraction,
                self.profile, self.layout, self.probe_inputs)


def grid_jobs(cfg) -> list[Job]:
    """The jobs of one `papa.runs.experiment.GridConfig`, recorded as the grid runner records its rows."""
    from papa.method.models import canonical_model_name, local_head_count
    from papa.runs.keys import point_key

    cfg = cfg.resolved()
    model = canonical_model_name(cfg.model)
    total_heads = local_head_count(cfg.model)  # what the fractions resolve to, as the runner resolves them
    jobs: dict[str, Job] = {}  # all heads kept is one job whatever the kinds and methods, none kept one per kind
    for kind in cfg.constants:
        for method in cfg.selections:
            for label in cfg.fractions:
                key = point_key(kind, method, cfg.constants_corpus, label, total_heads=total_heads,
                                rounding=cfg.rounding)
                for seed in cfg.seeds:
                    job = Job(model, cfg.task, key.constants, key.constants_corpus, key.selection, label, seed,
                              cfg.profile, cfg.layout, cfg.probe_inputs,
                              source="" if model == cfg.model else cfg.model)
                    jobs.setdefault(job.key, job)
    return list(jobs.values())


# ---- what the notebooks run --------------------------------------------------------------------------------------

def batch_jobs(batch: Batch) -> list[Job]:
    """Every job the section notebooks of `batch` run, without duplicates, in a stable order."""
    from papa.reproduce.notebooks import injected_parameters, named_notebook, notebook_grids
    from papa.runs.profiles import get_profile

    # Resolved once: a profile file is read here, and the output folder stays the batch's own.
    prof = get_profile(batch.profile)
    listed = replace(batch, profile=prof.name, out_dir=batch.out)
    jobs: dict[str, Job] = {}
    for name in batch.names:
        params = injected_parameters(name, listed, prof)
        with named_notebook(name, batch.names, batch.with_models or batch.with_tasks):
            for cfg in notebook_grids(name, params, notebook_dir=batch.notebook_dir):
                jobs.update((j.key, j) for j in grid_jobs(cfg))
    return list(jobs.values())


def notebook_jobs(profile: str, names: Sequence[str] = NOTEBOOKS, *, folder: RunFolder | str | None = None,
                  resources: Resources = Resources(), with_models: Sequence[str] | None = None,
                  with_tasks: Sequence[str] | None = None) -> list[Job]:
    """`batch_jobs` of the batch these arguments name."""
    return batch_jobs(Batch(profile, names, out_dir=None if folder is None else str(folder),
                            data_dir=resources.data_dir, device=resources.device, with_models=with_models,
                            with_tasks=with_tasks))


# ---- status ------------------------------------------------------------------------------------------------------

def finished(jobs: Iterable[Job], folder: RunFolder) -> set[str]:
    """Keys of the `jobs` whose row is in the run folder's ``results.csv``."""
    from papa.runs.results import ResultsTable

    path = folder.results
    if not path.is_file():
        return set()
    df = ResultsTable(path).read()
    df = df[df["dtype"] == DEFAULT_DTYPE]  # the reproduction runs in float32; rows of `papa probe --dtype` are others
    done = {Job(r.model, r.task, r.constants, r.constants_corpus, r.selection, r.fraction_label, int(r.seed),
                r.profile, r.layout, r.probe_inputs).key for r in df.itertuples()}
    return {j.key for j in jobs if j.key in done}


def done_runs(batch: Batch) -> dict[str, tuple[int, int]]:
    """Per notebook of `batch` that runs a grid: (its probe runs already in ``results.csv``, all its probe runs);
    empty when there are no results yet."""
    if not batch.out.results.is_file():
        return {}
    jobs = {name: batch_jobs(replace(batch, names=(name,))) for name in batch.names}
    done = finished([job for listed in jobs.values() for job in listed], batch.out)  # results.csv read once
    return {name: (sum(job.key in done for job in listed), len(listed)) for name, listed in jobs.items() if listed}


def select(jobs: Sequence[Job], wanted: Iterable[str]) -> list[Job]:
    """The jobs whose id or key is in `wanted`; an unknown one is an error that says how to list them."""
    by_name = {**{j.id: j for j in jobs}, **{j.key: j for j in jobs}}
    wanted = list(wanted)
    unknown = [w for w in wanted if w not in by_name]
    if unknown:
        raise InputError(f"no job {', '.join(unknown)} in this reproduction: `papa jobs list --profile P` lists the "
                         "ids and keys")
    return list({by_name[w].key: by_name[w] for w in wanted}.values())


# ---- units -------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Unit:
    """What one worker runs: a preparation step (constants, λ ranking) or the seeds of one point."""

    kind: str                    # "prepare" or "point"
    jobs: tuple[Job, ...]
    folder: str                  # the run folder, as a path (what a worker elsewhere is given)
    resources: Resources = Resources()
    ranking: bool = False        # prepare: learn the λ ranking too (else only the constants)
    profile: object = None       # the jobs' Profile, so that workers know profiles read from files

    @property
    def name(self) -> str:
        j = self.jobs[0]
        what = (f"prepare {j.constants}@{j.constants_corpus}" + (" + λ ranking" if self.ranking else "")
                if self.kind == "prepare" else f"{j.constants}/{j.selection} {j.fraction} seeds "
                                               f"{','.join(str(x.seed) for x in self.jobs)}")
        return f"{j.model.split('/')[-1]} {j.task} {what}"

    def grid(self):
        """The one-point `GridConfig` that computes this unit."""
        from papa.runs.experiment import GridConfig

        j = self.jobs[0]
        return GridConfig(task=j.task, model=j.source or j.model, profile=j.profile, folder=self.folder,
                          data_dir=self.resources.data_dir, device=self.resources.device,
                          constants=("average" if j.constants == NONE else j.constants,),
                          selections=(j.selection if j.selection != NONE else "lambda",),
                          fractions=(j.fraction,), seeds=tuple(x.seed for x in self.jobs), layout=j.layout,
                          probe_inputs=j.probe_inputs,
                          constants_corpus="task" if j.constants_corpus == NONE else j.constants_corpus)


def plan_units(jobs: Sequence[Job], folder: RunFolder, resources: Resources = Resources()
               ) -> tuple[list[Unit], list[Unit]]:
    """(preparation units, point units) for the jobs not yet finished in the run folder `folder`, each run with
    `resources`' data and device."""
    from papa.runs.profiles import get_profile

    done = finished(jobs, folder)
    todo = [j for j in jobs if j.key not in done]
    common = dict(folder=str(folder), resources=resources)
    points: dict[tuple, list[Job]] = {}
    for j in todo:
        points.setdefault(j.point, []).append(j)
    profiles = {name: get_profile(name) for name in {j.profile for j in todo}}  # each resolved once
    prepare: dict[tuple, Unit] = {}
    for group in points.values():
        j = group[0]
        ranked = _ranked(j)
        if not (ranked or j.constants.removeprefix("trainable_") == "average"):
            continue  # nothing to prepare: no constants to extract, no ranking to learn
        previous = prepare.get(_preparation(j))
        if previous is None or (ranked and not previous.ranking):  # the unit carries a job that is ranked
            prepare[_preparation(j)] = Unit("prepare", (j,), ranking=ranked, profile=profiles[j.profile], **common)
    return list(prepare.values()), [Unit("point", tuple(g), profile=profiles[g[0].profile], **common)
                                    for g in points.values()]


def _ranked(job: Job) -> bool:
    """Whether the job's selection reads a λ ranking."""
    from papa.method.selection import selection_method

    return job.selection != NONE and selection_method(job.selection) in RANKED


def _preparation(job: Job) -> tuple:
    """What jobs that share a preparation (constants, and λ ranking per draw) have in common."""
    from papa.method.selection import parse_selection

    draw = parse_selection(job.selection) if _ranked(job) else None
    return (job.model, job.task, job.constants_corpus, job.constants.removeprefix("trainable_"), job.profile,
            job.layout, job.probe_inputs, None if draw is None else (draw.seed, draw.part, draw.profile))


def run_unit(unit: Unit) -> list[str]:
    """Compute one unit in this process; returns the ids of its jobs."""
    from papa.method.selection import parse_selection
    from papa.runs.experiment import run_grid
    from papa.runs.lambda_ranking import learn_ranking
    from papa.runs.session import task_constants
    from papa.runs.profiles import register_profile

    if unit.profile is not None:
        register_profile(unit.profile)
    cfg = unit.grid()
    if unit.kind == "prepare":
        draw = parse_selection(cfg.selections[0])
        if unit.ranking and draw.profile is None:  # another profile's ranking is read, never learned by a grid
            learn_ranking(cfg, kind=cfg.constants[0], seed=draw.seed, part=draw.part, progress=False)
        else:
            task_constants(cfg, progress=False)
    else:
        run_grid(cfg, progress=False)
    return [j.id for j in unit.jobs]


# ---- executors ---------------------------------------------------------------------------------------------------

@dataclass
class Report:
    """What a batch of units did: finished units, and failed ones with their error."""

    done: list[Unit] = field(default_factory=list)
    failed: list[tuple[Unit, str]] = field(default_factory=list)

    def failed_jobs(self) -> list[Job]:
        return [j for unit, _ in self.failed for j in unit.jobs]

    def summary(self) -> str:
        lines = [f"{len(self.done)} unit(s) done, {len(self.failed)} failed"]
        for unit, error in self.failed:
            lines.append(f"FAILED {unit.name}: {error.strip().splitlines()[-1] if error.strip() else 'error'}")
            lines += [f"  job {j.id}  {j.key}" for j in unit.jobs]
        if self.failed:
            lines.append("re-run one alone with `papa jobs run ID --profile P` (the error's traceback is in "
                         "<out>/jobs/failed.log)")
        return "\n".join(lines)


def _guarded(unit: Unit) -> tuple[bool, str]:
    try:
        run_unit(unit)
        return True, ""
    except Exception:  # a failed unit is reported; the others go on
        return False, traceback.format_exc()


def _init_worker(slots, threads: int, gpus: list[str]) -> None:
    """Give a pool worker its share of the CPU threads and, with GPUs, one GPU of its own (round robin)."""
    index = slots.get()
    if gpus:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpus[index % len(gpus)]
    import torch

    torch.set_num_threads(threads)


def run_units(units: Sequence[Unit], *, workers: int = 1, executor=None, progress: bool = True) -> Report:
    """Run `units` here (workers=1), on `workers` local processes, or through a submitit `executor`."""
    from papa.core.progress import tqdm

    report = Report()
    bar = tqdm(total=len(units), desc="jobs", unit="unit", disable=not progress or not units)

    def finish(unit: Unit, result: Callable[[], tuple[bool, str]]) -> None:
        try:
            ok, error = result()
        except Exception:  # the cluster job (time limit, node failure) or the worker process died
            ok, error = False, traceback.format_exc()
        (report.done.append(unit) if ok else report.failed.append((unit, error)))
        bar.update(1)

    if not units:
        return report
    if executor is not None:
        for unit, job in zip(units, executor.map_array(_guarded, list(units))):
            finish(unit, job.result)
    elif workers <= 1:
        for unit in units:
            finish(unit, partial(_guarded, unit))
    else:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor, as_completed

        ctx = mp.get_context("spawn")  # fresh interpreters: no inherited CUDA or thread state
        slots = ctx.Manager().Queue()
        for i in range(workers):
            slots.put(i)
        threads = max(1, (os.cpu_count() or 1) // workers)
        with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker,
                                 initargs=(slots, threads, _gpu_ids())) as pool:
            futures = {pool.submit(_guarded, unit): unit for unit in units}
            for future in as_completed(futures):
                finish(futures[future], future.result)
    bar.close()
    return report


def _gpu_ids() -> list[str]:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [g for g in visible.split(",") if g.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def run_jobs(jobs: Sequence[Job], folder: RunFolder, resources: Resources = Resources(), *,
             workers: int = 1, executor=None) -> Report:
    """Run the unfinished `jobs` into the run folder `folder`, preparation first; failures are collected, not
    raised."""
    progress = resources.progress
    prepare, points = plan_units(jobs, folder, resources)
    report = run_units(prepare, workers=workers, executor=executor, progress=progress)
    # A point whose preparation failed would fail the same way: it waits for a re-run.
    broken = {_preparation(u.jobs[0]) for u, _ in report.failed}
    runnable = [u for u in points if _preparation(u.jobs[0]) not in broken]
    second = run_units(runnable, workers=workers, executor=executor, progress=progress)
    report.done += second.done
    report.failed += second.failed
    if report.failed:
        from papa.core.artifacts import atomic_path

        log = folder.jobs / "failed.log"
        with atomic_path(log) as tmp:
            Path(tmp).write_text("\n\n".join(f"# {u.name}\n# jobs: {' '.join(j.id for j in u.jobs)}\n{error}"
                                             for u, error in report.failed), encoding="utf-8")
    return report


def submitit_executor(folder: str | Path, cluster: str | None = None, **parameters):
    """A submitit executor logging under `folder` (Slurm, or "local"); `parameters` go to ``update_parameters``."""
    import submitit

    executor = submitit.AutoExecutor(folder=str(folder), cluster=cluster)
    if parameters:
        executor.update_parameters(**parameters)
    return executor

"""Each section's grids, declared as data: which models and tasks a notebook probes, with which constants kinds,
selection methods, fractions, constants corpus and probe inputs.

A section notebook calls its declaration (`main_results`, `alternative_matrices`, ...) with its parameters and runs
what it declares with `run`; the job lister (`papa.reproduce.jobs.notebook_jobs`) calls the same declaration
(`section_grids`) and lists the jobs of its `Grids.configs` without running any notebook. So the declarations below
are the one place that says what each section runs.

Every grid goes through `papa.runs.experiment.run_grid`, so every section shares one results table
(``<out>/results.csv``) and one cache of constants and rankings: a point computed for Fig. 2 is reused by Table 1
and Fig. 5.
"""
from __future__ import annotations

import inspect
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from papa.core.errors import check_one_of
from papa.core.run_folder import RunFolder
from papa.core.settings import RunSettings
from papa.core.vocabulary import PAPER_FRACTIONS, RANKED
from papa.runs.experiment import GridConfig, run_grid
from papa.runs.results import aggregate

#: What a declared grid runs: the probing grid itself, or the profile's learning curves (the original-attention
#: probe at each training size the profile gives a task, fraction 1).
RUNNERS = ("grid", "curves")
_CURVE_COLUMNS = ["model", "task", "metric", "train_examples", "n", "mean", "ci95"]
_CURVE_DTYPES = {"train_examples": "int64", "n": "int64", "mean": "float64", "ci95": "float64"}


@dataclass(frozen=True)
class Grids:
    """One grid per model and task, all with the same options (None: the profile's fractions; each model's default
    probe inputs); `runner` "curves" runs the profile's learning curves of these models and tasks instead."""

    models: tuple[str, ...]
    tasks: tuple[str, ...]
    fractions: tuple[str, ...] | None = None
    constants: tuple[str, ...] = ("average",)
    selections: tuple[str, ...] = ("lambda",)
    constants_corpus: str = "task"
    probe_inputs: str | None = None
    runner: str = "grid"

    def __post_init__(self) -> None:
        if not self.models or not self.tasks:
            raise ValueError("give at least one model and one task")
        check_one_of(self.runner, RUNNERS, "runner")

    def configs(self, settings: RunSettings) -> list[GridConfig]:
        """The `GridConfig` of each grid under `settings`, in the order `run` runs them: per model and task; for curves
        per task, training size and model, each under its curve point's profile
        (`papa.runs.profiles.Profile.curve_profile`)."""
        common = settings.config_options()
        profile = common.pop("profile")
        if self.runner == "curves":
            from papa.runs.profiles import get_profile

            prof = get_profile(profile)
            return [GridConfig(task=task, model=model, profile=prof.curve_profile(task, size).name, fractions=("1",),
                               **common)
                    for task in self.tasks for size in prof.curve_sizes(task) for model in self.models]
        return [GridConfig(task=task, model=model, profile=profile, fractions=self.fractions,
                           constants=self.constants, selections=self.selections,
                           constants_corpus=self.constants_corpus, probe_inputs=self.probe_inputs, **common)
                for model in self.models for task in self.tasks]


def _grids(models: Sequence[str] | str, tasks: Sequence[str], **options) -> Grids:
    """`Grids` from a notebook's parameters: one model or a list, lists as tuples."""
    models = (models,) if isinstance(models, str) else tuple(models)
    options = {k: tuple(v) if isinstance(v, list) else v for k, v in options.items()}
    return Grids(models, tuple(tasks), **options)


def task_available(task: str, data_dir: str | None = None) -> bool:
    """Whether `task`'s training file is in the local data directory (always True on the hub path)."""
    from papa.tasks.data import resolve_data_dir
    from papa.tasks.registry import get_task

    root = resolve_data_dir(data_dir)
    return root is None or (root / get_task(task).local.train_file).is_file()


def available_corpus(preferred: str = "mnli", fallback: str = "mlm", data_dir: str | None = None) -> str:
    """The corpus for Table 2's "constants from another corpus": `preferred` (MNLI, as the paper) when its data is
    available, else `fallback` (WikiText, the MLM task's unlabeled text)."""
    return preferred if task_available(preferred, data_dir) else fallback


# ---- the sections' declarations (one per notebook that runs grids) -------------------------------------------------

def order_draws(method: str, variants: Sequence[str]) -> list[str]:
    """The selections that draw `method`'s order again, one per variant (``lambda``, ["part1", "seed1"] ->
    ["lambda@part1", "lambda@seed1"]; `papa.method.selection.parse_selection` says which variants exist)."""
    from papa.method.selection import parse_selection

    return [parse_selection(f"{method}@{v}").name for v in variants]


def main_results(models: Sequence[str], tasks: Sequence[str], ranking_draws: Sequence[str] = (),
                 other_rankings: Sequence[str] = (), folder: RunFolder | str | os.PathLike | None = None
                 ) -> dict[str, Grids]:
    """Fig. 2 and 3 (notebook 02): λ-selected average constants at the profile's fractions, and the profile's
    learning curves of the original-attention probe; with `ranking_draws` (e.g. ["part1", "part2", "seed1"]) the λ
    rankings of those draws at 1/2 too, so that Fig. 2's "no major drop" holds the ranking's own variance; with
    `other_rankings` (e.g. ["full"]) the rankings those profiles learned, at 1/2, on the tasks where they are saved
    under `folder` (`learned_grids`)."""
    declared = {"results": _grids(models, tasks), "sizes": _grids(models, tasks, runner="curves")}
    if ranking_draws:
        declared["draws"] = _grids(models, tasks, fractions=["1/2"], selections=order_draws("lambda", ranking_draws))
    return {**declared, **learned_grids(["lambda"], models, tasks, other_rankings, folder, fractions=["1/2"],
                                        draws=ranking_draws)}


def alternative_matrices(models: Sequence[str], tasks: Sequence[str], kinds: Sequence[str]) -> dict[str, Grids]:
    """Table 1 (notebook 04): every constants kind with all heads replaced, beside the original model."""
    return {"results": _grids(models, tasks, fractions=["1", "0"], constants=list(kinds))}


def data_dependence(models: Sequence[str], tasks: Sequence[str], other_corpus: str | None = None,
                    data_dir: str | None = None) -> dict[str, Grids]:
    """Table 2 (notebook 05): every head replaced by average constants of the task's own data ("own") and of another
    corpus ("other": `other_corpus`, None = MNLI where its data is, else WikiText)."""
    corpus = other_corpus or available_corpus(data_dir=data_dir)
    return {"own": _grids(models, tasks, fractions=["0"]),
            "other": _grids(models, tasks, fractions=["0"], constants_corpus=corpus)}


def head_selection(models: Sequence[str], tasks: Sequence[str], methods: Sequence[str],
                   ranking_draws: Sequence[str] = (), random_draws: int = 0, other_rankings: Sequence[str] = (),
                   folder: RunFolder | str | os.PathLike | None = None) -> dict[str, Grids]:
    """Fig. 5 (notebook 06): the profile's fractions under each head-selection method; with `ranking_draws` the
    ranked methods under those other λ rankings too, with `random_draws` that many more random permutations
    (random@1, ...): the draws Fig. 5's claim averages over (`papa.paper.claims`). With `other_rankings`, the ranked
    methods under the rankings those profiles learned (e.g. ["full"]: λ at the paper's step count, hours of λ
    learning of its own), on the tasks where they are saved under `folder` (`learned_grids`)."""
    declared = {"results": _grids(models, tasks, selections=list(methods))}
    draws = methods_drawn_again(methods, ranking_draws, random_draws)
    if draws:
        declared["draws"] = _grids(models, tasks, fractions=_mid_fractions(), selections=draws)
    ranked = [m for m in methods if m in RANKED]
    return {**declared, **learned_grids(ranked, models, tasks, other_rankings, folder, fractions=_mid_fractions(),
                                        draws=ranking_draws)}


def methods_drawn_again(methods: Sequence[str], ranking_draws: Sequence[str], random_draws: int) -> list[str]:
    """The selections that draw `methods`' orders again: each ranked method under each of `ranking_draws`, and
    `random_draws` more random permutations where "random" is among them."""
    ranked = [m for m in methods if m in RANKED]
    return [*(d for m in ranked for d in order_draws(m, ranking_draws)),
            *(order_draws("random", [str(k) for k in range(1, random_draws + 1)]) if "random" in methods else [])]


def saved_ranking_path(folder: RunFolder | str | os.PathLike, model: str, task: str, profile: str, *, seed: int = 0,
                       part: int = 0) -> Path:
    """Where the λ ranking `profile` learns for `model` and `task` lies under `folder` (a reproduction's: average
    constants of the task's own data, the reproduction's layout, the model's default probe inputs), λ learned with
    `seed` on training part `part`."""
    from papa.core.vocabulary import DECODER_LAYOUT, REPRODUCTION_LAYOUT
    from papa.method.models import canonical_model_name, is_causal_model
    from papa.probing.standardize import probe_inputs_for
    from papa.runs.names import RankingName
    from papa.tasks.registry import get_task

    causal = bool(is_causal_model(model))
    name = RankingName(canonical_model_name(model), task, "average", "task", get_task(task).hparams.max_length,
                       profile, DECODER_LAYOUT if causal else REPRODUCTION_LAYOUT,
                       probe_inputs=probe_inputs_for(causal, None), seed=seed, part=part)
    return RunFolder.at(folder).rankings / name.filename


def learned_rankings(profiles: Sequence[str], models: Sequence[str], tasks: Sequence[str],
                     folder: RunFolder | str | os.PathLike) -> dict[str, tuple[str, ...]]:
    """Each of `profiles` that has saved a λ ranking under `folder` (`saved_ranking_path`) for every model of some
    of `tasks`, with those tasks: another profile's ranking is read by a grid, never learned by it (`papa rank
    --profile <name> --task <task>` learns it, a task at a time)."""
    folder = RunFolder.at(folder)
    saved = {p: tuple(t for t in tasks if all(saved_ranking_path(folder, m, t, p).is_file() for m in models))
             for p in profiles}
    return {p: found for p, found in saved.items() if found}


#: The key a section's declaration gives the grid of another profile's λ ranking: ``ranking@full``.
LEARNED_PREFIX = "ranking@"


def learned_grids(methods: Sequence[str], models: Sequence[str], tasks: Sequence[str], profiles: Sequence[str],
                  folder: RunFolder | str | os.PathLike | None, fractions: Sequence[str], draws: Sequence[str] = ()
                  ) -> dict[str, Grids]:
    """The ranked `methods` under the λ rankings `profiles` learned, at `fractions`: one grid per profile, over the
    tasks where its ranking is saved (`learned_rankings`), with each of that profile's other `draws` (e.g. "part1":
    ``lambda@full-part1``) saved for all of them, so that its parts average over every order it drew; none without
    `folder` or a ranked method."""
    if folder is None or not methods:
        return {}
    folder = RunFolder.at(folder)
    return {LEARNED_PREFIX + p: _grids(models, saved, fractions=list(fractions),
                                       selections=[d for m in methods
                                                   for d in order_draws(m, _saved_draws(p, draws, models, saved,
                                                                                        folder))])
            for p, saved in learned_rankings(profiles, models, tasks, folder).items()}


def _saved_draws(profile: str, draws: Sequence[str], models: Sequence[str], tasks: Sequence[str],
                 folder: RunFolder | str | os.PathLike) -> list[str]:
    """`profile`'s variant and those of its `draws` whose rankings are saved for every model and task (``full``,
    ``full-part1``, ...)."""
    from papa.method.selection import parse_selection

    folder = RunFolder.at(folder)
    found = [profile]
    for draw in draws:
        selection = parse_selection(f"lambda@{profile}-{draw}")
        if all(saved_ranking_path(folder, m, t, profile, seed=selection.seed, part=selection.part).is_file()
               for m in models for t in tasks):
            found.append(f"{profile}-{draw}")
    return found


def draws_an_order(key: str) -> bool:
    """Whether a declaration's grid `key` draws a head order again: the profile's own other draws ("draws") or
    another profile's ranking (`learned_grids`)."""
    return key == "draws" or key.startswith(("draws_", LEARNED_PREFIX))


def run_orders(declared: Mapping[str, Grids], settings: RunSettings) -> pd.DataFrame | None:
    """Run (`run`, under `settings`) every grid of `declared` that draws a head order again (`draws_an_order`);
    their rows together, None where it declares none."""
    drawn = [g for key, g in declared.items() if draws_an_order(key)]
    return pd.concat([run(g, settings) for g in drawn], ignore_index=True) if drawn else None


def _mid_fractions() -> list[str]:
    """The paper's fractions strictly between all heads and none: where an order matters."""
    return [f for f in PAPER_FRACTIONS if f not in ("1", "0")]


def mlm_electra(models: Sequence[str], downstream_task: str) -> dict[str, Grids]:
    """Fig. 6 (notebook 07): the MLM objective beside one downstream task."""
    return {"results": _grids(models, ["mlm", downstream_task])}


def decoders(model: str, tasks: Sequence[str], selections: Sequence[str], probe_inputs: str | None = None,
             ranking_draws: Sequence[str] = (), random_draws: int = 0) -> dict[str, Grids]:
    """Notebook 08: a causal LM's own LM objective under each selection method ("lm"), the LM objective scored by a
    probe trained from scratch with every head input-dependent or none ("lm_probe": the paper's MLM probe, Fig. 6),
    that probe's learning curve where the profile draws one ("lm_probe_sizes": how many paragraphs it needs), and
    downstream probes ("probes", with `probe_inputs`: None = the decoder's default, standardized). With
    `ranking_draws` and `random_draws` the orders drawn again, as the encoders' sections draw them: the LM objective
    under each at the fractions where an order matters ("draws_lm", Fig. 5), the probes under the λ draws at 1/2
    ("draws", Fig. 2)."""
    declared = {"lm": _grids(model, ["lm"], selections=list(selections)),
                "lm_probe": _grids(model, ["lm_probe"], fractions=["1", "0"], probe_inputs=probe_inputs),
                "lm_probe_sizes": _grids(model, ["lm_probe"], runner="curves"),
                "probes": _grids(model, tasks, probe_inputs=probe_inputs)}
    lm_draws = methods_drawn_again(selections, ranking_draws, random_draws)
    if lm_draws:
        declared["draws_lm"] = _grids(model, ["lm"], fractions=_mid_fractions(), selections=lm_draws)
    if ranking_draws:
        declared["draws"] = _grids(model, tasks, fractions=["1/2"], selections=order_draws("lambda", ranking_draws),
                                   probe_inputs=probe_inputs)
    return declared


#: Notebook name -> its declaration; notebooks 01 and 03 run no grid (they extract one task's constants).
SECTION_GRIDS: dict[str, Callable[..., dict[str, Grids]]] = {
    "02_main_results": main_results,
    "04_alternative_matrices": alternative_matrices,
    "05_data_dependence": data_dependence,
    "06_head_selection": head_selection,
    "07_mlm_electra": mlm_electra,
    "08_decoders": decoders,
}


#: A notebook parameter that the declarations take under another name: the notebook's ``out_dir`` is their `folder`.
_ARGUMENTS = {"out_dir": "folder"}


def section_grids(name: str, parameters: Mapping[str, object]) -> dict[str, Grids]:
    """What notebook `name` runs with `parameters` (its parameter cell's names and values): its declaration called
    with the parameters it takes (the notebook's ``out_dir`` as its `folder`); a notebook without grids declares
    none."""
    declare = SECTION_GRIDS.get(name)
    if declare is None:
        return {}
    parameters = {_ARGUMENTS.get(p, p): value for p, value in parameters.items()}
    wanted = inspect.signature(declare).parameters
    missing = [p for p, v in wanted.items() if v.default is inspect.Parameter.empty and p not in parameters]
    if missing:
        raise ValueError(f"notebook {name}'s grids need the parameters {', '.join(missing)}")
    return declare(**{p: parameters[p] for p in wanted if p in parameters})


# ---- running them ------------------------------------------------------------------------------------------------

def run(grids: Grids, settings: RunSettings) -> pd.DataFrame:
    """Run (or resume) `grids` under `settings`: their result rows (printing the time each grid took), or for curves
    the probe's score per training size, aggregated over seeds (empty when the profile draws no curve)."""
    frames = []
    for cfg in grids.configs(settings):
        start = time.perf_counter()
        rows = run_grid(cfg, progress=settings.progress)
        if settings.progress:
            print(f"{cfg.model.split('/')[-1]} {cfg.task}: {time.perf_counter() - start:.0f}s", flush=True)
        if grids.runner == "curves":
            examples = rows["extra"].map(lambda text: json.loads(text)["train_examples"])
            rows = aggregate(rows).assign(train_examples=int(examples.max()))
        frames.append(rows)
    if grids.runner == "grid":
        return pd.concat(frames, ignore_index=True)
    if not frames:  # typed as a curve is, so that a check reads an empty curve by the same rules
        return pd.DataFrame({c: pd.Series(dtype=_CURVE_DTYPES.get(c, "object")) for c in _CURVE_COLUMNS})
    return pd.concat(frames, ignore_index=True)[_CURVE_COLUMNS].sort_values(["model", "task", "train_examples"],
                                                                            ignore_index=True)

"""Each section's grids declared as data (models, tasks, constants, selections, fractions, corpus), and running them."""
from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from papa.core.errors import check_one_of
from papa.core.run_folder import RunFolder
from papa.core.settings import RunSettings
from papa.core.vocabulary import PAPER_FRACTIONS, RANKED
from papa.runs.experiment import GridConfig, run_grid
from papa.runs.results import aggregate

#: What a declared grid runs: the probing grid, or the profile's learning curves of the original-attention probe.
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

    @classmethod
    def of(cls, models: Sequence[str] | str, tasks: Sequence[str], **options) -> Grids:
        """`Grids` from a notebook's parameters: one model or a list, lists as tuples."""
        models = (models,) if isinstance(models, str) else tuple(models)
        options = {k: tuple(v) if isinstance(v, list) else v for k, v in options.items()}
        return cls(models, tuple(tasks), **options)

    def configs(self, settings: RunSettings) -> list[GridConfig]:
        """The `GridConfig` of each grid under `settings`, in run order (for curves: one per training size)."""
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


def task_available(task: str, data_dir: str | None = None) -> bool:
    """Whether `task`'s training file is in the local data directory (always True on the hub path)."""
    from papa.tasks.data import resolve_data_dir
    from papa.tasks.registry import get_task

    root = resolve_data_dir(data_dir)
    return root is None or (root / get_task(task).local.train_file).is_file()


def available_corpus(preferred: str = "mnli", fallback: str = "mlm", data_dir: str | None = None) -> str:
    """Table 2's other corpus: `preferred` (MNLI, as the paper) where its data is, else `fallback` (WikiText)."""
    return preferred if task_available(preferred, data_dir) else fallback


def order_draws(method: str, variants: Sequence[str]) -> list[str]:
    """The selections that draw `method`'s order again, one per variant (``lambda``, ["part1"] -> ["lambda@part1"])."""
    from papa.method.selection import parse_selection

    return [parse_selection(f"{method}@{v}").name for v in variants]


def methods_drawn_again(methods: Sequence[str], ranking_draws: Sequence[str], random_draws: int) -> list[str]:
    """The selections that draw `methods`' orders again: each ranked method under each of `ranking_draws`, and
    `random_draws` more random permutations where "random" is among them."""
    ranked = [m for m in methods if m in RANKED]
    return [*(d for m in ranked for d in order_draws(m, ranking_draws)),
            *(order_draws("random", [str(k) for k in range(1, random_draws + 1)]) if "random" in methods else [])]


def saved_ranking_path(folder: RunFolder, model: str, task: str, profile: str, *, seed: int = 0,
                       part: int = 0) -> Path:
    """Where a reproduction's λ ranking that `profile` learns for `model` and `task` (with `seed`, on training part
    `part`) lies under `folder`."""
    from papa.core.vocabulary import DECODER_LAYOUT, REPRODUCTION_LAYOUT
    from papa.method.models import canonical_model_name, is_causal_model
    from papa.probing.standardize import probe_inputs_for
    from papa.runs.names import RankingName
    from papa.tasks.registry import get_task

    causal = bool(is_causal_model(model))
    name = RankingName(canonical_model_name(model), task, "average", "task", get_task(task).hparams.max_length,
                       profile, DECODER_LAYOUT if causal else REPRODUCTION_LAYOUT,
                       probe_inputs=probe_inputs_for(causal, None), seed=seed, part=part)
    return folder.rankings / name.filename


def learned_rankings(profiles: Sequence[str], models: Sequence[str], tasks: Sequence[str],
                     folder: RunFolder) -> dict[str, tuple[str, ...]]:
    """Each of `profiles` with the tasks for which it saved a λ ranking of every model under `folder` (a grid reads
    another profile's ranking, never learns it)."""
    saved = {p: tuple(t for t in tasks if all(saved_ranking_path(folder, m, t, p).is_file() for m in models))
             for p in profiles}
    return {p: found for p, found in saved.items() if found}


#: The key a section's declaration gives the grid of another profile's λ ranking: ``ranking@full``.
LEARNED_PREFIX = "ranking@"


def learned_grids(methods: Sequence[str], models: Sequence[str], tasks: Sequence[str], profiles: Sequence[str],
                  folder: RunFolder | None, fractions: Sequence[str], draws: Sequence[str] = ()
                  ) -> dict[str, Grids]:
    """One grid per profile of `profiles`: the ranked `methods` under its saved λ rankings (and its saved `draws`)
    at `fractions`, over the tasks where they are saved; none without `folder` or a ranked method."""
    if folder is None or not methods:
        return {}
    return {LEARNED_PREFIX + p: Grids.of(models, saved, fractions=list(fractions),
                                       selections=[d for m in methods
                                                   for d in order_draws(m, _saved_draws(p, draws, models, saved,
                                                                                        folder))])
            for p, saved in learned_rankings(profiles, models, tasks, folder).items()}


def _saved_draws(profile: str, draws: Sequence[str], models: Sequence[str], tasks: Sequence[str],
                 folder: RunFolder) -> list[str]:
    """`profile` and those of its `draws` saved for every model and task (``full``, ``full-part1``, ...)."""
    from papa.method.selection import parse_selection
    found = [profile]
    for draw in draws:
        selection = parse_selection(f"lambda@{profile}-{draw}")
        if all(saved_ranking_path(folder, m, t, profile, seed=selection.seed, part=selection.part).is_file()
               for m in models for t in tasks):
            found.append(f"{profile}-{draw}")
    return found


def draws_an_order(key: str) -> bool:
    """Whether a declaration's grid `key` draws a head order again (its own draws, or another profile's ranking)."""
    return key == "draws" or key.startswith(("draws_", LEARNED_PREFIX))


def run_orders(declared: Mapping[str, Grids], settings: RunSettings) -> pd.DataFrame | None:
    """Run every grid of `declared` that draws a head order again; their rows together (None: there is none)."""
    drawn = [g for key, g in declared.items() if draws_an_order(key)]
    return pd.concat([run(g, settings) for g in drawn], ignore_index=True) if drawn else None


def mid_fractions() -> list[str]:
    """The paper's fractions strictly between all heads and none: where an order matters."""
    return [f for f in PAPER_FRACTIONS if f not in ("1", "0")]


def run(grids: Grids, settings: RunSettings) -> pd.DataFrame:
    """Run (or resume) `grids`: their result rows, or for curves the probe's score per training size over seeds."""
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
    if not frames:  # typed as a curve, so that a check reads it by the same rules
        return pd.DataFrame({c: pd.Series(dtype=_CURVE_DTYPES.get(c, "object")) for c in _CURVE_COLUMNS})
    return pd.concat(frames, ignore_index=True)[_CURVE_COLUMNS].sort_values(["model", "task", "train_examples"],
                                                                            ignore_index=True)

"""How much a task's λ ranking depends on the seed it learned with, and on the data: rankings of two seeds compared
(issue 27), and every pair of a ranking's draws (seeds, disjoint training parts) that the claims gate on (issue 50).

A ranking that learned something orders the heads alike whatever the probe's initial weights and the batch order;
one that did not (λ still near its 0.5 start) is a seed's noise. `ranking_stability` learns (or loads) the ranking
of each seed as a grid of the same configuration would (`papa.runs.lambda_ranking.learn_ranking`: seed 0's is the
grid's own, the others are saved beside it under names with their seed) and reports how far λ moved in each and how
much the first two agree (`papa.probing.convergence`). `draw_agreement` reads a run's rankings folder and compares
every pair of draws of each ranking, learning nothing.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from papa.core.errors import Arg, InputError
from papa.probing.convergence import DEFAULT_FRACTIONS, lambda_movement, ranking_agreement
from papa.runs.lambda_ranking import learn_ranking
from papa.runs.session import GridConfig


def ranking_stability(cfg: GridConfig, seeds: Sequence[int] = (0, 1), kind: str = "average", *,
                      fractions: Sequence = DEFAULT_FRACTIONS, progress: bool = True) -> dict:
    """One flat row for `cfg`'s task: its settings (task, model, profile, constants kind, seeds, optimizer steps,
    λ's learning rate), each seed's λ movement (``<field>_seed<s>``) and the agreement of the first two seeds'
    rankings (``spearman``, ``overlap_replaced_<f>``, ``overlap_kept_<f>``) at `fractions`, rounded as the grid
    rounds (`cfg.rounding`, else the profile's)."""
    seeds = list(seeds)
    if len(seeds) < 2 or len(set(seeds)) != len(seeds):
        example = Arg("seeds", [0, 1])
        raise InputError(f"comparing rankings needs at least two different seeds, got {seeds!r}: pass e.g. "
                         f"{example}.", advice=[example])
    resolved = cfg.resolved()
    rankings = [learn_ranking(cfg, kind, seed=seed, progress=progress)[0] for seed in seeds]
    meta = rankings[0].metadata
    row = {"task": resolved.task, "model": rankings[0].model_name, "profile": resolved.profile, "constants": kind,
           "seeds": seeds, "examples": meta.get("examples"), "steps": meta.get("steps"),
           "lambda_learning_rate": meta.get("lambda_learning_rate")}
    for seed, ranking in zip(seeds, rankings):
        for name, value in lambda_movement(ranking.lambdas).items():
            row[f"{name}_seed{seed}"] = value
    row.update(ranking_agreement(rankings[0].lambdas, rankings[1].lambdas, fractions=fractions,
                                 rounding=resolved.rounding))
    return row


#: A ranking file's draw: another part of the training data and another seed than the grid's, as
#: `papa.runs.names` appends them to the grid's name.
_DRAW = re.compile(r"^(?P<group>.+?)(?:-part(?P<part>\d+))?(?:-seed(?P<seed>\d+))?\.safetensors$")
#: The columns of `draw_agreement`'s table.
AGREEMENT_COLUMNS = ("model", "task", "profile", "a", "b", "spearman", "ranking")


#: The draws of a λ ranking a reproduction learns, as (seed, part): the grid's own, a second seed, two disjoint parts.
RANKING_DRAWS: tuple[tuple[int, int], ...] = ((0, 0), (1, 0), (0, 1), (0, 2))


def draw_name(seed: int = 0, part: int = 0) -> str:
    """A draw of a λ ranking as the agreement table names it: ``seed0`` (the grid's), ``seed1``, ``part1``, or
    ``part1-seed1``."""
    return "-".join([f"part{part}"] * bool(part) + [f"seed{seed}"] * bool(seed or not part))


def rho_span(values: Sequence[float]) -> str:
    """Spearman's ρ over some pairs of draws as the pages print it: one value, or the lowest to the highest (one
    value where both round alike), or "–" when no pair was measured."""
    if len(values) == 0:
        return "–"
    low, high = f"{min(values):.2f}", f"{max(values):.2f}"
    return low if low == high else f"{low} to {high}"


def draw_of(file_name: str) -> str:
    """The draw (`draw_name`) a ranking file's name says it is."""
    match = _DRAW.match(file_name)
    return draw_name(int(match["seed"] or 0), int(match["part"] or 0))


def ranking_draws(rankings_dir: str | Path) -> dict[str, list[tuple[str, Path]]]:
    """The λ ranking files in `rankings_dir` grouped by what they repeat (the file name but for its ``-part<k>`` and
    ``-seed<s>``, as ``<group>.safetensors``): each group's draws as (`draw_name`, path), seed0 first."""
    groups: dict[str, list[tuple[int, int, Path]]] = {}
    for path in sorted(Path(rankings_dir).glob("*.safetensors")):
        match = _DRAW.match(path.name)
        groups.setdefault(f"{match['group']}.safetensors", []).append(
            (int(match["part"] or 0), int(match["seed"] or 0), path))
    return {group: [(draw_name(seed, part), path) for part, seed, path in sorted(draws)]
            for group, draws in sorted(groups.items())}


def learned_once(rankings_dir: str | Path) -> list[Path]:
    """The ranking files in `rankings_dir` that no other draw repeats: nothing to measure their stability against."""
    return [draws[0][1] for draws in ranking_draws(rankings_dir).values() if len(draws) == 1]


def draw_agreement(rankings_dir: str | Path) -> pd.DataFrame:
    """Every pair of λ rankings in `rankings_dir` that repeat one another (same model, task, profile, constants,
    length, layout and probe inputs: the same file name but for its ``-part<k>`` and ``-seed<s>``, `ranking_draws`),
    one row per pair: the model, task and profile the rankings record, the two draws (`draw_name`), their
    Spearman's ρ and the grid ranking's file name (`ranking`). A claim's λ part is read only where every pair of the
    draws it rests on agrees (`papa.paper.claims`). Read only: nothing is learned. Empty (with
    `AGREEMENT_COLUMNS`) where no ranking repeats another."""
    from papa.method.rankings import load_ranking
    from papa.probing.convergence import spearman

    rows = []
    for group, draws in ranking_draws(rankings_dir).items():
        loaded = [(name, load_ranking(path)) for name, path in draws]
        for i, (a, first) in enumerate(loaded):
            for b, second in loaded[i + 1:]:
                meta = first.metadata
                rows.append({"model": first.model_name, "task": meta.get("task", group.split("__")[1]),
                             "profile": meta.get("profile"), "a": a, "b": b,
                             "spearman": spearman(first.lambdas, second.lambdas), "ranking": group})
    return pd.DataFrame(rows, columns=list(AGREEMENT_COLUMNS))

"""How much a task's λ ranking depends on the seed it learned with, and on the data: rankings of two seeds compared,
and every pair of a ranking's draws (seeds, disjoint training parts) that the claims gate on."""
from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import torch

from papa.core.errors import Arg, InputError
from papa.method.rankings import load_ranking
from papa.probing.convergence import DEFAULT_FRACTIONS, lambda_movement, ranking_agreement, spearman
from papa.runs.lambda_ranking import learn_ranking
from papa.runs.session import GridConfig
from papa.runs.statistics import LEVEL


def ranking_stability(cfg: GridConfig, seeds: Sequence[int] = (0, 1), kind: str = "average", *,
                      fractions: Sequence = DEFAULT_FRACTIONS, progress: bool = True) -> dict:
    """One flat row for `cfg`'s task: its settings, each seed's λ movement (``<field>_seed<s>``) and the
    `ranking_agreement` of the first two seeds' rankings (learned or loaded as a grid would)."""
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
    row["heads"] = rankings[0].lambdas.numel()
    return row


#: Two draws of a λ ranking agree where Spearman's ρ between them is at least this (see `disagrees`).
STABLE_RHO = 0.8
#: Fieller, Hartley and Pearson's (1957) variance of Fisher's z of Spearman's ρ over n items: 1.06 / (n − 3).
_FIELLER = 1.06


def rho_interval(rho: float, heads: float, level: float = LEVEL) -> tuple[float, float]:
    """The `level` interval of Spearman's ρ between two rankings of `heads` heads (Fisher's z, variance
    1.06 / (n − 3)); NaN where ρ or the head count is unknown, or there are 3 heads or fewer."""
    if not (math.isfinite(rho) and math.isfinite(heads) and heads > 3):
        return math.nan, math.nan
    from scipy.stats import norm  # imported where used: scipy.stats takes seconds to import

    z = math.atanh(min(max(rho, -1 + 1e-12), 1 - 1e-12))
    half = float(norm.ppf(0.5 + level / 2)) * math.sqrt(_FIELLER / (heads - 3))
    return math.tanh(z - half), math.tanh(z + half)


def disagrees(rho: float, heads: float) -> bool:
    """Whether a pair of draws disagrees beyond its uncertainty: the upper end of ρ's 95% interval (ρ itself where
    the head count is unknown) below `STABLE_RHO`."""
    high = rho_interval(rho, heads)[1]
    return (high if math.isfinite(high) else rho) < STABLE_RHO


def rho_text(rho: float, heads: float) -> str:
    """ρ with its 95% interval, e.g. "0.46 [0.25, 0.63]" (ρ alone where the head count is unknown)."""
    low, high = rho_interval(rho, heads)
    return f"{rho:.2f}" + (f" [{low:.2f}, {high:.2f}]" if math.isfinite(low) else "")


def gate_reason(pairs: pd.DataFrame, whose: str) -> str | None:
    """Why the λ rankings whose pairs of draws are `pairs` (a, b, spearman, heads) cannot be read, None where they
    can: drawn on one part of the data only, or some pair `disagrees`; `whose` names them."""
    names = sorted(set(pairs.a) | set(pairs.b), key=draw_order)
    if not any(n.startswith("part") for n in names):
        return (f"{whose} drawn on one part of the data only ({', '.join(names)}): how the order moves with the data "
                "is not measured (`papa rank --part 1`)")
    below = sorted((r, a, b, n) for a, b, r, n in zip(pairs.a, pairs.b, pairs.spearman, pairs.heads)
                   if disagrees(r, n))
    if not below:
        return None
    rho, a, b, n = below[0]
    many = f"{len(below)} pairs" if len(below) > 1 else "a pair"
    return (f"{whose} of {len(names)} draws ({', '.join(names)}) agree at ρ {rho_span(list(pairs.spearman))}: "
            f"{many} below {STABLE_RHO} beyond ρ's 95% interval (lowest {a}–{b} at ρ {rho_text(rho, n)})")


def draw_order(name: str) -> tuple[int, int]:
    """`draw_name`s in the order (part, seed): seed0, seed1, part1, part2, ..."""
    part = int(name.split("part")[1].split("-")[0]) if name.startswith("part") else 0
    seed = int(name.split("seed")[1]) if "seed" in name else 0
    return part, seed


#: A ranking file's draw: the ``-part<k>`` and ``-seed<s>`` appended to the grid's name.
_DRAW = re.compile(r"^(?P<group>.+?)(?:-part(?P<part>\d+))?(?:-seed(?P<seed>\d+))?\.safetensors$")
#: The columns of `draw_agreement`'s table.
AGREEMENT_COLUMNS = ("model", "task", "profile", "a", "b", "spearman", "heads", "ranking")


#: The draws of a λ ranking a reproduction learns, as (seed, part): the grid's own, a second seed, two disjoint parts.
RANKING_DRAWS: tuple[tuple[int, int], ...] = ((0, 0), (1, 0), (0, 1), (0, 2))


def draw_name(seed: int = 0, part: int = 0) -> str:
    """A draw of a λ ranking as the agreement table names it: ``seed0`` (the grid's), ``seed1``, ``part1``, or
    ``part1-seed1``."""
    return "-".join([f"part{part}"] * bool(part) + [f"seed{seed}"] * bool(seed or not part))


def rho_span(values: Sequence[float]) -> str:
    """Spearman's ρ over some pairs of draws as the pages print it: one value, "lowest to highest", or "–"."""
    if len(values) == 0:
        return "–"
    low, high = f"{min(values):.2f}", f"{max(values):.2f}"
    return low if low == high else f"{low} to {high}"


def draw_of(file_name: str) -> str:
    """The draw (`draw_name`) a ranking file's name says it is."""
    match = _DRAW.match(file_name)
    return draw_name(int(match["seed"] or 0), int(match["part"] or 0))


def ranking_draws(rankings_dir: str | Path) -> dict[str, list[tuple[str, Path]]]:
    """The λ ranking files in `rankings_dir` grouped by the file name but for its draw (``<group>.safetensors``):
    each group's draws as (`draw_name`, path), seed0 first."""
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
    """One row (`AGREEMENT_COLUMNS`) per pair of draws of each λ ranking in `rankings_dir` (`ranking_draws`): model,
    task, profile, the two draws, their Spearman's ρ, the heads and the grid ranking's file. Nothing is learned."""
    rows = []
    for group, draws in ranking_draws(rankings_dir).items():
        loaded = {name: load_ranking(path) for name, path in draws}
        first = loaded[draws[0][0]]
        pairs = draw_pairs({name: ranking.lambdas for name, ranking in loaded.items()})
        rows += [{"model": first.model_name, "task": first.metadata.get("task", group.split("__")[1]),
                  "profile": first.metadata.get("profile"), **pair, "ranking": group}
                 for pair in pairs.to_dict("records")]
    return pd.DataFrame(rows, columns=list(AGREEMENT_COLUMNS))


def draw_pairs(draws: dict[str, torch.Tensor]) -> pd.DataFrame:
    """Every pair of `draws` (name -> λ of one ranking), in order: (a, b, spearman, heads)."""
    names = list(draws)
    return pd.DataFrame([{"a": a, "b": b, "spearman": spearman(draws[a], draws[b]), "heads": draws[a].numel()}
                         for i, a in enumerate(names) for b in names[i + 1:]], columns=["a", "b", "spearman", "heads"])

"""How much a task's λ ranking depends on the seed it learned with: rankings of two seeds, compared (issue 27).

A ranking that learned something orders the heads alike whatever the probe's initial weights and the batch order;
one that did not (λ still near its 0.5 start) is a seed's noise. `ranking_stability` learns (or loads) the ranking
of each seed as a grid of the same configuration would (`papa.runs.experiment.learn_ranking`: seed 0's is the
grid's own, the others are saved beside it under names with their seed) and reports how far λ moved in each and how
much the first two agree (`papa.probing.convergence`).
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from papa.core.errors import Arg, InputError
from papa.probing.convergence import DEFAULT_FRACTIONS, lambda_movement, ranking_agreement
from papa.runs.experiment import GridConfig, learn_ranking


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
           "lambda_learning_rate": meta.get("lambda_learning_rate", meta.get("learning_rate"))}
    for seed, ranking in zip(seeds, rankings):
        for name, value in lambda_movement(ranking.lambdas).items():
            row[f"{name}_seed{seed}"] = value
    row.update(ranking_agreement(rankings[0].lambdas, rankings[1].lambdas, fractions=fractions,
                                 rounding=resolved.rounding))
    return row


def seed_pairs(rankings_dir: str | Path) -> list[dict]:
    """What `papa report` says of a run's rankings: each ranking in `rankings_dir` learned with another seed
    (``…-seed<S>.safetensors``, `papa rank --seed S`) beside the one it repeats (seed 0's, the grid's), as a row of
    the model, the task and the seeds (as the rankings record them), Spearman's ρ of their λ and the file names. Read only:
    nothing is learned."""
    from papa.method.rankings import load_ranking
    from papa.probing.convergence import spearman

    rows = []
    for other in sorted(Path(rankings_dir).glob("*-seed*.safetensors")):
        match = re.fullmatch(r"(?P<stem>.+)-seed(?P<seed>\d+)\.safetensors", other.name)
        grid = other.with_name(f"{match['stem']}.safetensors") if match else None
        if grid is None or not grid.is_file():
            continue
        first, second = load_ranking(grid), load_ranking(other)
        # what each ranking records of itself; a file name only where an older ranking recorded less
        task = second.metadata.get("task", other.name.split("__")[1])
        seeds = (int(first.metadata.get("seed", 0)), int(second.metadata.get("seed", match["seed"])))
        rows.append({"model": first.model_name, "task": task, "seeds": seeds,
                     "spearman": spearman(first.lambdas, second.lambdas), "ranking": grid.name,
                     "other": other.name})
    return rows

"""Has λ learned anything? How far it moved from its 0.5 start, and how much two rankings agree.

λ comes as [L, H]; results are plain floats. Agreement is Spearman's ρ over all heads (NaN where a grid is constant)
and, per fraction, the share |A ∩ B| / |A| of the heads the grid replaces and keeps (two random sets of k of n heads
share k/n on average).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from papa.method.selection import fraction_label, heads_to_replace, replacement_order
from papa.probing.ranking import LambdaTrace

DEFAULT_FRACTIONS = ("1/2", "1/8")


def _grid(lambdas) -> torch.Tensor:
    lam = torch.as_tensor(lambdas).detach().to("cpu", torch.float64)
    if lam.dim() != 2 or 0 in lam.shape:
        raise ValueError(f"λ must be a non-empty [layers, heads] tensor, got shape {tuple(lam.shape)}.")
    if not torch.isfinite(lam).all():
        raise ValueError("λ has a non-finite value: it cannot be a sigmoid's output; re-learn λ.")
    return lam


def lambda_movement(lambdas) -> dict[str, float]:
    """How far λ moved from 0.5: its min, max and spread, and the spread and (population) std of the logits θ."""
    lam = _grid(lambdas)
    theta = torch.logit(lam)
    return {"lambda_min": lam.min().item(), "lambda_max": lam.max().item(),
            "lambda_spread": (lam.max() - lam.min()).item(),
            "logit_spread": (theta.max() - theta.min()).item(),
            "logit_std": theta.std(unbiased=False).item()}


def spearman(lambdas_a, lambdas_b) -> float:
    """Spearman's ρ between two λ grids of the same shape; NaN when either has one value everywhere."""
    a, b = _grid(lambdas_a), _grid(lambdas_b)
    if a.shape != b.shape:
        raise ValueError(f"cannot compare λ of shapes {tuple(a.shape)} and {tuple(b.shape)}: rankings of one model "
                         "have the same layers x heads.")
    a, b = a.flatten().numpy(), b.flatten().numpy()  # `_grid` gives float64 on the CPU
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    from scipy import stats  # imported where used: scipy.stats takes seconds to import

    return float(stats.spearmanr(a, b).statistic)


def replaced_heads(lambdas, fraction, rounding: str = "down") -> torch.Tensor:
    """[L, H] bool mask of the heads a grid replaces at `fraction` under the "lambda" order of `lambdas`."""
    lam = _grid(lambdas)
    num_layers, num_heads = lam.shape
    order = replacement_order("lambda", num_layers, num_heads, lambdas=lam)
    return heads_to_replace(order, fraction, num_layers, num_heads, rounding)


def _share(a: torch.Tensor, b: torch.Tensor) -> float:
    size = int(a.sum())
    return 1.0 if size == 0 else int((a & b).sum()) / size


def ranking_agreement(lambdas_a, lambdas_b, *, fractions: Sequence = DEFAULT_FRACTIONS,
                      rounding: str = "down") -> dict[str, float]:
    """``spearman``, and per fraction ``overlap_replaced_<f>`` and ``overlap_kept_<f>``, of two λ grids."""
    out = {"spearman": spearman(lambdas_a, lambdas_b)}
    for fraction in fractions:
        label = fraction_label(fraction)
        a, b = replaced_heads(lambdas_a, fraction, rounding), replaced_heads(lambdas_b, fraction, rounding)
        out[f"overlap_replaced_{label}"] = _share(a, b)
        out[f"overlap_kept_{label}"] = _share(~a, ~b)
    return out


def learning_curve(trace_a: LambdaTrace, trace_b: LambdaTrace, *, fractions: Sequence = DEFAULT_FRACTIONS,
                   rounding: str = "down") -> list[dict[str, float]]:
    """One row per step both traces recorded: λ's and the logits' spread in each (``_a``/``_b``) and their
    `ranking_agreement`."""
    where_b = dict(zip(trace_b.steps, trace_b.lambdas))
    rows = []
    for step, lam_a in zip(trace_a.steps, trace_a.lambdas):
        if step not in where_b:
            continue
        lam_b = where_b[step]
        row: dict[str, float] = {"step": step}
        for side, lam in (("a", lam_a), ("b", lam_b)):
            moved = lambda_movement(lam)
            row[f"lambda_spread_{side}"] = moved["lambda_spread"]
            row[f"logit_spread_{side}"] = moved["logit_spread"]
        row.update(ranking_agreement(lam_a, lam_b, fractions=fractions, rounding=rounding))
        rows.append(row)
    return rows


#: Where a learning curve counts as settled (`settled_at`): its ranking agrees with the final one at least this much.
SETTLED_RHO = 0.9


def settling_curve(trace: LambdaTrace, *, fractions: Sequence = ("1/2", "1/8", "1/16"),
                   rounding: str = "down") -> list[dict[str, float]]:
    """One row per record of one λ learning run: step, seconds, spreads, and the `ranking_agreement` of that step's
    ranking with the final one."""
    if not trace.steps:
        raise ValueError("the trace holds no record: learn λ with a LambdaTrace to draw its curve")
    final = trace.lambdas[-1]
    rows = []
    for step, seconds, lam in zip(trace.steps, trace.seconds, trace.lambdas):
        moved = lambda_movement(lam)
        row: dict[str, float] = {"step": step, "seconds": seconds, "lambda_spread": moved["lambda_spread"],
                                 "logit_spread": moved["logit_spread"], "logit_std": moved["logit_std"]}
        row.update(ranking_agreement(lam, final, fractions=fractions, rounding=rounding))
        rows.append(row)
    return rows


def settled_at(rows: Sequence[dict], threshold: float = SETTLED_RHO) -> int | None:
    """The first step of `settling_curve`'s rows from which every later ranking agrees with the final one at
    ρ ≥ `threshold`; None if it never settled before the end."""
    settled = None
    for row in rows[:-1]:
        if row["spearman"] >= threshold:
            settled = row["step"] if settled is None else settled
        else:
            settled = None
    return settled

"""Beyond the paper: PAPA on a causal LM (notebook 08). The decoder's counterpart of Fig. 6 (its own pretraining
objective, next-token perplexity with its frozen LM head) beside its downstream probes, and the measured speed of
scoring text with every head constant.

Everything here reads frames that `papa.paper.sections` makes from result rows, or times a model; nothing trains.
"""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

#: The pretraining objective of a decoder (papa.tasks.registry), read beside its downstream probes.
LM_TASK = "lm"


def relative_drops(curves: pd.DataFrame) -> pd.DataFrame:
    """For curves of one selection method (`papa.paper.sections.main_curves`), per model, task and fraction: the share of the original score lost, (original - score) / |original|
    (0 = nothing lost), so that a perplexity and an accuracy can share one axis. Columns as `curves` plus
    ``relative_drop``; the 95% interval is scaled alike."""
    if curves.empty:
        return curves.assign(relative_drop=pd.Series(dtype=float))
    keys = ["model", "task", "selection"]
    original = curves[curves.fraction_label == "1"].set_index(["model", "task"])["mean"]
    base = pd.Series(curves.set_index(["model", "task"]).index.map(original.to_dict()), index=curves.index)
    out = curves.assign(relative_drop=(base - curves["mean"]) / base.abs(), relative_ci95=curves["ci95"] / base.abs())
    return out.sort_values(keys, kind="stable").reset_index(drop=True)


def objective_vs_probes(curves: pd.DataFrame, lm_task: str = LM_TASK) -> pd.DataFrame:
    """Per model: the relative drop of the LM objective and the mean relative drop of the downstream probes at
    each fraction below 1, and whether the objective suffers more (the paper's MLM finding, Fig. 6)."""
    drops = relative_drops(curves)
    drops = drops[drops.fraction_label != "1"]
    if drops.empty or lm_task not in set(drops.task):
        return pd.DataFrame()
    lm = drops[drops.task == lm_task].groupby(["model", "fraction_label"], sort=False)["relative_drop"].mean()
    probes = drops[drops.task != lm_task].groupby(["model", "fraction_label"], sort=False)["relative_drop"].mean()
    table = pd.DataFrame({"lm_relative_drop": lm, "probes_mean_relative_drop": probes})
    table["objective_suffers_more"] = table["lm_relative_drop"] > table["probes_mean_relative_drop"]
    return table


def objective_vs_probes_summary(table: pd.DataFrame) -> str:
    """One line per (model, fraction) reading `objective_vs_probes`."""
    if table.empty:
        return "no LM and probe results at the same fractions yet: run the notebook's grids first"
    lines = []
    for (model, fraction), row in table.iterrows():
        probes = row["probes_mean_relative_drop"]
        probes_text = "no probe results" if pd.isna(probes) else f"the probes lose {probes:.1%} on average"
        verdict = "" if pd.isna(probes) else (" -> the objective suffers more" if row["objective_suffers_more"]
                                              else " -> the probes suffer as much or more")
        lines.append(f"{model.split('/')[-1]} at {fraction}: the LM objective loses {row['lm_relative_drop']:.1%}, "
                     f"{probes_text}{verdict}")
    return "\n".join(lines)


def scoring_speed(model, tokenizer, texts: Sequence[str], constants, *, max_length: int, batch_size: int = 8,
                  repeats: int = 3) -> pd.DataFrame:
    """Tokens per second of scoring `texts` (one batch, LM head included): the original model, every head constant,
    and every head constant with its Q/K projections dropped, beside the whole-model ceiling of `papa.method.cost`.
    A look from a notebook; `benchmarks/bench.py` measures with care."""
    from papa.method.cost import config_speedups, forward_timings
    from papa.method.layout import encode

    batch = encode(tokenizer, list(texts)[:batch_size], max_length=max_length, layout="standard",
                   model_type=model.config.model_type)
    tokens = int(batch.inputs["attention_mask"].sum())
    device = next(model.parameters()).device
    inputs = {k: v.to(device) for k, v in batch.inputs.items()}
    table = forward_timings(model, inputs, constants, repeats=repeats)
    table["tokens/s"] = tokens / table["seconds"]
    ceiling = config_speedups(model.config, max_length)["model_speedup_ceiling"]
    table["share of ceiling"] = table["speed-up"] / ceiling
    table.loc["original", "share of ceiling"] = float("nan")
    table.attrs["ceiling"] = ceiling
    table.attrs["tokens"] = tokens
    return table

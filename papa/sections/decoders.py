"""The module of the decoders section's notebook (08, beyond the paper): PAPA on a causal LM, its own objective
beside its probes, the claims' decoder lines in words, and its scoring speed."""
from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import pandas as pd

from papa.core.settings import Resources
from papa.core.vocabulary import DECODER_LAYOUT
from papa.method.models import model_note
from papa.paper.baselines import chance_levels, majority_baselines
from papa.paper.checks import check_table
from papa.paper.claims.notes import SectionClaims
from papa.paper.claims.reading import claim_runs, profile_rows
from papa.paper.claims.run_tables import RunLike, RunTables
from papa.paper.claims.scores import ClaimRun
from papa.paper.figures import (constant_heatmaps, curve_line, fraction_axis, fraction_curves, fraction_labels,
                                learning_curves, legend_outside, save_figure, x_shifts)
from papa.paper.grids import Grids, methods_drawn_again, mid_fractions, order_draws, run, run_orders
from papa.paper.patterns import head_patterns, pattern_summary, representative_heads, special_slots
from papa.paper.tables import (DECODER_CHANCE_TABLE, DECODER_LEARNS_TABLE, DECODER_RANKING_STABILITY_TABLE,
                               OBJECTIVE_TASKS, curves_over_orders, listed, main_curves, means, orders_run,
                               probes_learn, save_table, setup, short_model, split_learning)
from papa.runs.profiles import get_profile
from papa.runs.session import GridConfig, task_constants
from papa.runs.statistics import VERDICTS
from papa.sections.every_claim import read_claims
from papa.sections.head_selection import fig5_sentence
from papa.sections.main_results import grid_points, ranking_stability
from papa.sections.mlm_electra import own_head_sentence
from papa.tasks.corpus import task_corpus


def grids(model: str, tasks: Sequence[str], selections: Sequence[str], probe_inputs: str | None = None,
          ranking_draws: Sequence[str] = (), random_draws: int = 0) -> dict[str, Grids]:
    """A causal LM's LM under each selection ("lm"), an LM probe at 1 and 0 ("lm_probe") and its learning curve
    ("lm_probe_sizes"), downstream probes ("probes"), and the orders drawn again ("draws_lm", "draws")."""
    declared = {"lm": Grids.of(model, ["lm"], selections=list(selections)),
                "lm_probe": Grids.of(model, ["lm_probe"], fractions=["1", "0"], probe_inputs=probe_inputs),
                "lm_probe_sizes": Grids.of(model, ["lm_probe"], runner="curves"),
                "probes": Grids.of(model, tasks, probe_inputs=probe_inputs)}
    lm_draws = methods_drawn_again(selections, ranking_draws, random_draws)
    if lm_draws:
        declared["draws_lm"] = Grids.of(model, ["lm"], fractions=mid_fractions(), selections=lm_draws)
    if ranking_draws:
        declared["draws"] = Grids.of(model, tasks, fractions=["1/2"], selections=order_draws("lambda", ranking_draws),
                                   probe_inputs=probe_inputs)
    return declared


def relative_drop_curves(drops: pd.DataFrame, *, title: str = "") -> plt.Figure:
    """The share of each task's original score lost vs fraction (`relative_drops`), one line per model and task."""
    if drops.empty:
        raise ValueError("no results to plot: run the section's grids first")
    labels = fraction_labels(drops)
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    several = drops["model"].nunique() > 1
    groups = list(drops.groupby(["model", "task"], sort=False))
    for ((model, task), group), shift in zip(groups, x_shifts(len(groups))):
        rows = group.assign(mean=group["relative_drop"] * 100, ci95=group["relative_ci95"] * 100)
        name = f"{short_model(model)} {task}" if several else task
        curve_line(ax, rows, labels, name, shift=shift,
               linewidth=2.5 if task in OBJECTIVE_TASKS else 1.2)  # objectives stand out
    fraction_axis(ax, labels)
    ax.set_ylabel("share of the original score lost (%)")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    legend_outside(fig, [ax])
    return fig


#: A decoder's pretraining objective, read beside its downstream probes.
LM_TASK = "lm"


#: How many of the raw probe inputs' largest dimensions `probe_diagnosis` lists.
DIAGNOSED_DIMENSIONS = 5


def relative_drops(curves: pd.DataFrame) -> pd.DataFrame:
    """`curves` with ``relative_drop``, (original − score) / |original|, and its interval ``relative_ci95``, so that
    a perplexity and an accuracy share one axis."""
    if curves.empty:
        return curves.assign(relative_drop=pd.Series(dtype=float))
    keys = ["model", "task", "selection"]
    original = curves[curves.fraction_label == "1"].set_index(["model", "task"])["mean"]
    base = pd.Series(curves.set_index(["model", "task"]).index.map(original.to_dict()), index=curves.index)
    out = curves.assign(relative_drop=(base - curves["mean"]) / base.abs(), relative_ci95=curves["ci95"] / base.abs())
    return out.sort_values(keys, kind="stable").reset_index(drop=True)


def objective_vs_probes(curves: pd.DataFrame, lm_task: str = LM_TASK,
                        learns: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per model and fraction below 1: the relative drop of `lm_task` and the downstream probes' mean, and whether
    the objective suffers more; probes `learns` says do not learn are left out (``probes_left_out``)."""
    drops = relative_drops(curves)
    drops = drops[drops.fraction_label != "1"]
    if drops.empty or lm_task not in set(drops.task):
        return pd.DataFrame()
    drops, left_out = split_learning(drops, learns)
    keys = ["model", "fraction_label"]
    lm = drops[drops.task == lm_task].groupby(keys, sort=False)["relative_drop"].mean()
    # the downstream probes only: LM probe beside LM is the same objective read another way, not a downstream task
    probes = drops[~drops.task.isin({*OBJECTIVE_TASKS, lm_task})].groupby(keys, sort=False)["relative_drop"].mean()
    table = pd.DataFrame({"lm_relative_drop": lm, "probes_mean_relative_drop": probes})
    table["objective_suffers_more"] = table["lm_relative_drop"] > table["probes_mean_relative_drop"]
    names = left_out.groupby(keys, sort=False)["task"].agg(lambda tasks: ", ".join(sorted(set(tasks))))
    table["probes_left_out"] = [names.get(key, "") for key in table.index]
    return table


def objective_vs_probes_summary(table: pd.DataFrame) -> str:
    """One line per (model, fraction) reading `objective_vs_probes`."""
    if table.empty:
        return "no LM and probe results at the same fractions yet: run the notebook's grids first"
    lines = []
    for (model, fraction), row in table.iterrows():
        probes, left_out = row["probes_mean_relative_drop"], row["probes_left_out"]
        if pd.isna(probes):
            probes_text = (f"no probe to read ({left_out}: not above the majority baseline)" if left_out
                           else "no probe results")
        else:
            probes_text = f"the probes lose {probes:.1%} on average"
            if left_out:
                probes_text += f" ({left_out} left out: not above the majority baseline)"
        verdict = "" if pd.isna(probes) else (" -> the objective suffers more" if row["objective_suffers_more"]
                                              else " -> the probes suffer as much or more")
        lines.append(f"{model.split('/')[-1]} at {fraction}: the LM objective loses {row['lm_relative_drop']:.1%}, "
                     f"{probes_text}{verdict}")
    return "\n".join(lines)


def decoder_claim_run(run: RunLike, profile: str) -> ClaimRun:
    """The causal LMs' rows of a run of `profile` as the claims read them."""
    return claim_runs(profile_rows(run, profile))[1]


def own_head_description(run: RunLike, profile: str) -> str:
    """`own_head_sentence` on the causal LMs of a run of `profile`."""
    return own_head_sentence(decoder_claim_run(run, profile)) or "No LM scored with its own head at 1 and at 0 yet."


def fig5_explanation(run: RunLike, profile: str) -> str:
    """`fig5_sentence` on the causal LMs of a run of `profile`."""
    return fig5_sentence(decoder_claim_run(run, profile)) or "Fig. 5 is not read on a decoder: no two head orders ran."


def scoring_speed(model, tokenizer, texts: Sequence[str], constants, *, max_length: int, batch_size: int = 8,
                  repeats: int = 3) -> pd.DataFrame:
    """Tokens per second of scoring one batch of `texts` per mode (original, constant, constant without Q/K),
    beside the whole-model ceiling; a quick look, not a benchmark."""
    from papa.method.cost import config_speedups, forward_timings

    inputs = _decoder_inputs(model, tokenizer, list(texts)[:batch_size], max_length)
    tokens = int(inputs["attention_mask"].sum())
    table = forward_timings(model, inputs, constants, repeats=repeats)
    ceiling = config_speedups(model.config, max_length)["model_speedup_ceiling"]
    return against_ceiling(table, ceiling, tokens)


def against_ceiling(timings: pd.DataFrame, ceiling: float, tokens: int) -> pd.DataFrame:
    """`timings` with tokens per second and each mode's share of `ceiling`; a share above 1 is named timing noise."""
    table = timings.copy()
    table["tokens/s"] = tokens / table["seconds"]
    table["share of ceiling"] = table["speed-up"] / ceiling
    table["reading"] = ["above the ceiling: timing noise" if share > 1 else "" for share in table["share of ceiling"]]
    table.attrs.update(ceiling=ceiling, tokens=tokens)
    return table


def hidden_state_scale(model, tokenizer, texts: Sequence[str], *, max_length: int) -> pd.DataFrame:
    """Per hidden state (0 = embeddings): the largest |value| at the first token and at the other real tokens,
    averaged over `texts`: a pre-norm decoder's first token can saturate an unscaled probe."""
    import torch

    from papa.probing.features import hidden_features

    inputs = _decoder_inputs(model, tokenizer, list(texts), max_length)
    with torch.no_grad():
        states = hidden_features(model, inputs).float().abs().amax(dim=-1).cpu()  # [batch, L+1, n]
    mask = inputs["attention_mask"].bool().cpu()
    rows = torch.arange(len(mask))
    first = mask.float().argmax(dim=1)  # left-aligned or left-padded: the first real slot
    others = mask.clone()
    others[rows, first] = False
    at_first = states[rows, :, first].mean(dim=0)  # [L+1]
    rest = states.masked_fill(~others[:, None, :], 0).amax(dim=2).mean(dim=0)
    table = pd.DataFrame({"first_token_max": at_first.numpy(), "other_tokens_max": rest.numpy()},
                         index=pd.RangeIndex(len(at_first), name="layer")).astype(float)
    table["ratio"] = table["first_token_max"] / table["other_tokens_max"]
    return table


def probe_diagnosis(model, tokenizer, task: str, *, profile: str, resources: Resources = Resources(),
                    train_limit: int = 500, eval_limit: int = 300, epochs: int | None = None,
                    seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Whether the probe learns on `model`'s raw or standardised inputs (`raw_vs_standardized` on the profile's
    examples of `task`), and the raw inputs' `DIAGNOSED_DIMENSIONS` largest dimensions with ``std_over_rms``."""
    from papa.method.architectures import is_causal
    from papa.method.layout import layout_for
    from papa.probing.diagnostics import input_scale, mlp_inputs, raw_vs_standardized
    from papa.probing.features import FeatureSource, encode_task
    from papa.probing.training import TrainSettings, make_probe
    from papa.runs.profiles import get_profile
    from papa.tasks.data import load_examples, resolve_data_dir
    from papa.tasks.registry import get_task

    spec, prof = get_task(task), get_profile(profile).for_task(task)
    if not spec.trains_probe:
        raise ValueError(f"task {task!r} trains no probe (the model's own head scores it): diagnose a downstream task")
    root, causal, n = resolve_data_dir(resources.data_dir), is_causal(model), spec.hparams.max_length
    layout = layout_for(causal, None, prof.layout)

    def source(split: str, limit: int, profile_limit: int | None) -> FeatureSource:
        examples = load_examples(spec, split, root, limit=min(limit, profile_limit or limit), sample=prof.sample)
        encoded = encode_task(tokenizer, spec, examples, max_length=n, model_type=model.config.model_type,
                              layout=layout, causal=causal)
        return FeatureSource(model, encoded, trainable_backbone=False, progress=resources.progress,
                             desc=f"{split} features")

    train, evaluation = source("train", train_limit, prof.train_limit), source("eval", eval_limit, prof.eval_limit)
    settings = TrainSettings.from_task(spec, epochs=epochs or prof.epochs)
    table = raw_vs_standardized(spec, model, train, evaluation, settings, seed=seed)
    fresh = make_probe(spec, model, n)
    scale = input_scale(mlp_inputs(fresh, train), fresh.num_layers, fresh.hidden_size).head(DIAGNOSED_DIMENSIONS)
    scale = scale.assign(std_over_rms=scale["std"] / scale["rms"])
    table.attrs.update(train=len(train.data), eval=len(evaluation.data), epochs=settings.epochs)
    return table, scale.reset_index(drop=True)


def _decoder_inputs(model, tokenizer, texts: list[str], max_length: int) -> dict:
    """`texts` in the decoder layout, on the model's device."""
    from papa.method.layout import encode

    batch = encode(tokenizer, texts, max_length=max_length, layout=DECODER_LAYOUT,
                   model_type=model.config.model_type)
    device = next(model.parameters()).device
    return {k: v.to(device) for k, v in batch.inputs.items()}


#: Every claim read on a run's tables, each with its decoder line (the section's claims are the decoders' lines).
read = read_claims
claims = SectionClaims("08_decoders", read)

#: What the section's notebook calls: its own functions and the machinery it shows.
__all__ = ["DECODER_CHANCE_TABLE", "DECODER_LEARNS_TABLE", "DECODER_RANKING_STABILITY_TABLE", "DIAGNOSED_DIMENSIONS",
           "GridConfig", "LM_TASK", "RunTables", "VERDICTS", "against_ceiling", "chance_levels", "check_table",
           "claims", "constant_heatmaps", "curves_over_orders", "decoder_claim_run", "fig5_explanation",
           "fraction_curves", "get_profile", "grid_points", "grids", "head_patterns", "hidden_state_scale",
           "learning_curves", "listed", "main_curves", "majority_baselines", "means", "model_note",
           "objective_vs_probes", "objective_vs_probes_summary", "orders_run", "own_head_description",
           "pattern_summary", "probe_diagnosis", "probes_learn", "ranking_stability", "read", "relative_drop_curves",
           "relative_drops", "representative_heads", "run", "run_orders", "save_figure", "save_table", "scoring_speed",
           "setup", "short_model", "special_slots", "task_constants", "task_corpus"]

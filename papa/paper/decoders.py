"""Beyond the paper: PAPA on a causal LM (notebook 08). The decoder's counterpart of Fig. 6 (its own pretraining
objective, next-token perplexity with its frozen LM head) beside its downstream probes, the claims' readings of
it in words (the frozen head described, Fig. 5's verdict explained), and the measured speed of scoring text with
every head constant.

Everything here reads frames that `papa.paper.sections` makes from result rows or a run's tables, or times a model;
nothing trains.
"""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from papa.core.settings import Resources
from papa.core.vocabulary import DECODER_LAYOUT, DEFAULT_DTYPE
from papa.paper.claims.head_selection import fig5_sentence
from papa.paper.claims.mlm_electra import own_head_sentence
from papa.paper.claims.reading import claim_runs
from papa.paper.claims.run_tables import RunLike, RunTables
from papa.paper.claims.scores import ClaimRun
from papa.paper.sections import OBJECTIVE_TASKS, split_learning

#: The pretraining objective of a decoder (papa.tasks.registry), read beside its downstream probes.
LM_TASK = "lm"
#: How many of the raw probe inputs' largest dimensions `probe_diagnosis` lists.
DIAGNOSED_DIMENSIONS = 5


def relative_drops(curves: pd.DataFrame) -> pd.DataFrame:
    """For curves of one selection method (`papa.paper.sections.main_curves`), per model, task and fraction: the
    share of the original score lost, (original - score) / |original| (0 = nothing lost), so that a perplexity and
    an accuracy can share one axis. Columns as `curves` plus ``relative_drop``; the 95% interval is scaled alike."""
    if curves.empty:
        return curves.assign(relative_drop=pd.Series(dtype=float))
    keys = ["model", "task", "selection"]
    original = curves[curves.fraction_label == "1"].set_index(["model", "task"])["mean"]
    base = pd.Series(curves.set_index(["model", "task"]).index.map(original.to_dict()), index=curves.index)
    out = curves.assign(relative_drop=(base - curves["mean"]) / base.abs(), relative_ci95=curves["ci95"] / base.abs())
    return out.sort_values(keys, kind="stable").reset_index(drop=True)


def objective_vs_probes(curves: pd.DataFrame, lm_task: str = LM_TASK,
                        learns: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per model: the relative drop of the LM objective and the mean relative drop of the downstream probes at
    each fraction below 1, and whether the objective suffers more (the paper's MLM finding, Fig. 6). `lm_task` may be
    ``lm_probe`` (a probe trained for the next token); the other objectives are never counted among the probes.

    With `learns` (`papa.paper.sections.probes_learn`), probes that do not beat their majority baseline are left out
    of the mean (such a probe scores the same whatever the attention); ``probes_left_out`` names them."""
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
    """The causal LMs' rows of a run of `profile` (its folder, or its tables read once) as the claims read them
    (`papa.paper.claims.profile_claims`'s rows: the profile's layout, float32, each model's default probe inputs)."""
    from papa.runs.profiles import get_profile

    prof = get_profile(profile)
    tables = RunTables.of(run)
    return claim_runs(tables.keeping(tables.rows(prof.name, prof.layout, DEFAULT_DTYPE)))[1]


def own_head_description(run: RunLike, profile: str) -> str:
    """The LM with the model's own frozen head described on a run of `profile`
    (`papa.paper.claims.mlm_electra.own_head_sentence`): a description beside Fig. 6's claim, not a part of it."""
    return own_head_sentence(decoder_claim_run(run, profile)) or "No LM scored with its own head at 1 and at 0 yet."


def fig5_explanation(run: RunLike, profile: str) -> str:
    """Fig. 5's verdict on the causal LMs of a run of `profile` in words
    (`papa.paper.claims.head_selection.fig5_sentence`)."""
    return fig5_sentence(decoder_claim_run(run, profile)) or "Fig. 5 is not read on a decoder: no two head orders ran."


def scoring_speed(model, tokenizer, texts: Sequence[str], constants, *, max_length: int, batch_size: int = 8,
                  repeats: int = 3) -> pd.DataFrame:
    """Tokens per second of scoring `texts` (one batch, LM head included): the original model, every head constant,
    and every head constant with its Q/K projections dropped, beside the whole-model ceiling of `papa.method.cost`.
    A look from a notebook; `benchmarks/bench.py` measures with care."""
    from papa.method.cost import config_speedups, forward_timings

    inputs = _decoder_inputs(model, tokenizer, list(texts)[:batch_size], max_length)
    tokens = int(inputs["attention_mask"].sum())
    table = forward_timings(model, inputs, constants, repeats=repeats)
    ceiling = config_speedups(model.config, max_length)["model_speedup_ceiling"]
    return against_ceiling(table, ceiling, tokens)


def against_ceiling(timings: pd.DataFrame, ceiling: float, tokens: int) -> pd.DataFrame:
    """`timings` (seconds and speed-up per mode, the original's 1) with tokens per second and each mode's share of
    the whole-model `ceiling` (the original's too: 1 / ceiling); a mode measured above the ceiling, which no mode
    can reach, is named as timing noise rather than read as a speed-up."""
    table = timings.copy()
    table["tokens/s"] = tokens / table["seconds"]
    table["share of ceiling"] = table["speed-up"] / ceiling
    table["reading"] = ["above the ceiling: timing noise" if share > 1 else "" for share in table["share of ceiling"]]
    table.attrs.update(ceiling=ceiling, tokens=tokens)
    return table


def hidden_state_scale(model, tokenizer, texts: Sequence[str], *, max_length: int) -> pd.DataFrame:
    """Per hidden state the probes read (0 = embeddings): the largest |value| at each text's first token and at its
    other real tokens, averaged over `texts`. A pre-norm decoder's residual stream is not normalised between layers,
    and its first token often carries "massive activations"; a probe whose MLP reads such values unscaled starts with
    its tanh saturated, which can keep it at the majority class (an encoder's hidden states are LayerNorm'd)."""
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
    """Why the paper's probe does (not) learn on `model`'s hidden states (original attention), and what standardising
    its inputs changes: `papa.probing.diagnostics.raw_vs_standardized` on the profile's draw of `task`'s examples
    (at most `train_limit` training and `eval_limit` evaluation ones, from `resources`' data folder, with its
    progress), with `epochs` (None: the profile's). Returns
    that table and the `DIAGNOSED_DIMENSIONS` largest dimensions of the raw inputs the probe's MLP reads at
    initialisation (mean pooling), with ``std_over_rms``: how much each varies with the input (0 = the same for
    every input)."""
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

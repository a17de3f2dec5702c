"""The causal LMs among a run's models, the rows of theirs the claims read, and where notebook 08 shows them.

A claim's verdict is read on the encoders; causal LMs get a line of their own under it, read by the same rule.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from papa.core.run_folder import RunFolder
from papa.core.vocabulary import DECODER_LAYOUT

DECODER_EVIDENCE = {**dict.fromkeys(("fig2_half", "fig2_all", "fig6"),
                                    RunFolder.figure_file("decoder_objective_vs_probes")),
                    "fig5": RunFolder.figure_file("decoder_lm_selection")}
DECODER_NOTEBOOK = "08_decoders"


def in_layout(results: pd.DataFrame, layout: str) -> pd.Series:
    """Rows made in `layout`, and every causal LM's row (a causal LM always reads left-aligned inputs)."""
    return (results["layout"] == layout) | results["model"].isin(decoder_models(results))


def decoder_models(results: pd.DataFrame) -> set[str]:
    """The causal LMs among `results`' models: by their local config, else by rows only in the decoder layout."""
    from papa.method.models import is_causal_model

    layouts = results.groupby("model")["layout"].agg(set)
    return {model for model, used in layouts.items()
            if (causal := is_causal_model(model)) or (causal is None and used == {DECODER_LAYOUT})}


def with_probe_inputs(results: pd.DataFrame, probe_inputs: str | None) -> pd.Series:
    """Rows whose probe read `probe_inputs` (None: each model's default); a task without a probe reads them raw."""
    from papa.probing.standardize import probe_inputs_for
    from papa.tasks.registry import get_task

    decoders = decoder_models(results)
    trains = {task: get_task(task).trains_probe for task in set(results["task"])}
    wanted = [probe_inputs_for(model in decoders, probe_inputs if trains[task] else None,
                               trains_probe=trains[task]) for model, task in zip(results["model"], results["task"])]
    return pd.Series(np.asarray(wanted, dtype=object) == results["probe_inputs"].to_numpy(), index=results.index,
                     dtype=bool)

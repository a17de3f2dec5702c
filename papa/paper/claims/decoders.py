"""The causal LMs (notebook 08): which of a run's models are decoders, which of their rows the claims read, and
where notebook 08 shows each claim's decoder line.

The paper's claims are about encoders: each claim's verdict is read on the encoders' rows only. Causal LMs (beyond the
paper, notebook 08) get a line of their own under each claim they ran (`ClaimReading.decoder`,
`papa.paper.claims.reading.read_claims`), read by the same rule, never part of the encoders' verdict.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from papa.core.run_folder import RunFolder
from papa.core.vocabulary import DECODER_LAYOUT


# Where a claim read on the causal LMs is seen: notebook 08 and its figures.
DECODER_EVIDENCE = {"fig2_half": RunFolder.figure_file("decoder_objective_vs_probes"),
                    "fig2_all": RunFolder.figure_file("decoder_objective_vs_probes"),
                    "fig5": RunFolder.figure_file("decoder_lm_selection"),
                    "fig6": RunFolder.figure_file("decoder_objective_vs_probes")}
DECODER_NOTEBOOK = "08_decoders"


def in_layout(results: pd.DataFrame, layout: str) -> pd.Series:
    """Rows made in `layout`, and the rows of causal LMs (`decoder_models`): a profile's layout applies to encoders,
    while a causal LM always reads left-aligned inputs (`papa.method.layout.layout_for`)."""
    return (results["layout"] == layout) | results["model"].isin(decoder_models(results))


def decoder_models(results: pd.DataFrame) -> set[str]:
    """The causal LMs among `results`' models: from the model's local config where it is on this machine, else
    from its rows (a causal LM runs in the decoder layout only)."""
    from papa.method.models import is_causal_model

    layouts = results.groupby("model")["layout"].agg(set)
    return {model for model, used in layouts.items()
            if (causal := is_causal_model(model)) or (causal is None and used == {DECODER_LAYOUT})}


def with_probe_inputs(results: pd.DataFrame, probe_inputs: str | None) -> pd.Series:
    """Rows whose probe read `probe_inputs`, or (None) each model's default (`decoder_models` read standardised
    inputs); a task without a probe reads its inputs raw whatever was asked."""
    from papa.probing.standardize import probe_inputs_for
    from papa.tasks.registry import get_task

    decoders = decoder_models(results)
    trains = {task: get_task(task).trains_probe for task in set(results["task"])}
    wanted = [probe_inputs_for(model in decoders, probe_inputs if trains[task] else None,
                               trains_probe=trains[task]) for model, task in zip(results["model"], results["task"])]
    return pd.Series(np.asarray(wanted, dtype=object) == results["probe_inputs"].to_numpy(), index=results.index,
                     dtype=bool)

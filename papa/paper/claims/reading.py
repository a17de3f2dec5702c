"""Reading a run: `read_claims` reads every claim in the paper's order, the encoders' rows and the causal LMs'
apart; `run_claims` and `profile_claims` read a run (its folder, or its tables read once: `RunTables`)."""
from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from pathlib import Path

import pandas as pd

from papa.core.vocabulary import DEFAULT_DTYPE
from papa.paper.claims.alternative_matrices import read_table1
from papa.paper.claims.constant_patterns import pattern_readings
from papa.paper.claims.data_dependence import read_table2
from papa.paper.claims.decoders import DECODER_EVIDENCE, DECODER_NOTEBOOK, decoder_models
from papa.paper.claims.head_selection import comparison_table, read_fig5, selection_comparisons
from papa.paper.claims.main_results import read_fig2_all, read_fig2_half, read_fig3
from papa.paper.claims.mlm_electra import read_fig6
from papa.paper.claims.rules import ClaimReading
from papa.paper.claims.run_tables import RunLike, RunTables
from papa.paper.claims.scores import ClaimRun
from papa.paper.paper_numbers import CLAIMS
from papa.paper.sections import split_learning


def read_claims(run: RunTables) -> list[ClaimReading]:
    """Every claim of `papa.paper.paper_numbers.CLAIMS`, in the paper's order, read on the encoders' rows of the
    run's results, with the causal LMs' rows read apart as each claim's `decoder` line; Fig. 4 described from the
    run's patterns and intervals (task -> `papa.paper.patterns.head_patterns`,
    `papa.paper.pattern_intervals.pattern_share_intervals`).

    Tasks whose probe does not beat its majority baseline (`RunTables.learns`, `papa.paper.sections.probes_learn`)
    are left out: whatever the attention, such a probe cannot tell one attention matrix from another. Where the run
    has a folder, runs' stored predictions add the evaluation set's uncertainty. A λ ranking is read only where its
    pairs of draws (`RunTables.agreement`) pass the gate (`papa.runs.stability.gate_reason`); the chance levels put
    drops on a scale from chance."""
    encoder_run, decoder_run = claim_runs(run)
    decoders = not decoder_run.results.empty
    readers = {"fig2_half": read_fig2_half, "fig2_all": read_fig2_all, "fig3": read_fig3, "table1": read_table1,
               "table2": read_table2, "fig5": read_fig5, "fig6": read_fig6}
    readings = pattern_readings(dict(run.patterns), dict(run.intervals))
    for claim, read in readers.items():
        reading = read(encoder_run)
        if decoders:
            theirs = read(decoder_run)
            if theirs.ran:
                reading = replace(reading, decoder=replace(theirs, notebook=DECODER_NOTEBOOK,
                                                           evidence=DECODER_EVIDENCE.get(claim, theirs.evidence)))
        readings.append(reading)
    order = list(CLAIMS)
    return sorted(readings, key=lambda r: order.index(r.claim))


def claim_runs(run: RunTables) -> tuple[ClaimRun, ClaimRun]:
    """The encoders' rows of `run` and the causal LMs' as the claims read them."""
    results, left_out = split_learning(run.results, run.learns)
    decoders = decoder_models(results) if len(results) else set()
    is_decoder, left_decoder = results["model"].isin(decoders), left_out["model"].isin(decoders)
    return (ClaimRun(results[~is_decoder], run.folder, run.agreement, run.chance, left_out=left_out[~left_decoder]),
            ClaimRun(results[is_decoder], run.folder, run.agreement, run.chance, decoders=True,
                     left_out=left_out[left_decoder]))


def run_claims(run: RunLike, *, profile: str | None = None, layout: str | None = None,
               dtype: str | None = None, probe_inputs: str | None = None) -> list[ClaimReading]:
    """`read_claims` on a run (its folder, or its tables read once: `RunTables`), keeping the rows of `profile`,
    `layout` and `dtype` when given (a folder may hold several runs' rows), and those whose probe read its inputs as
    `probe_inputs` (`RunTables.rows`); computed once per read of the run (`RunTables.remembered`)."""
    tables = RunTables.of(run)
    return list(tables.remembered(("claims", profile, layout, dtype, probe_inputs), lambda: read_claims(
        tables.keeping(tables.rows(profile, layout, dtype, probe_inputs)))))


def profile_selection_comparisons(run: RunLike, profile: str | Path) -> pd.DataFrame:
    """Every comparison Fig. 5's claim counts on the encoders a run of `profile` ran (rows as `profile_claims`
    reads them), as `papa.paper.claims.head_selection.comparison_table` lays them out: what Fig. 5 draws."""
    from papa.runs.profiles import get_profile

    prof = get_profile(profile)
    tables = RunTables.of(run)
    encoders, _ = claim_runs(tables.keeping(tables.rows(prof.name, prof.layout, DEFAULT_DTYPE)))
    return comparison_table(selection_comparisons(encoders))


def profile_claims(run: RunLike, profile: str | Path,
                   notebooks: Collection[str] | None = None) -> list[ClaimReading]:
    """`run_claims` on the rows a run of `profile` (a name or a profile file) made in its layout at float32, the
    precision the notebooks run at; only the claims of `notebooks` (names such as "02_main_results") when given: a
    claim whose decoder line notebook 08 computes belongs to it too."""
    from papa.runs.profiles import get_profile

    prof = get_profile(profile)
    readings = run_claims(run, profile=prof.name, layout=prof.layout, dtype=DEFAULT_DTYPE)
    return [r for r in readings if notebooks is None or r.notebook in notebooks
            or (r.decoder is not None and r.decoder.notebook in notebooks)]

"""Reading a run: `read_claims` reads every claim in the paper's order, the encoders' rows and the causal LMs'
apart; `run_claims` and `profile_claims` read a run's output folder (its results, tables and λ rankings)."""
from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace
from pathlib import Path

import pandas as pd

from papa.core.run_folder import RunFolder
from papa.core.vocabulary import DEFAULT_DTYPE
from papa.paper.claims.alternative_matrices import read_table1
from papa.paper.claims.constant_patterns import pattern_readings
from papa.paper.claims.data_dependence import read_table2
from papa.paper.claims.decoders import (DECODER_EVIDENCE, DECODER_NOTEBOOK, decoder_models, in_layout,
                                        with_probe_inputs)
from papa.paper.claims.head_selection import comparison_table, read_fig5, selection_comparisons
from papa.paper.claims.main_results import read_fig2_all, read_fig2_half, read_fig3
from papa.paper.claims.mlm_electra import read_fig6
from papa.paper.claims.rules import ClaimReading
from papa.paper.claims.scores import ClaimRun, agreement_pairs
from papa.paper.paper_numbers import CLAIMS
from papa.paper.sections import CHANCE_TABLES, LEARNS_TABLES, RANKING_STABILITY_TABLES, split_learning


def read_claims(results: pd.DataFrame, patterns: dict[str, pd.DataFrame] | None = None,
                learns: pd.DataFrame | None = None, *, out_dir: str | Path | None = None,
                stability: pd.DataFrame | None = None, chance: pd.DataFrame | None = None,
                intervals: dict[str, pd.DataFrame] | None = None) -> list[ClaimReading]:
    """Every claim of `papa.paper.paper_numbers.CLAIMS`, in the paper's order, read on the encoders' rows of
    `results` (a results table, `papa.runs.results.ResultsTable.read`), with the causal LMs' rows read apart as each
    claim's `decoder` line; Fig. 4 described from `patterns` (task -> `papa.paper.patterns.head_patterns`) and
    `intervals` (task -> `papa.paper.pattern_intervals.pattern_share_intervals`).

    With `learns` (`papa.paper.sections.probes_learn`), tasks whose probe does not beat its majority baseline are
    left out: whatever the attention, such a probe cannot tell one attention matrix from another. With `out_dir`,
    runs' stored predictions add the evaluation set's uncertainty. A λ ranking is read only where `stability`
    (model, task, spearman) has its row at ρ ≥ `STABLE_RHO`; `chance` (model, task, chance) puts drops on a scale
    from chance."""
    encoder_run, decoder_run = claim_runs(results, learns, out_dir, stability, chance)
    decoders = not decoder_run.results.empty
    readers = {"fig2_half": read_fig2_half, "fig2_all": read_fig2_all, "fig3": read_fig3, "table1": read_table1,
               "table2": read_table2, "fig5": read_fig5, "fig6": read_fig6}
    readings = pattern_readings(patterns or {}, intervals or {})
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


def claim_runs(results: pd.DataFrame, learns: pd.DataFrame | None, out_dir: str | Path | None,
               stability: pd.DataFrame | None, chance: pd.DataFrame | None) -> tuple[ClaimRun, ClaimRun]:
    """The encoders' rows and the causal LMs' as the claims read them (`read_claims`'s arguments)."""
    results, left_out = split_learning(results, learns)
    decoders = decoder_models(results) if len(results) else set()
    is_decoder, left_decoder = results["model"].isin(decoders), left_out["model"].isin(decoders)
    return (ClaimRun(results[~is_decoder], out_dir, stability, chance, left_out=left_out[~left_decoder]),
            ClaimRun(results[is_decoder], out_dir, stability, chance, decoders=True, left_out=left_out[left_decoder]))


def read_tables(out_dir: str | Path, names: Sequence[str]) -> pd.DataFrame | None:
    """The tables `names` under ``<out_dir>/tables/`` that the run wrote, together (None: none)."""
    tables = [pd.read_csv(path) for name in names if (path := RunFolder.at(out_dir).table(name)).is_file()]
    return pd.concat(tables, ignore_index=True) if tables else None


def run_claims(out_dir: str | Path, *, profile: str | None = None, layout: str | None = None,
               dtype: str | None = None, probe_inputs: str | None = None) -> list[ClaimReading]:
    """`read_claims` on a run's output folder (``results.csv``, ``tables/fig4_patterns_<task>.csv`` and
    ``fig4_pattern_intervals_<task>.csv``, stored predictions, the λ rankings' stability tables, the chance levels),
    keeping the rows of `profile`, `layout` and `dtype` when given (a folder may hold several runs' rows), and those
    whose probe read its inputs as `probe_inputs` (None: as each model's grids do by default,
    `papa.probing.standardize.probe_inputs_for`)."""
    tables = _run_tables(out_dir, profile=profile, layout=layout, dtype=dtype, probe_inputs=probe_inputs)
    return read_claims(tables["results"], tables["patterns"], tables["learns"], out_dir=Path(out_dir),
                       stability=tables["stability"], chance=tables["chance"], intervals=tables["intervals"])


def _run_tables(out_dir: str | Path, *, profile: str | None = None, layout: str | None = None,
                dtype: str | None = None, probe_inputs: str | None = None) -> dict:
    """What `run_claims` reads of a run's output folder, by `read_claims`'s argument names."""
    from papa.runs.results import ResultsTable

    out = RunFolder.at(out_dir)
    results = ResultsTable(out.results).read()
    for column, wanted in (("profile", profile), ("dtype", dtype)):
        if wanted is not None:
            results = results[results[column] == wanted]
    if layout is not None:
        results = results[in_layout(results, layout)]
    results = results[with_probe_inputs(results, probe_inputs)]
    patterns = {path.stem.removeprefix("fig4_patterns_"): pd.read_csv(path, index_col=0)
                for path in sorted(out.tables.glob("fig4_patterns_*.csv"))}
    intervals = {path.stem.removeprefix("fig4_pattern_intervals_"): pd.read_csv(path, index_col=0)
                 for path in sorted(out.tables.glob("fig4_pattern_intervals_*.csv"))}
    return dict(results=results, patterns=patterns, learns=read_learns(out), stability=run_agreement(out),
                chance=read_tables(out, CHANCE_TABLES), intervals=intervals)


def profile_selection_comparisons(out_dir: str | Path, profile: str | Path) -> pd.DataFrame:
    """Every comparison Fig. 5's claim counts on the encoders a run of `profile` ran (rows as `profile_claims`
    reads them), as `papa.paper.claims.head_selection.comparison_table` lays them out: what Fig. 5 draws."""
    from papa.runs.profiles import get_profile

    prof = get_profile(profile)
    tables = _run_tables(out_dir, profile=prof.name, layout=prof.layout, dtype=DEFAULT_DTYPE)
    encoders, _ = claim_runs(tables["results"], tables["learns"], Path(out_dir), tables["stability"], tables["chance"])
    return comparison_table(selection_comparisons(encoders))


def run_agreement(out_dir: str | Path) -> pd.DataFrame | None:
    """Every pair of draws of the run's λ rankings that the claims gate on: the rankings under ``<out_dir>/rankings``
    compared pair by pair (`papa.runs.stability.draw_agreement`), and the seed-to-seed tables notebooks 02 and 08
    wrote (a run whose rankings are elsewhere); None where there is neither."""
    from papa.runs.stability import draw_agreement

    out = RunFolder.at(out_dir)
    tables = [t for t in (draw_agreement(out.rankings) if out.rankings.is_dir() else None,
                          agreement_pairs(read_tables(out, RANKING_STABILITY_TABLES))) if t is not None and not t.empty]
    if not tables:
        return None
    # a pair the folder's files and a notebook's table both hold counts once (at the lower ρ, were they to differ)
    both = pd.concat([t[["model", "task", "profile", "a", "b", "spearman", "heads"]] for t in tables],
                     ignore_index=True)
    return both.groupby(["model", "task", "profile", "a", "b"], dropna=False, sort=False).agg(
        spearman=("spearman", "min"), heads=("heads", "max")).reset_index()


def profile_claims(out_dir: str | Path, profile: str | Path,
                   notebooks: Collection[str] | None = None) -> list[ClaimReading]:
    """`run_claims` on the rows a run of `profile` (a name or a profile file) made in its layout at float32, the
    precision the notebooks run at; only the claims of `notebooks` (names such as "02_main_results") when given: a
    claim whose decoder line notebook 08 computes belongs to it too."""
    from papa.runs.profiles import get_profile

    prof = get_profile(profile)
    readings = run_claims(out_dir, profile=prof.name, layout=prof.layout, dtype=DEFAULT_DTYPE)
    return [r for r in readings if notebooks is None or r.notebook in notebooks
            or (r.decoder is not None and r.decoder.notebook in notebooks)]


def learns_tables(out_dir: str | Path) -> list[str]:
    """The `papa.paper.sections.probes_learn` tables the run in `out_dir` wrote (notebook 02's, notebook 08's), as
    paths relative to it."""
    return [f"tables/{name}.csv" for name in LEARNS_TABLES if RunFolder.at(out_dir).table(name).is_file()]


def read_learns(out_dir: str | Path) -> pd.DataFrame | None:
    """The run's `learns_tables`, together, or None."""
    table = read_tables(out_dir, LEARNS_TABLES)
    return None if table is None else table.set_index(["model", "task"])

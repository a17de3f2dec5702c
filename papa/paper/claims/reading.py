"""Reading a run's claims: each section's readers on the encoders' rows and, apart, on the causal LMs'."""
from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from papa.core.vocabulary import DEFAULT_DTYPE
from papa.paper.claims.decoders import DECODER_EVIDENCE, DECODER_NOTEBOOK, decoder_models
from papa.paper.claims.rules import ClaimReading
from papa.paper.claims.run_tables import RunLike, RunTables
from papa.paper.claims.scores import ClaimRun
from papa.paper.paper_numbers import CLAIMS
from papa.paper.tables import split_learning

#: What reads a section's claims on a run's tables.
Read = Callable[[RunTables], list[ClaimReading]]


def read_each(run: RunTables, readers: Mapping[str, Callable[[ClaimRun], ClaimReading]]) -> list[ClaimReading]:
    """Each claim of `readers` read on the encoders' rows, with the causal LMs' as its `decoder` line; tasks whose
    probe does not beat its majority baseline are left out."""
    encoder_run, decoder_run = run.remembered(("claim_runs",), lambda: claim_runs(run))  # one split for every section
    readings = []
    for claim, read in readers.items():
        reading = read(encoder_run)
        if not decoder_run.results.empty:
            theirs = read(decoder_run)
            if theirs.ran:
                reading = replace(reading, decoder=replace(theirs, notebook=DECODER_NOTEBOOK,
                                                           evidence=DECODER_EVIDENCE.get(claim, theirs.evidence)))
        readings.append(reading)
    return readings


def in_paper_order(readings: Iterable[ClaimReading]) -> list[ClaimReading]:
    """`readings` in the order of `papa.paper.paper_numbers.CLAIMS`."""
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


def run_claims(run: RunLike, read: Read, *, profile: str | None = None, layout: str | None = None,
               dtype: str | None = None, probe_inputs: str | None = None) -> list[ClaimReading]:
    """`read` on a run's rows of `profile`, `layout`, `dtype` and `probe_inputs` where given, once per read of it."""
    tables = RunTables.of(run)
    key = ("claims", read, profile, layout, dtype, probe_inputs)  # the reader itself: two closures never share
    return list(tables.remembered(key, lambda: read(tables.keeping(tables.rows(profile, layout, dtype,
                                                                               probe_inputs)))))


def profile_rows(run: RunLike, profile: str | Path) -> RunTables:
    """The tables of the rows a run of `profile` made in its layout at float32, as the notebooks run it."""
    from papa.runs.profiles import get_profile

    prof = get_profile(profile)
    tables = RunTables.of(run)
    return tables.keeping(tables.rows(prof.name, prof.layout, DEFAULT_DTYPE))


def profile_claims(run: RunLike, profile: str | Path, read: Read,
                   notebooks: Collection[str] | None = None) -> list[ClaimReading]:
    """`run_claims` on a run of `profile` in its layout at float32; only `notebooks`' claims (or decoder lines)."""
    from papa.runs.profiles import get_profile

    prof = get_profile(profile)
    readings = run_claims(run, read, profile=prof.name, layout=prof.layout, dtype=DEFAULT_DTYPE)
    return [r for r in readings if notebooks is None or r.notebook in notebooks
            or (r.decoder is not None and r.decoder.notebook in notebooks)]

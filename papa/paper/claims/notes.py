"""The claims as text: what `papa reproduce` and a notebook's closing cell print, and the notes above them."""
from __future__ import annotations

import textwrap
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from papa.core.run_folder import RunFolder
from papa.core.vocabulary import NONE
from papa.method.selection import parse_selection
from papa.paper.claims.decoders import DECODER_NOTEBOOK, decoder_models
from papa.paper.claims.reading import Read, profile_claims
from papa.paper.claims.rules import GATE, LAMBDA_CLAIMS, ClaimReading
from papa.paper.claims.run_tables import RunLike, RunTables
from papa.paper.claims.scores import part_label
from papa.paper.tables import RANKING_STABILITY_TABLE
from papa.runs.stability import gate_reason, rho_span
from papa.runs.statistics import NOT_READ

#: Where the results of the CPU-scale run are, for a smoke run's readers.
CPU_RUN_RESULTS = ("artifacts/cpu/ (results.csv, tables, figures; its executed notebooks in notebooks/), read claim by "
                   "claim in docs/results.md and the README's \"Results\"")


def smoke_run_note(profile: str | Path) -> str:
    """For a quick-profile run, the sentence printed first above its claims: not a result ("" for other profiles)."""
    from papa.runs.profiles import builtin_base, get_profile

    if builtin_base(profile) != "quick":
        return ""
    prof = get_profile(profile)
    return (f"THIS IS A SMOKE RUN, NOT A RESULT: profile {prof.name} trains on {prof.train_limit} examples per task "
            f"with {len(prof.seeds)} seeds, to show that every section runs; none of its numbers or verdicts is "
            f"evidence for or against the paper. The CPU-scale run's results are in {CPU_RUN_RESULTS} "
            "(`make reproduce PROFILE=cpu` reruns it).")


def smoke_run_first(profile: str | Path, text: str) -> str:
    """`text`, after `smoke_run_note` where `profile` is a smoke run."""
    return " ".join(filter(None, [smoke_run_note(profile), text]))


@dataclass(frozen=True)
class SectionClaims:
    """A section's claims: its notebook, and what reads them on a run's tables."""

    notebook: str
    read: Read

    def text(self, run: RunLike, profile: str | Path) -> str:
        """`section_claims`: what the notebook's closing cell prints."""
        return section_claims(run, profile, self.notebook, self.read)

    def table(self, run: RunLike, profile: str | Path) -> pd.DataFrame:
        """`claim_table` of the notebook's claims: the decoders' rows for notebook 08, the encoders' for every other."""
        table = claim_table(profile_claims(run, profile, self.read, [self.notebook]))
        whose = "decoders" if self.notebook == DECODER_NOTEBOOK else "encoders"
        return table[table.models == whose].reset_index(drop=True)


def section_claims(run: RunLike, profile: str | Path, notebook: str, read: Read) -> str:
    """What a notebook's closing cell prints for the claims `notebook` reads, with the notes above them."""
    tables = RunTables.of(run)
    readings = profile_claims(tables, profile, read, [notebook])
    if not readings:
        return smoke_run_first(profile, f"No claim of the paper is read by {notebook}.")
    models = notebook_models(tables, profile, notebook)
    head = smoke_run_first(profile, profile_uncertainty_note(tables, profile, models))
    if any(r.claim in LAMBDA_CLAIMS for r in readings):
        head += " " + stability_note(tables, models)
    return headed_claims(head, readings, tables.folder)


def claim_table(readings: Sequence[ClaimReading]) -> pd.DataFrame:
    """The comparisons behind `readings`, one row each (tallies spelt out), encoders' and decoders': claim, models,
    part, comparison, estimate and verdict."""
    rows = []
    for reading in readings:
        for whose, read in (("encoders", reading), ("decoders", reading.decoder)):
            for part in read.parts if read is not None else ():
                for member in part.members or (part,):
                    rows.append({"claim": reading.where, "models": whose, "part": part.name,
                                 "comparison": member.name, "estimate": member.numbers, "verdict": member.verdict})
    columns = ["claim", "models", "part", "comparison", "estimate", "verdict"]
    return pd.DataFrame(rows, columns=columns)


def notebook_models(run: RunTables, profile: str | Path, notebook: str) -> set[str]:
    """The models whose claims `notebook` reads on a run of `profile`: causal LMs for notebook 08, else encoders."""
    models = set(run.of_profile(profile).model)
    rows = run.results
    decoders = decoder_models(rows[rows.model.isin(models)]) if models else set()
    return decoders if notebook == DECODER_NOTEBOOK else models - decoders


def headed_claims(head: str, readings: Sequence[ClaimReading], folder: RunFolder | None) -> str:
    """`head` wrapped as a paragraph above `format_claims(readings, folder)`."""
    return "\n".join([textwrap.fill(head, width=116, break_on_hyphens=False), format_claims(readings, folder)])


def profile_uncertainty_note(run: RunLike, profile: str | Path, models: Collection[str] | None = None) -> str:
    """`uncertainty_note` on the rows a run of `profile` made (those of `models`; None: every model's)."""
    run = RunTables.of(run)
    rows = run.of_profile(profile)
    return uncertainty_note(run.folder, rows if models is None else rows[rows.model.isin(set(models))])


def uncertainty_note(folder: RunFolder | None, results: pd.DataFrame) -> str:
    """One sentence on what the claims' intervals hold: the seeds' and the examples' variance, or (no stored
    predictions in `folder`) the seeds' only."""
    from papa.runs.predictions_store import stores_predictions

    drawn = sorted({n for n in set(results["selection"])
                    if n != NONE and parse_selection(n).is_variant and parse_selection(n).profile is None})
    orders = (f" Where a head order was drawn more than once ({', '.join(drawn)}), the intervals of Fig. 2's and "
              "Fig. 5's parts hold the variance over the draws too." if drawn else "")
    if stores_predictions(folder):
        return ("Intervals hold the probe seeds' variance and the evaluation examples' (a bootstrap over them), "
                f"paired by seed.{orders}")
    return (f"No predictions are stored beside the table of these {len(results)} runs: their intervals hold the probe "
            f"seeds' variance only, not the evaluation examples'.{orders}")


def stability_note(run: RunLike, models: Collection[str] | None = None) -> str:
    """One sentence on the λ rankings of `models` (None: all): per task the range of Spearman's ρ over pairs of
    draws, and which the claims do not read."""
    table = RunTables.of(run).agreement
    if table is not None and models is not None:
        table = table[table.model.isin(set(models))]
    if table is None or table.empty:
        return ("The λ rankings' stability was not measured (no second draw of a ranking beside it, no "
                f"{RunFolder.table_file(RANKING_STABILITY_TABLE)}): the parts that rest on them are not read.")
    table = table.assign(profile=table.profile.astype(object).where(table.profile.notna(), ""))
    many = table.model.nunique() > 1
    each, refused = [], []
    for (model, task, profile), pairs in table.groupby(["model", "task", "profile"], sort=False):
        name = part_label(model, task, 2 if many else 1) + (f" ({profile})" if profile else "")
        draws = len(set(pairs.a) | set(pairs.b))
        each.append(f"{name} {rho_span(pairs.spearman.tolist())} ({draws} draws)")
        if gate_reason(pairs, name) is not None:
            refused.append(name)
    tail = (f"; not read where a part rests on them: {', '.join(refused)}." if refused
            else ", every one read.")
    return (f"λ rankings, every pair of draws (seeds and disjoint training parts), Spearman's ρ: {', '.join(each)}"
            f"{tail} {GATE[0].upper() + GATE[1:]}; a ranking with one draw is not read.")


def unread_rankings(run: RunLike, models: Collection[str], profile: str | Path) -> dict[str, str]:
    """Task -> a short note, for each task whose λ ranking of `models` by `profile` the claims do not read."""
    from papa.runs.profiles import get_profile

    table = RunTables.of(run).agreement
    if table is None or table.empty:
        return {}
    table = table[table.model.isin(set(models)) & (table.profile == get_profile(profile).name)]
    notes = {}
    for task, pairs in table.groupby("task", sort=False):
        if gate_reason(pairs, task) is not None:
            draws = len(set(pairs.a) | set(pairs.b))
            notes[task] = (f"its λ ranking is not read: {draws} draws agree at ρ "
                           f"{rho_span(pairs.spearman.tolist())}")
    return notes


def format_claims(readings: Sequence[ClaimReading], folder: RunFolder | None,
                  width: int = 116) -> str:
    """Per claim: where, verdict and sentence; its rule; our numbers and the file, and the decoders' line, wrapped
    at `width` (never inside a path)."""
    lines = []
    for r in readings:
        head = f"  {r.where:<8} {r.verdict_text:<14} "
        indent = " " * 26
        lines.append(textwrap.fill(r.text, width=width, initial_indent=head, subsequent_indent=indent))
        if r.verdict != NOT_READ:
            lines.append(textwrap.fill(f"rule: {r.rule}", width=width, initial_indent=indent,
                                       subsequent_indent=indent + "      "))
        for label, reading in (("ours", r), ("decoders", r.decoder)):
            if reading is None:
                continue
            evidence = Path(folder or ".") / reading.evidence
            missing = "" if evidence.is_file() or reading.verdict == NOT_READ else " (not written)"
            verdict = f"{reading.verdict_text}: " if label == "decoders" else ""
            lines.append(textwrap.fill(f"{label}: {verdict}{reading.ours} -> {evidence}{missing}", width=width,
                                       initial_indent=indent, subsequent_indent=indent + "      ",
                                       break_long_words=False, break_on_hyphens=False))
    return "\n".join(lines)

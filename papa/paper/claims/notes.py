"""The claims as text, every sentence the package writes of them: `format_claims` (what `papa reproduce` prints),
`section_claims` (a notebook's closing cell), and the notes printed above them (a smoke run's warning, what the
intervals hold, how stable the λ rankings are); and the docs' claim pages as Markdown (`claim_by_claim` for
docs/results.md, `results_in_brief` and `in_plain_words` for the README, `decoder_claims` for docs/decoders.md,
`margins_table`)."""
from __future__ import annotations

import textwrap
from collections.abc import Collection, Sequence
from pathlib import Path

import pandas as pd

from papa.core.run_folder import RunFolder
from papa.core.vocabulary import NONE
from papa.method.selection import parse_selection
from papa.paper.claims.decoders import DECODER_NOTEBOOK, decoder_models
from papa.paper.claims.reading import profile_claims
from papa.paper.claims.run_tables import RunLike, RunTables
from papa.paper.claims.rules import GATE, LAMBDA_CLAIMS, MARGIN_SOURCES, RULES, ClaimReading, Part
from papa.paper.claims.scores import part_label
from papa.paper.sections import RANKING_STABILITY_TABLE
from papa.runs.stability import gate_reason, rho_span
from papa.runs.statistics import DOES_NOT_HOLD, HOLDS, INCONCLUSIVE, NOT_INFORMATIVE, NOT_READ, PARTLY_READ


#: Where the results of the CPU-scale run are, for a smoke run's readers.
CPU_RUN_RESULTS = ("artifacts/cpu/ (results.csv, tables, figures, executed notebooks), read claim by claim in "
                   "docs/results.md and the README's \"Results\"")


def smoke_run_note(profile: str | Path) -> str:
    """For a run of the quick profile (or a file based on it), the sentence that comes first wherever its claims are
    printed: its numbers are not results, and where the CPU-scale run's are; "" for any other profile."""
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


def section_claims(run: RunLike, profile: str | Path, notebook: str) -> str:
    """What `papa reproduce` prints for the claims `notebook` reads (verdict, rule, paired numbers, file), with what
    their intervals hold and how stable the λ rankings are; for a notebook's last cell. A smoke run says so first
    (`smoke_run_note`). The run's tables are read once (`RunTables`)."""
    tables = RunTables.of(run)
    readings = profile_claims(tables, profile, [notebook])
    if not readings:
        return smoke_run_first(profile, f"No claim of the paper is read by {notebook}.")
    models = notebook_models(tables, profile, notebook)
    head = smoke_run_first(profile, profile_uncertainty_note(tables, profile, models))
    if any(r.claim in LAMBDA_CLAIMS for r in readings):
        head += " " + stability_note(tables, models)
    return headed_claims(head, readings, tables.folder)


def claim_table(readings: Sequence[ClaimReading]) -> pd.DataFrame:
    """The comparisons behind `readings`, one row each (a tally's members spelt out): the claim, the part of its
    sentence, the comparison, its estimate with the 95% interval (or why it is not read) and the verdict the claim
    counts; the decoders' lines beside the encoders'. What a notebook shows in place of a table of point means."""
    rows = []
    for reading in readings:
        for whose, read in (("encoders", reading), ("decoders", reading.decoder)):
            for part in read.parts if read is not None else ():
                for member in part.members or (part,):
                    rows.append({"claim": reading.where, "models": whose, "part": part.name,
                                 "comparison": member.name, "estimate": member.numbers, "verdict": member.verdict})
    columns = ["claim", "models", "part", "comparison", "estimate", "verdict"]
    return pd.DataFrame(rows, columns=columns)


def section_claim_table(run: RunLike, profile: str | Path, notebook: str) -> pd.DataFrame:
    """`claim_table` of the claims `notebook` reads on the run (those `section_claims` prints): the decoders' rows
    for the decoders' notebook, the encoders' for every other."""
    table = claim_table(profile_claims(run, profile, [notebook]))
    whose = "decoders" if notebook == DECODER_NOTEBOOK else "encoders"
    return table[table.models == whose].reset_index(drop=True)


def notebook_models(run: RunTables, profile: str | Path, notebook: str) -> set[str]:
    """The models whose claims `notebook` reads on a run of `profile`: the causal LMs for the decoders' notebook, the
    encoders for every other."""
    models = set(run.of_profile(profile).model)
    rows = run.results
    decoders = decoder_models(rows[rows.model.isin(models)]) if models else set()
    return decoders if notebook == DECODER_NOTEBOOK else models - decoders


def headed_claims(head: str, readings: Sequence[ClaimReading], folder: RunFolder | str | Path | None) -> str:
    """`head` wrapped as a paragraph above `format_claims(readings, folder)`."""
    return "\n".join([textwrap.fill(head, width=116, break_on_hyphens=False), format_claims(readings, folder)])


def profile_uncertainty_note(run: RunLike, profile: str | Path, models: Collection[str] | None = None) -> str:
    """`uncertainty_note` on the rows a run of `profile` made (those of `models`; None: every model's)."""
    run = RunTables.of(run)
    rows = run.of_profile(profile)
    return uncertainty_note(run.folder, rows if models is None else rows[rows.model.isin(set(models))])


def uncertainty_note(folder: RunFolder | str | Path | None, results: pd.DataFrame) -> str:
    """One sentence on what the intervals of a run's claims hold: the seeds' and the evaluation examples' variance,
    or the seeds' only for a table with no predictions beside it in `folder` (`papa.runs.compare.RunScores`)."""
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
    """One sentence on the run's λ rankings (of `models`; None: every model's): per task (and profile, where
    another's ranking ran) the range of Spearman's ρ over every pair of its draws (`RunTables.agreement`), and which
    the claims do not read (`papa.runs.stability.gate_reason`), or that no pair was measured."""
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
    """Per task whose λ ranking of `models`, learned by `profile`, the claims do not read (`stability_note`'s gate):
    a short note for that task's panel of a figure that draws it, so that no curve of an unread order passes
    unmarked."""
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


def format_claims(readings: Sequence[ClaimReading], folder: RunFolder | str | Path | None,
                  width: int = 116) -> str:
    """Per claim: where in the paper, the verdict and the claim; its rule; then our numbers and the file to look at
    (marked "not written" when the run did not write it), and the decoders' line where causal LMs ran. Lines are
    wrapped at `width`, never inside a path."""
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


# ---- the docs' claim pages, as Markdown ----------------------------------------------------------------------------

#: A short name per claim, for headings and the README.
TITLES = {"fig2_half": "half the heads input-dependent", "fig2_all": "every head constant",
          "fig3": "better models lose more", "fig4_diagonal": "diagonal heads",
          "fig4_special": "heads on [CLS]/[SEP]", "fig4_spread": "rows spread",
          "table1": "average constants vs other matrices", "table2": "another corpus's constants",
          "fig5": "λ ranking vs other head orders", "fig6": "the pretraining objective drops more"}


def _part_line(part: Part) -> str:
    return f"{part.name}: {part.numbers} — *{part.verdict}*"


def _parts(reading: ClaimReading, indent: str = "  ") -> list[str]:
    read = [p for p in reading.parts if p.verdict != NOT_READ]
    unread = [p for p in reading.parts if p.verdict == NOT_READ]
    lines = [f"{indent}* {_part_line(p)}" for p in read]
    lines += [f"{indent}* {p.name}: *not read* ({p.numbers})" for p in unread]
    return lines


def claim_by_claim(readings: Sequence[ClaimReading]) -> str:
    """Per claim: its figure, short name and verdict, the paper's sentence, the rule, each part with its numbers and
    verdict, and the decoders' reading beneath (docs/results.md)."""
    lines = []
    for r in readings:
        lines += [f"**{r.where}, {TITLES[r.claim]}: {r.verdict_text}.** *\"{r.text}\"*", "",
                  f"Rule: {r.rule}. Evidence: `{r.evidence}` (notebook `{r.notebook}`).", ""]
        lines += _parts(r, "")
        if r.decoder is not None:
            d = r.decoder
            lines += [f"* decoders (beyond the paper; notebook `{d.notebook}`, `{d.evidence}`): **{d.verdict_text}**"]
            lines += _parts(d, "  ")
        lines.append("")
    return "\n".join(lines).rstrip()


def margins_table() -> str:
    """Each claim's rule (`RULES`) beside where its margin or threshold comes from (`MARGIN_SOURCES`)."""
    def where(key: str) -> str:  # "fig2_half" -> "Fig. 2", "table1" -> "Table 1"
        name = key.split("_")[0]
        return f"Fig. {name[3:]}" if name.startswith("fig") else f"Table {name[5:]}"

    lines = ["| claim | rule (`papa.paper.claims.RULES`) | margin and where it comes from |", "|---|---|---|"]
    lines += [f"| {where(key)}, {TITLES[key]} | {rule} | {MARGIN_SOURCES[key]} |" for key, rule in RULES.items()]
    return "\n".join(lines)


def results_in_brief(readings: Sequence[ClaimReading]) -> str:
    """One bullet per claim for the README: the verdict, what its parts read, one part that shows the verdict, and
    the decoders' verdict."""
    lines = []
    for r in readings:
        counts = _counts(r.parts)
        line = f"* **{r.where}, {TITLES[r.claim]}: {r.verdict_text}**"
        line += f" ({counts})" if counts else ""
        shows = _showing(r)
        if shows is not None:
            line += f"; e.g. {shows.name}: {shows.numbers}"
        elif r.parts:
            line += f": {r.parts[0].numbers}"
        if r.decoder is not None:
            line += f"; decoders: **{r.decoder.verdict_text}**"
        lines.append(line)
    return "\n".join(lines)


def in_plain_words(readings: Sequence[ClaimReading]) -> str:
    """The README's lead: what the run finds, in plain words, counted over the parts of the paper's claims it reads
    (the encoders'; the decoders' apart): the informative parts by verdict, with those that hold and those that do
    not named, then how many could not have failed (not informative) and how many could not be read."""
    lines = []
    for whose, read in _sides(readings):
        parts = [p for r in read for p in r.parts if p.verdict in _ORDER]
        if not parts:
            continue
        n = {v: sum(p.verdict == v for p in parts) for v in _ORDER}
        tested = len(parts) - n[NOT_READ] - n[NOT_INFORMATIVE]
        line = (f"* **On {whose}**, of the {len(parts)} parts the paper's claims cut into, {tested} could be tested "
                f"and could have failed: {n[HOLDS]} {'holds' if n[HOLDS] == 1 else 'hold'}, {n[DOES_NOT_HOLD]} "
                f"{'does' if n[DOES_NOT_HOLD] == 1 else 'do'} not, {n[INCONCLUSIVE]} "
                f"{'is' if n[INCONCLUSIVE] == 1 else 'are'} inconclusive (the data cannot decide either way); "
                f"{n[NOT_INFORMATIVE]} {'is' if n[NOT_INFORMATIVE] == 1 else 'are'} not informative (their control, "
                "e.g. every head replaced, shows no effect beyond the part's margin, so they could not have failed); "
                f"{n[NOT_READ]} could not be read (the claim-by-claim reading says why).")
        for verdict, words in ((HOLDS, "What holds"), (DOES_NOT_HOLD, "What does not"),
                               (NOT_INFORMATIVE, "Not informative")):
            named = [f"{r.where}: {p.name}" for r in read for p in r.parts if p.verdict == verdict]
            line += f" {words}: {'; '.join(named)}." if named else ""
        lines.append(line)
    return "\n".join(lines)


def in_one_line(readings: Sequence[ClaimReading]) -> str:
    """The README's one-line takeaway: per model kind, whether any informative part of the paper's claims (one that
    could have failed) is contradicted (naming those that are), with the counts of those that hold and those the
    data cannot decide, and how many parts were not informative."""
    sides = []
    for whose, read in _sides(readings):
        parts = [p for r in read for p in r.parts if p.verdict in (HOLDS, INCONCLUSIVE, DOES_NOT_HOLD)]
        idle = sum(p.verdict == NOT_INFORMATIVE for r in read for p in r.parts)
        if not parts and not idle:
            continue
        held, open_ = (sum(p.verdict == v for p in parts) for v in (HOLDS, INCONCLUSIVE))
        against = [f"{r.where}: {p.name}" for r in read for p in r.parts if p.verdict == DOES_NOT_HOLD]
        counts = f"{held} hold, {open_} undecided"
        idle_text = f"; {idle} more could not have failed (not informative)" if idle else ""
        sides.append(f"on {whose}, the data contradict {len(against)} of the {len(parts)} parts this run could test "
                     f"({'; '.join(against)}; {counts}){idle_text}" if against else
                     f"on {whose}, the data contradict none of the {len(parts)} parts this run could test and that "
                     f"could have failed ({counts}){idle_text}")
    if not sides:
        return "**In one line:** this run tested no part of the paper's claims."
    return "**In one line:** " + "; ".join(sides) + "."


def _sides(readings: Sequence[ClaimReading]) -> list[tuple[str, list[ClaimReading]]]:
    """The readings of the encoders and the decoders' readings, each named."""
    return [("the encoder", list(readings)), ("the decoder", [r.decoder for r in readings if r.decoder])]


def _showing(reading: ClaimReading) -> Part | None:
    """The part that shows the claim's verdict (the first with that verdict; a partly read claim's first that
    holds), else the first part read."""
    verdict = HOLDS if reading.verdict == PARTLY_READ else reading.verdict
    read = [p for p in reading.parts if p.verdict != NOT_READ]
    return next((p for p in read if p.verdict == verdict), read[0] if read else None)


#: The order verdicts are counted in.
_ORDER = (HOLDS, INCONCLUSIVE, DOES_NOT_HOLD, PARTLY_READ, NOT_INFORMATIVE, NOT_READ)


def _counts(parts: Sequence[Part]) -> str:
    """e.g. "3 parts: 2 hold, 1 inconclusive"; "" for a claim of one part."""
    if len(parts) < 2:
        return ""
    counts = [(v, sum(p.verdict == v for p in parts)) for v in _ORDER]
    words = {HOLDS: "hold", DOES_NOT_HOLD: "do not hold"}
    return f"{len(parts)} parts: " + ", ".join(f"{n} {words.get(v, v) if n > 1 else v}" for v, n in counts if n)


def decoder_claims(readings: Sequence[ClaimReading]) -> str:
    """The decoders' reading of each claim they ran (docs/decoders.md), part by part."""
    lines = []
    for r in readings:
        if r.decoder is None:
            continue
        lines += [f"* **{r.where}, {TITLES[r.claim]}: {r.decoder.verdict_text}** (`{r.decoder.evidence}`)"]
        lines += _parts(r.decoder, "  ")
    return "\n".join(lines) if lines else "No claim was read on a decoder in this run."

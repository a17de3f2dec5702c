"""The docs' claim pages, written from a stored run so that no number of a claim is typed by hand: the claims
as its readings say them, as Markdown (`claim_by_claim` for docs/results.md, `results_in_brief`, `in_one_line` and
`in_plain_words` for the README, `decoder_claims` for docs/decoders.md, `margins_table`), and the run's own tables
beside them (the curves of each head order as the claims pool them, notebook 08's measurements, the LM probe's
learning curve, the λ rankings' agreement and the paper-protocol answer). docs/gen_measurements.py puts each between
its markers, and a test fails when a committed page differs from what the stored run reads. What the package itself
prints of the claims is `papa.paper.claims.notes`'."""
from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from papa.core.run_folder import RunFolder
from papa.core.vocabulary import PAPER_FRACTIONS
from papa.paper.claims.rules import MARGIN_SOURCES, RULES, ClaimReading, Part
from papa.paper.claims.run_tables import RunLike, RunTables
from papa.paper.tables import METRIC_NAMES, SELECTION_NAMES, TASK_NAMES
from papa.runs.statistics import DOES_NOT_HOLD, HOLDS, INCONCLUSIVE, NOT_INFORMATIVE, NOT_READ, PARTLY_READ

if TYPE_CHECKING:
    import torch

def curve_table(curves: pd.DataFrame, labels: dict[str, str]) -> str:
    """A Markdown table of mean ± 95% interval per (task, selection) row and fraction column, from
    `papa.paper.tables.main_curves`-like frames; `labels` names each row key "task/selection"."""
    fractions = [f for f in PAPER_FRACTIONS if f in set(curves.fraction_label)]
    lines = ["| | " + " | ".join(fractions) + " |", "|---|" + "---|" * len(fractions)]
    for key, label in labels.items():
        task, selection = key.split("/")
        rows = curves[(curves.task == task) & curves.selection.isin([selection, "none"])]
        if rows.empty:
            continue
        cells = []
        for f in fractions:
            at = rows[rows.fraction_label == f]
            if f not in ("1", "0"):
                at = at[at.selection == selection]
            cells.append(_mean_ci(at.iloc[0]) if len(at) else "—")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _mean_ci(row) -> str:
    from papa.paper.tables import format_cell

    ci = row.get("ci95", math.nan)
    ci = ci if isinstance(ci, float) and math.isfinite(ci) and ci != 0 else math.nan
    return format_cell(row["mean"], ci, orders=row.get("orders", 1))


#: What a cell of `orders_table` is, said under every such table.
ORDERS_NOTE = ("Each cell: the mean over seeds ± the half-width of a 95% t-interval over them; where an order was "
               "drawn more than once (k orders), the mean of its k draws' means, as the claims pool them, ± the "
               "interval the claims give that mean (the seeds' variance and the spread of the k draws); a cell that "
               "names no orders is one order (one ranking or permutation, as the paper draws it). "
               "The claims' own intervals of their differences (paired by seed, with the evaluation examples' "
               "bootstrap and the orders' spread) are in the claim-by-claim section.")


def orders_table(run: RunLike, model: str, rows: Sequence[tuple[str, str]], profile: str,
                 table: str | None = None) -> str:
    """A curve table (`curve_table`) of (task, selection) `rows` of the stored run, each row named from the
    registries and marked where the claims do not read it (a probe that does not learn, an order resting on a λ
    ranking the gate does not pass), with `ORDERS_NOTE` beneath. With `table`, the curves are that table of the run
    as its notebook wrote it (e.g. "fig2_main_results": the numbers the notebook printed, pooled over the draws its
    grid ran); without, every order pooled over every draw the run has (`papa.paper.tables.curves_over_orders`; a
    selection ``lambda@full`` is the full profile's ranking over its draws)."""
    from papa.paper.read_marks import ReadMarks
    from papa.paper.tables import curves_over_orders
    from papa.tasks.registry import get_task

    tables = RunTables.of(run)
    if table is not None:
        curves = pd.read_csv(tables.folder.table(table), dtype={"fraction_label": str})
        curves = curves[(curves.model == model) & (curves.profile == profile)]
    else:
        results = tables.results[(tables.results.model == model) & (tables.results.profile == profile)]
        methods = list(dict.fromkeys(selection for _, selection in rows))
        curves = curves_over_orders(results[results.task.isin({t for t, _ in rows})], methods)
    marks = ReadMarks.of_run(tables, [model], profile)  # the reasons the notebooks' tables and figures give
    labels = {}
    for task, selection in rows:
        method, _, other = selection.partition("@")
        metric = get_task(task).metric
        label = (f"{TASK_NAMES[task]} {METRIC_NAMES.get(metric, metric)}, {SELECTION_NAMES[method]}"
                 + (f" of the {other} profile" if other else ""))
        why = marks.why(model, task, selection)
        label += f" (not read: {why})" if why else ""
        labels[f"{task}/{selection}"] = label
    return curve_table(curves, labels) + "\n\n" + ORDERS_NOTE


def decoder_table(run: RunLike, model: str, tasks: Sequence[str], selections: Sequence[str],
                  profile: str) -> str:
    """Notebook 08's measurements as a table: the LM with its own head per selection method, the LM probe trained
    from scratch, and each downstream probe in λ order (its metric named from the task registry)."""
    from papa.paper.tables import curves_over_orders
    from papa.tasks.registry import get_task

    rows = RunTables.of(run).results
    rows = rows[(rows.model == model) & (rows.profile == profile)]
    lm = curves_over_orders(rows[rows.task == "lm"], list(selections))
    labels = {f"lm/{s}": f"LM −log perplexity, own head, {SELECTION_NAMES[s]} order" for s in selections}
    frames = [lm]
    others = rows[rows.task != "lm"]
    default = others.probe_inputs != "raw"
    frames.append(curves_over_orders(others[default], ["lambda"]))
    labels["lm_probe/lambda"] = "LM −log perplexity, probe trained from scratch"
    for task in tasks:
        metric = get_task(task).metric
        labels[f"{task}/lambda"] = f"{TASK_NAMES[task]}, {METRIC_NAMES.get(metric, metric)}, λ order"
    return curve_table(pd.concat(frames, ignore_index=True), labels) + "\n\n" + ORDERS_NOTE


def lm_probe_curve(folder: RunFolder | str | os.PathLike) -> str:
    """The LM probe's learning curve as notebook 08 wrote it (``tables/decoder_lm_probe_curve.csv``), beside the
    strongest predictor that needs no model and the probe's own tokens' unigram (``decoder_chance_levels``)."""
    from papa.paper.claims import read_tables

    folder = RunFolder.at(folder)
    curve, chance = (read_tables(folder, [name]) for name in ("decoder_lm_probe_curve", "decoder_chance_levels"))
    if curve is None or curve.empty:
        return "No learning curve of the LM probe in this run (its profile draws none)."
    lines = ["| training paragraphs | LM probe, −log perplexity (nats) |", "|---|---|"]
    for row in curve.sort_values("train_examples").itertuples():
        lines.append(f"| {row.train_examples:,} | {row.mean:.3f} ± {row.ci95:.3f} ({row.n} seeds) |")
    if chance is not None and "lm_probe" in set(chance.task):
        level = chance[chance.task == "lm_probe"].iloc[0]
        lines += ["", f"The strongest predictor that needs no model scores {level.context_free:.3f} nats "
                      f"({level.context_free_how}); the unigram of the probe's own training tokens at the grid's size "
                      f"{level.same_tokens:.3f} ({level.same_tokens_how})."]
    return "\n".join(lines)


def paper_steps_ranking(folder: RunFolder | str | os.PathLike, model: str, task: str,
                        reference: str | None = None) -> str:
    """The λ ranking learned as the paper learns it (`reference`'s; None: the full profile's,
    `papa.sections.head_selection.PAPER_STEPS_PROFILE`)
    from the tables notebook 06 wrote (``lambda_settling_<task>``, ``lambda_rankings_agreement_<task>``): its steps and
    time, where it settled, its curve every ~1,000 steps, and how the profile's own rankings agree with it."""
    from papa.paper.grids import saved_ranking_path
    from papa.sections.head_selection import AGREEMENT_FRACTIONS, PAPER_STEPS_PROFILE
    from papa.paper.tables import short_model
    from papa.probing.convergence import SETTLED_RHO, settled_at

    reference = reference or PAPER_STEPS_PROFILE
    folder = RunFolder.at(folder)
    settling_file = folder.table(f"lambda_settling_{task}")
    agreement_file = folder.table(f"lambda_rankings_agreement_{task}")
    if not (settling_file.is_file() and agreement_file.is_file()):
        return (f"Not learned in this run: `papa rank --task {task} --profile {reference}` learns it, and "
                "notebook 06 then writes its tables.")
    from papa.method.rankings import load_ranking

    settling, agreement = pd.read_csv(settling_file), pd.read_csv(agreement_file)
    meta = load_ranking(saved_ranking_path(folder, model, task, reference)).metadata
    last = settling.iloc[-1]
    settled = settled_at(settling.to_dict("records"))
    lines = [f"{short_model(model)} on {TASK_NAMES.get(task, task)}: λ learned with the probe on all "
             f"{meta['examples']:,} training examples for {meta['epochs']} epochs at batch 32 and rate "
             f"{meta['learning_rate']:g} ({int(last.step):,} optimizer steps, {last.seconds / 3600:.2f} h of λ learning "
             f"on this machine's two cores, recorded in its curve). "
             + (f"Its ranking stays within Spearman's ρ ≥ {SETTLED_RHO} of the final one from step {settled:,} on."
                if settled is not None else
                f"Its ranking had not stayed within ρ ≥ {SETTLED_RHO} of the final one before its last step."),
             "", "| step | λ spread | ρ with the final ranking | "
             + " | ".join(f"heads kept at {f} in common" for f in AGREEMENT_FRACTIONS) + " |",
             "|---|---|---|" + "---|" * len(AGREEMENT_FRACTIONS)]
    every = max(1, round(1000 / max(int(settling.step.iloc[0]), 1)))
    shown = settling.iloc[list(range(every - 1, len(settling) - 1, every)) + [len(settling) - 1]]
    for row in shown.itertuples(index=False):
        row = row._asdict()
        lines.append(f"| {int(row['step']):,} | {row['lambda_spread']:.4f} | {row['spearman']:.3f} | "
                     + " | ".join(f"{settling.loc[settling.step == row['step'], f'overlap_kept_{f}'].iloc[0]:.2f}"
                                  for f in AGREEMENT_FRACTIONS) + " |")
    lines += ["", "The grid's profile's rankings against it (chance for heads kept in common: the fraction itself):", "",
              f"| ranking | λ steps (examples) | λ spread | Spearman's ρ with the {reference} profile's | "
              + " | ".join(f"heads kept at {f} in common" for f in AGREEMENT_FRACTIONS) + " |",
              "|---|---|---|---|" + "---|" * len(AGREEMENT_FRACTIONS)]
    for row in agreement[agreement.profile != reference].to_dict("records"):
        name = "seed 0 (the grid's)" if (row["seed"], row["part"]) == (0, 0) else \
            f"seed {row['seed']}" if row["part"] == 0 else f"part {row['part']} (disjoint examples)"
        lines.append(f"| {name} | {int(row['steps']):,} ({int(row['examples']):,}) | {row['lambda_spread']:.4f} | "
                     f"{row['spearman']:.3f} | "
                     + " | ".join(f"{row[f'kept_in_common_{f}']:.2f}" for f in AGREEMENT_FRACTIONS) + " |")
    return "\n".join(lines)


def ranking_agreement(rankings_dir: str | Path) -> str:
    """Per model, a table of every task's λ rankings (per profile): Spearman's ρ of each pair of its draws (seeds and
    disjoint training parts, `papa.runs.stability.draw_agreement`) and whether the claims read it
    (`papa.runs.stability.gate_reason`, with the pair that decides it and ρ's 95% interval); then the rankings
    learned once, which the claims do not read."""
    from papa.method.rankings import load_ranking
    from papa.runs.stability import STABLE_RHO, disagrees, draw_agreement, gate_reason, learned_once, rho_text

    table = draw_agreement(rankings_dir)
    pairs = list(dict.fromkeys(f"{a}–{b}" for a, b in zip(table.a, table.b)))
    lines = []
    for model, rows in table.groupby("model", sort=False):
        head = ("| task (profile) | draws | " + " | ".join(pairs)
                + f" | gate (no pair below ρ {STABLE_RHO} beyond its 95% interval) |")
        lines += [f"`{model}`:", "", head,
                  "|---" * (len(pairs) + 3) + "|"]
        for (task, profile), got in rows.groupby(["task", "profile"], sort=False):
            rho = {f"{a}–{b}": r for a, b, r in zip(got.a, got.b, got.spearman)}
            draws = len(set(got.a) | set(got.b))
            low = got.loc[got.spearman.idxmin()]
            if gate_reason(got, task) is None:
                read = f"read (lowest {low.a}–{low.b} {rho_text(low.spearman, low.heads)})"
            else:
                worst = [f"{a}–{b} {rho_text(r, n)}" for a, b, r, n in zip(got.a, got.b, got.spearman, got.heads)
                         if disagrees(r, n)]
                read = "not read: " + (", ".join(worst[:2]) + (" …" if len(worst) > 2 else "") if worst
                                       else "no draw on disjoint data")
            lines.append(f"| {task} ({profile}) | {draws} | "
                         + " | ".join(f"{rho[p]:.2f}" if p in rho else "–" for p in pairs) + f" | {read} |")
        lines.append("")
    once = []
    for path in learned_once(rankings_dir):
        meta = load_ranking(path).metadata
        once.append(f"{meta.get('task')} ({meta.get('profile')}, {str(meta.get('model_name')).split('/')[-1]})")
    if once:
        lines.append("Learned once (no pair to gate on, so not read): " + ", ".join(once) + ".")
    return "\n".join(lines).rstrip().replace("-0.00", "0.00")


def paper_protocol_answer(rankings_dir: str | Path, model: str, tasks: Sequence[str], profile: str = "full") -> str:
    """The plain answer, task by task: is `model`'s λ order a property of the model at the paper's protocol
    (`profile`'s rankings: the whole training set and its draws, `--part 1/2` and `--seed 1`), by every pair of those
    draws read as the claims read them (`papa.runs.stability.disagrees`: ρ's 95% interval against `STABLE_RHO`), how
    many steps its curve took to settle (`papa.probing.convergence.settled_at`), and the minutes of λ learning its
    curve's clock recorded (carried across a resume)."""
    from papa.method.rankings import load_ranking
    from papa.probing.convergence import SETTLED_RHO, settled_at, settling_curve
    from papa.runs.lambda_curves import load_curve
    from papa.runs.stability import draw_agreement, draw_of, rho_text

    table = draw_agreement(rankings_dir)
    table = table[(table.model == model) & (table.profile == profile)]
    lines = [f"| task | draws at the paper's protocol | ρ [95% interval], disjoint halves | ρ, other pairs (seed0: the "
             f"whole set) | "
             f"steps to settle (ρ ≥ {SETTLED_RHO} with the final ranking; minutes of λ learning, by the curve's "
             f"clock) | answer |", "|---|---|---|---|---|---|"]
    for task in tasks:
        got = table[table.task == task]
        draws = sorted(set(got.a) | set(got.b))
        halves = got[(got.a == "part1") & (got.b == "part2")]
        others = got[~((got.a == "part1") & (got.b == "part2"))]
        settle = []
        for path in sorted(Path(rankings_dir, "curves").glob(f"*__{task}__*.safetensors")):
            trace, meta = load_curve(path)
            ranking = load_ranking(Path(rankings_dir) / meta["ranking"]).metadata
            if ranking.get("profile") == profile and ranking.get("model_name") == model:
                at, last = settled_at(settling_curve(trace)), trace.steps[-1]
                settle.append(f"{draw_of(meta['ranking'])}: "
                              + (f"{at:,} of {last:,}" if at is not None else f"not before its last ({last:,})")
                              + f" ({trace.seconds[-1] / 60:.0f} min)")
        answer = _protocol_answer(got, draws, halves, settle)
        pairs = ", ".join(f"{a}–{b} {rho_text(r, n)}" for a, b, r, n in zip(others.a, others.b, others.spearman,
                                                                             others.heads))
        half = f"{rho_text(halves.spearman.iloc[0], halves.heads.iloc[0])}" if len(halves) else "–"
        lines.append(f"| {TASK_NAMES.get(task, task)} | {', '.join(draws) or '–'} | {half} | {pairs or '–'} | "
                     f"{'; '.join(settle) or '–'} | {answer} |")
    return "\n".join(lines)


def profile_agreement(folder: RunFolder | str | os.PathLike, model: str, tasks: Sequence[str], reference: str = "full",
                      other: str = "cpu") -> str:
    """How far `other`'s λ rankings (short-trained) are from `reference`'s (the paper's protocol), task by task:
    Spearman's ρ over every pair of an `other` draw and a `reference` draw, beside each profile's own pairs, so that
    the distance reads against the noise of a draw. Read only: from the rankings saved under `folder`."""
    from papa.method.rankings import load_ranking
    from papa.paper.grids import saved_ranking_path
    from papa.probing.convergence import spearman
    from papa.runs.stability import RANKING_DRAWS, draw_agreement, draw_name, rho_span

    folder = RunFolder.at(folder)

    def draws(task: str, profile: str) -> dict[str, torch.Tensor]:
        paths = {draw_name(seed, part): saved_ranking_path(folder, model, task, profile, seed=seed, part=part)
                 for seed, part in RANKING_DRAWS}
        return {name: load_ranking(path).lambdas for name, path in paths.items() if path.is_file()}

    agreement = draw_agreement(folder.rankings)

    def within(task: str, profile: str) -> list[float]:
        group = saved_ranking_path(folder, model, task, profile).name  # every draw's pairs share its name
        return agreement[agreement.ranking == group].spearman.tolist()

    lines = [f"| task | {other} draws | {reference} draws | ρ within {other} | ρ within {reference} | "
             f"ρ, {other} vs {reference} (every pair) | ρ, seed0 vs seed0 |", "|---|---|---|---|---|---|---|"]
    for task in tasks:
        short, paper = draws(task, other), draws(task, reference)
        across = [spearman(a, b) for a in short.values() for b in paper.values()]
        same = (f"{spearman(short['seed0'], paper['seed0']):.2f}" if "seed0" in short and "seed0" in paper else "–")
        lines.append(f"| {TASK_NAMES.get(task, task)} | {', '.join(short) or '–'} | {', '.join(paper) or '–'} | "
                     f"{rho_span(within(task, other))} | {rho_span(within(task, reference))} | "
                     f"{rho_span(across)} | {same} |")
    return "\n".join(lines).replace("-0.00", "0.00")


def _protocol_answer(got: pd.DataFrame, draws: Sequence[str], halves: pd.DataFrame, settle: Sequence[str]) -> str:
    """For `paper_protocol_answer`: one task's answer from its pairs of draws (`got`), the disjoint halves' pair among
    them: not stable where a pair disagrees beyond ρ's interval, stable where every pair's interval lies above
    `STABLE_RHO`, neither shown where an interval holds it; with the draws still owed."""
    from papa.runs.stability import STABLE_RHO, disagrees, rho_interval, rho_text

    if not draws:
        return "not measured" if not settle else "learned once: no pair to measure"
    pairs = list(zip(got.a, got.b, got.spearman, got.heads))
    if len(halves) and disagrees(halves.spearman.iloc[0], halves.heads.iloc[0]):
        return f"**not stable across data** (disjoint halves below ρ {STABLE_RHO} beyond their interval)"
    against = [f"{a}–{b} at ρ {rho_text(r, n)}" for a, b, r, n in pairs if disagrees(r, n)]
    if against:
        return f"**not stable** ({against[0]}: below {STABLE_RHO} beyond its interval)"
    held = [f"{a}–{b} at ρ {rho_text(r, n)}" for a, b, r, n in pairs if not rho_interval(r, n)[0] >= STABLE_RHO]
    words = "stable" if not held else f"neither shown stable nor unstable ({held[0]}: its interval holds {STABLE_RHO})"
    missing = [what for learned, what in ((len(halves) > 0, "the disjoint halves"), ("seed0" in draws, "the whole set"),
                                          ("seed1" in draws, "a second seed")) if not learned]
    if not missing:
        return f"{words} across data and seed"
    return f"{words} so far; not learned yet: {', '.join(missing)}"


# ---- the claims, read, as Markdown --------------------------------------------------------------------------------

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

    lines = ["| claim | rule (`papa.paper.claims.rules.RULES`) | margin and where it comes from |", "|---|---|---|"]
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

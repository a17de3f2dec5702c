"""The README's first screen (and docs/results.md's head): what the committed run ran, and what it found, each
sentence generated from the run's committed tables and the packaged models' descriptions, no number typed by hand
(`docs/gen_measurements.py` fills the blocks ``what-was-run`` and ``run-found``)."""
from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from papa.core.vocabulary import ELECTRA_BASE, PAPER_BASE, PAPER_LARGE
from papa.method.models import PACKAGED_MODELS
from papa.paper.claims import ClaimReading, RunTables
from papa.paper.paper_numbers import paper_score, relative_drops
from papa.paper.tables import TASK_NAMES, short_model
from papa.runs.profiles import get_profile
from papa.runs.statistics import DOES_NOT_HOLD, HOLDS, INCONCLUSIVE, NOT_INFORMATIVE

#: The paper's seven models (4.1 and 5.5).
PAPER_MODELS = (*PAPER_BASE, *PAPER_LARGE, ELECTRA_BASE)
#: The tasks the first page reports, in the pages' order.
TASKS = ("cola", "sst2", "mrpc", "ner", "pos")


def _count(n: int) -> str:
    return f"{n:,}"


def _tasks_read(run: RunTables, profile: str) -> list[str]:
    rows = run.results[run.results.profile == profile]
    return [t for t in TASKS if t in set(rows.task)]


def _train_sizes(run: RunTables, profile: str) -> str:
    """e.g. "500 (MRPC) to 3,000 (CoLA) training examples per task, of 3,668 to 67,349"."""
    prof = get_profile(profile)
    whole = _whole_training_sets(run)
    sizes = {t: prof.for_task(t).train_limit for t in _tasks_read(run, profile)}
    known = {t: n for t, n in sizes.items() if n is not None}
    if not known:
        return "every training example"
    low, high = min(known, key=known.get), max(known, key=known.get)
    text = (f"{_count(known[low])} ({TASK_NAMES[low]}) to {_count(known[high])} ({TASK_NAMES[high]}) training "
            f"examples per task")
    if whole:
        text += f" (each task's whole training set: {_count(min(whole.values()))} to {_count(max(whole.values()))})"
    return text


def _whole_training_sets(run: RunTables) -> dict[str, int]:
    """Each task's whole training set, as the layout table counted it (``tables/layout_truncation_counts.csv``)."""
    path = run.folder.table("layout_truncation_counts") if run.folder is not None else None
    if path is None or not path.is_file():
        return {}
    table = pd.read_csv(path, index_col=0)
    train = table[(table.split == "train") & table.task.isin(TASKS)]
    return dict(zip(train.task, train.examples.astype(int)))


def what_was_run(run: RunTables, profile: str = "cpu", paper_profile: str = "full") -> str:
    """The models the run ran (whether any is one of the paper's seven) and what kind each is, the profile's sizes
    against the paper's (`paper_profile`), and what the verdicts are therefore about."""
    models = sorted(set(run.results[run.results.profile == profile].model),
                    key=lambda m: (m in PACKAGED_MODELS and PACKAGED_MODELS[m].causal, m))  # encoders first
    paper = [m for m in models if m in PAPER_MODELS]
    prof, theirs = get_profile(profile), get_profile(paper_profile)
    named = ", ".join(short_model(m) for m in PAPER_MODELS)
    head = (f"**What was run.** {'None' if not paper else len(paper)} of the paper's seven models ({named}) "
            f"{'was run' if not paper else 'were run'}; this run's {len(models)} model{'s' if len(models) > 1 else ''}:")
    lines = [head, ""]
    for m in models:
        packaged = PACKAGED_MODELS.get(m)
        kind = packaged.kind if packaged is not None and packaged.kind else "a model given by name"
        lines.append(f"* **{short_model(m)}**: {kind}.")
    corpus = "all" if prof.corpus_limit is None else _count(prof.corpus_limit)
    lines += ["", f"At the `{profile}` profile's sizes: probes trained on {_train_sizes(run, profile)}, "
                  f"{len(prof.seeds)} seeds, constants averaged over {corpus} training inputs, λ learned on "
                  f"{'all' if prof.rank_limit is None else _count(prof.rank_limit)} examples; the paper's (the "
                  f"`{paper_profile}` profile): every training example and Table 3's epochs ({len(theirs.seeds)} seeds). "
                  "Every verdict below is about these models at these sizes. How much a model uses its attention is "
                  "what the paper measures, and fine-tuning an encoder to embed sentences (or instruction-tuning a "
                  "decoder) may change it, for every claim, not only Fig. 6's: a verdict here carries over to the "
                  "paper's models only as far as these resemble them."]
    return "\n".join(lines)


def what_run_found(run: RunTables, readings: Sequence[ClaimReading], profile: str = "cpu") -> str:
    """What the run learned beside the verdicts, one bullet each, from its committed tables: its probes against the
    paper's, its all-heads drop against the paper's, how many claim parts could not have failed, the layout's cuts,
    which λ orders move with their data at the paper's protocol, and which probe never beats its majority class."""
    bullets = [_probes_beside_paper(run), _drop_beside_paper(run, readings), _uninformative(readings),
               _layout_cuts(run), _orders_move(run), _majority_only(run)]
    return "\n".join(f"* {b}" for b in bullets if b)


def _probes_beside_paper(run: RunTables) -> str:
    path = run.folder.table("fig2_main_results")
    curves = pd.read_csv(path, index_col=0, dtype={"fraction_label": str})
    original = curves[curves.fraction_label == "1"].drop_duplicates("task").set_index("task")["mean"]
    pairs = [(t, original[t], paper_score(t)) for t in TASKS if t in original.index and paper_score(t) is not None]
    if not pairs:
        return ""
    text = ", ".join(f"{TASK_NAMES[t]} {ours:.3f} ({theirs:.2f})" for t, ours, theirs in pairs)
    return (f"**Its probes score far below the paper's.** With the original attention: {text} (this run; in brackets "
            "the paper's RoBERTa-base, Table 1; `tables/fig2_main_results.csv` at fraction 1).")


def _drop_beside_paper(run: RunTables, readings: Sequence[ClaimReading]) -> str:
    path = run.folder.table("fig3_performance_vs_drop")
    table = pd.read_csv(path, index_col=0)
    if table.empty:
        return ""
    reading = next((r for r in readings if r.claim == "fig2_all"), None)
    part = next((p for p in (reading.parts if reading else ()) if p.name.startswith("average relative drop")), None)
    paper = float(relative_drops("base")["average"])
    row = table.iloc[0]
    interval, inside = f"{row.relative_drop:.1%}", ""
    if part is not None and part.estimate is not None:
        interval = part.estimate.text(percent=True)
        low, high = part.estimate.interval()
        inside = (f"; the interval holds {paper:.1%}, so the difference is not measured"
                  if low <= paper <= high else f"; the interval excludes {paper:.1%}")
    return (f"**Its weaker model drops less, the direction Fig. 3 predicts.** {short_model(row.model)} (mean original "
            f"score {row.original:.3f} over {int(row.tasks)} tasks) loses {interval} with every head replaced, "
            f"RoBERTa-base {paper:.1%} over the paper's six tasks (Table 1){inside} "
            "(`tables/fig3_performance_vs_drop.csv`; one model: Fig. 3's own test is not read).")


def _uninformative(readings: Sequence[ClaimReading]) -> str:
    tested = (HOLDS, INCONCLUSIVE, DOES_NOT_HOLD, NOT_INFORMATIVE)
    parts = [p for r in readings for p in r.parts if p.verdict in tested]
    idle = [p for p in parts if p.verdict == NOT_INFORMATIVE]
    if not idle:
        return ""
    return (f"**On the encoder, {len(idle)} of the {len(parts)} claim parts tested could not have failed.** Replacing "
            "every head does not cost it measurably more than those parts' margins (their control), so \"no major "
            "drop at 1/2\" or \"another corpus's constants do as well\" would hold whatever its attention does: "
            "they are read as *not informative*, not as confirmations.")


def _layout_cuts(run: RunTables) -> str:
    path = run.folder.table("layout_truncation_counts")
    if not path.is_file():
        return ""
    table = pd.read_csv(path, index_col=0)
    evaluation = table[(table.split == "eval") & table.task.isin(TASKS)]
    if evaluation.empty:
        return ""
    worst = evaluation.loc[evaluation["official cut %"].idxmax()]
    return (f"**The released code's input layout cuts {worst['official cut %']:.1f}% of {TASK_NAMES[worst.task]}'s "
            f"{_count(int(worst.examples))} evaluation examples** at {int(worst.max_length)} tokens "
            f"({worst['sep_last cut %']:.1f}% with [SEP] after the last token); the paper reports trimming under 0.2% "
            "of one task's inputs (MNLI) (`tables/layout_truncation_counts.csv`).")


def _orders_move(run: RunTables, model: str | None = None, profile: str = "full") -> str:
    from papa.runs.stability import disagrees, draw_agreement, rho_text

    rankings = run.folder.rankings
    if not rankings.is_dir():
        return ""
    table = draw_agreement(rankings)
    halves = table[(table.profile == profile) & (table.a == "part1") & (table.b == "part2")]
    if model is not None:
        halves = halves[halves.model == model]
    moved = [(t, r, n) for t, r, n in zip(halves.task, halves.spearman, halves.heads) if disagrees(r, n)]
    if not moved:
        return ""
    text = ", ".join(f"{TASK_NAMES.get(t, t)} (ρ {rho_text(r, n)})" for t, r, n in moved)
    return (f"**λ orders learned at the paper's protocol move with their training data** on {text}: rankings learned "
            "on disjoint halves of the training set disagree beyond ρ's interval, so the paper's single ranking is "
            "partly a property of its data (`rankings/`, Results' agreement tables).")


def _majority_only(run: RunTables) -> str:
    learns = run.learns
    if learns is None or learns.empty:
        return ""
    table = learns.reset_index()
    stuck = table[~table.learns.astype(bool) & table.task.isin(TASKS)]
    if stuck.empty:
        return ""
    text = ", ".join(f"{TASK_NAMES[r.task]} ({r['mean']:.3f} against its majority class's {r.majority:.3f})"
                     for _, r in stuck.iterrows())
    return (f"**Probes that never beat their majority class:** {text}; no claim reads them "
            "(`tables/probes_vs_majority.csv`, the learning curve in `tables/learning_curves.csv`).")

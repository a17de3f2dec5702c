"""Regenerate the measured blocks of the docs from the committed runs that made them, so that no number there is
typed by hand. A unit test (tests/unit/reproduce/test_timings.py) fails when a page and its files differ.

* docs/measurements.md, ``quick-run``: the quick reproduction's reference run (``artifacts/timings/quick/``: the
  run's own notebook_times.csv and reproduction.json);
* docs/performance.md ``feature-store``, ``cpu-recheck``, ``run-options``, ``run-options-bf16-store`` and
  ``gpu-check``, docs/scaling.md ``gpu-estimate``: the committed measurements of the studies beside their records
  and of `make gpu-check` (`docs.performance_pages`);
* README.md ``what-was-run`` and ``run-found``, docs/results.md ``results-what-was-run``: what the committed CPU-scale
  run ran and found (`docs.first_page`);
* docs/results.md ``claims``, README.md ``claims-brief``, ``takeaway`` and ``finding``, docs/decoders.md
  ``decoder-claims``: the paper's claims as the committed CPU-scale run reads them (``artifacts/cpu/``,
  `papa.paper.claims`, rendered by `docs.claim_pages`); docs/results.md ``cpu-notebook-time``, docs/decoders.md ``decoder-table`` and
  ``decoder-lm-probe-curve``: that run's notebook times and notebook 08's measurements; docs/results.md ``table1``,
  ``table2``, ``probes-learn``, ``mrpc-curve``, ``run-rankings``: the tables its notebooks wrote (`docs.result_tables`);
  ``fig2-table``, ``fig5-table``, ``fig6-table``: the curve tables notebooks 02, 06 and 07 wrote, cell for cell;
  ``table1-trained``, ``fig4-paper``, ``fig6-mlm``: where the run departs from the paper, from its tables;
  docs/decoders.md ``decoder-own-head``, ``decoder-fig5``, ``decoder-patterns``: notebook 08's own-head curve, its
  Fig. 5 verdict and its heads' patterns in words, from its tables;
* docs/tests.md, ``test-durations``: where runs of the test suite spent their time (``artifacts/timings/
  test_suite/``, written by docs/test_durations.py from pytest's JUnit report);
* docs/architecture.md, ``modules``: every module of papa/ by layer with the first sentence of its docstring (not a
  measurement, but a fact the code owns, kept from drifting the same way).

    python docs/gen_measurements.py      # or: python -m docs.gen_measurements
"""
from __future__ import annotations

import functools
import json
import re
import textwrap
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from docs import performance_pages as perf
from papa.core.run_folder import RunFolder
from papa.reproduce.timings import REFERENCE_DIR, measurements_block, reference

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
PAGE = DOCS / "measurements.md"
BEGIN, END = "<!-- quick-run: begin -->", "<!-- quick-run: end -->"


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}: begin -->", f"<!-- {name}: end -->"


def fill(page: Path, name: str, block: str) -> None:
    """Replace what lies between `page`'s markers `name` with `block`."""
    begin, end = markers(name)
    text = page.read_text(encoding="utf-8")
    if begin not in text or end not in text:
        raise SystemExit(f"{page} has no {begin} ... {end} block to fill")
    head, rest = text.split(begin, 1)
    tail = rest.split(end, 1)[1]
    page.write_text(f"{head}{begin}\n{block}\n{end}{tail}", encoding="utf-8")


def quick_block(reference_dir: Path = REFERENCE_DIR, profile: str = "quick") -> str:
    expected = reference(profile, reference_dir)
    if expected is None:
        raise SystemExit(f"no reference run of profile {profile} in {reference_dir}: copy notebook_times.csv and "
                         "reproduction.json of a run from an empty folder there")
    return measurements_block(expected)


CPU_RUN = REPO / "artifacts" / "cpu"
DECODER = ("SmolLM2-135M-Instruct-Q4_1", ("sst2", "pos"), ("lambda", "random", "first_to_last"))


@functools.lru_cache(maxsize=None)
def cpu_run():
    """The committed CPU-scale run's tables, read once: every block below reads this one `RunTables`."""
    from papa.paper.claims import RunTables

    return RunTables.read(CPU_RUN)


def cpu_claims() -> tuple:
    """The paper's claims as the committed CPU-scale run reads them (computed once per process, on `cpu_run`'s one
    read: it resamples)."""
    from papa.sections.registry import profile_claims

    return tuple(profile_claims(cpu_run(), "cpu"))


def _relative(text: str) -> str:
    return text.replace(f"{REPO.as_posix()}/", "")


def claims_block() -> str:
    from docs.claim_pages import claim_by_claim
    from papa.paper.claims import profile_uncertainty_note, stability_note

    head = " ".join([profile_uncertainty_note(cpu_run(), "cpu"), stability_note(cpu_run())])
    return _relative(f"{head}\n\n{claim_by_claim(cpu_claims())}")


def brief_block() -> str:
    from docs.claim_pages import results_in_brief

    return results_in_brief(cpu_claims())


def takeaway_block() -> str:
    from docs.claim_pages import in_one_line

    return in_one_line(cpu_claims())


def finding_block() -> str:
    from docs.claim_pages import in_plain_words

    return in_plain_words(cpu_claims())


def lm_probe_curve_block() -> str:
    from docs.claim_pages import lm_probe_curve

    return lm_probe_curve(CPU_RUN)


def decoder_claims_block() -> str:
    from docs.claim_pages import decoder_claims

    return decoder_claims(cpu_claims())


def decoder_own_head_block() -> str:
    """The LM with the decoder's own frozen head, described from the committed run (not a part of Fig. 6's claim)."""
    from papa.sections.decoders import own_head_description

    return own_head_description(cpu_run(), "cpu")


def decoder_fig5_block() -> str:
    """Fig. 5's verdict on the committed run's decoder in words."""
    from papa.sections.decoders import fig5_explanation

    return fig5_explanation(cpu_run(), "cpu")


def decoder_table_block() -> str:
    from docs.claim_pages import decoder_table

    model, tasks, selections = DECODER
    return decoder_table(cpu_run(), model, tasks, selections, "cpu")


def probe_inputs_block() -> str:
    """Standardised − raw probe inputs on the encoder, paired by seed (`papa report --compare probe_inputs raw
    standardized` on the committed run), each task's metric named from the registry."""
    from papa.paper.tables import METRIC_NAMES, TASK_NAMES
    from papa.runs.compare import compare
    from papa.tasks.registry import get_task

    rows = cpu_run().results
    rows = rows[(rows.profile == "cpu") & (rows.model == "sentence-transformers/all-MiniLM-L6-v2")]
    table = compare(rows, "probe_inputs", "raw", "standardized", folder=RunFolder.at(CPU_RUN))
    table = table[table.constants.isin(["none", "average"]) & table.selection.eq("none")]
    lines = ["| task (metric) | at 1 | at 0 (every head constant) | smallest detectable at 1 / at 0 |",
             "|---|---|---|---|"]
    for task in ("sst2", "cola", "pos", "ner", "mrpc"):
        at = {r.fraction_label: r for r in table[table.task == task].itertuples()}
        if not {"1", "0"} <= set(at):
            continue
        cells = [f"{at[f].difference:+.3f} [{at[f].low:+.3f}, {at[f].high:+.3f}]" for f in ("1", "0")]
        lines.append(f"| {TASK_NAMES[task]} ({METRIC_NAMES[get_task(task).metric]}) | {cells[0]} | {cells[1]} | "
                     f"{at['1'].detectable:.3f} / {at['0'].detectable:.3f} |")
    return "\n".join(lines).replace("-", "−").replace("|−−−|", "|---|").replace("−−−", "---")


ENCODER = ("sentence-transformers/all-MiniLM-L6-v2", ("cola", "sst2", "ner", "pos", "mrpc"))
FIG5_ORDERS = ("lambda", "lambda@full", "first_to_last", "last_to_first", "random", "reversed_lambda",
               "reversed_lambda@full")


def what_was_run_block() -> str:
    """The README's first screen and Results' head: the models the committed run ran and its sizes beside the
    paper's (`docs.first_page`)."""
    from docs.first_page import what_was_run

    return what_was_run(cpu_run())


def run_found_block() -> str:
    """What the committed run learned beside the verdicts, each from its tables (`docs.first_page`)."""
    from docs.first_page import what_run_found

    return what_run_found(cpu_run(), cpu_claims())


def fig2_table_block() -> str:
    """Fig. 2's curves of the committed run, λ pooled over its draws where the claims pool them."""
    from docs.claim_pages import orders_table

    model, tasks = ENCODER
    return orders_table(cpu_run(), model, [(t, "lambda") for t in tasks], "cpu", table="fig2_main_results")


def fig5_table_block() -> str:
    """Fig. 5's SST-2 curves of the committed run, every order pooled over its draws, the full profile's λ beside."""
    from docs.claim_pages import orders_table

    return orders_table(cpu_run(), ENCODER[0], [("sst2", s) for s in FIG5_ORDERS], "cpu", table="fig5_head_selection")


def table1_block() -> str:
    """Table 1 as the committed run wrote it, beside the paper's."""
    from docs.result_tables import alternatives_table

    return alternatives_table(CPU_RUN, "cpu")


def table2_block() -> str:
    from docs.result_tables import data_dependence_table

    return data_dependence_table(CPU_RUN)


def probes_learn_block() -> str:
    from docs.result_tables import learns_table

    return learns_table(cpu_run())


def mrpc_curve_block() -> str:
    from docs.result_tables import learning_curve_table

    return learning_curve_table(cpu_run())


def run_rankings_block() -> str:
    from docs.result_tables import ranking_stability_table

    return ranking_stability_table(cpu_run())


def margins_block() -> str:
    from docs.claim_pages import margins_table

    return margins_table()


def fig6_table_block() -> str:
    """Fig. 6's curves of the committed run on the encoder: the MLM probe beside SST-2, in λ order."""
    from docs.claim_pages import orders_table

    return orders_table(cpu_run(), ENCODER[0], [("mlm", "lambda"), ("sst2", "lambda")], "cpu", table="fig6_mlm")


def lambda_full_block() -> str:
    """SST-2's λ ranking learned as the paper learns it, from the tables notebook 06 wrote in the committed run."""
    from docs.claim_pages import paper_steps_ranking

    return paper_steps_ranking(CPU_RUN, "sentence-transformers/all-MiniLM-L6-v2", "sst2")


def ranking_agreement_block() -> str:
    """Every pair of draws of the committed run's λ rankings, per task, and which the claims read."""
    from docs.claim_pages import ranking_agreement

    return ranking_agreement(cpu_run().folder.rankings)


def paper_protocol_block() -> str:
    """Per task of the cpu run's encoder, whether its λ order is a property of the model: its λ order at the paper's
    protocol, by every pair of the full profile's draws at the claims' gate, and the steps each curve took to settle."""
    from docs.claim_pages import paper_protocol_answer

    return paper_protocol_answer(cpu_run().folder.rankings, "sentence-transformers/all-MiniLM-L6-v2",
                                 ("cola", "sst2", "mrpc", "ner", "pos"))


def profile_agreement_block() -> str:
    """How far the cpu profile's short-trained λ rankings are from the paper-protocol ones."""
    from docs.claim_pages import profile_agreement

    return profile_agreement(CPU_RUN, "sentence-transformers/all-MiniLM-L6-v2", ("cola", "sst2", "mrpc", "ner", "pos"))


def draws_time_block() -> str:
    """What drawing the head orders again cost in the committed run: the runs of the draws (their rows' run time) and
    the λ rankings learned for them (their learning curves' seconds)."""
    from papa.method.rankings import load_ranking
    from papa.method.selection import parse_selection
    from papa.runs.lambda_curves import load_curve

    rows = cpu_run().results
    parsed = rows.selection.map({n: None if n == "none" else parse_selection(n) for n in rows.selection.unique()})
    variant = parsed.map(lambda p: p is not None and p.is_variant)
    other_profile = parsed.map(lambda p: p is not None and p.profile is not None)
    drawn, read = rows[variant & ~other_profile], rows[other_profile]
    # the draws the cpu run made, not the rankings learned at the paper's protocol (profile full)
    rankings = cpu_run().folder.rankings
    curves = [curve for curve, meta in map(load_curve, sorted((rankings / "curves").glob("*.safetensors")))
              if "-part" in meta["ranking"]
              and load_ranking(rankings / meta["ranking"]).metadata.get("profile") == "cpu"]
    if drawn.empty:
        return "No head order was drawn again in this run."
    minutes = drawn.runtime_s.sum() / 60
    learned = sum(c.seconds[-1] for c in curves) / 60
    return (f"The draws: {len(drawn)} runs ({drawn.selection.nunique()} selections on "
            f"{drawn.task.nunique()} tasks), {minutes:.1f} minutes of probe training and evaluation (their rows' run "
            "time, without the forward passes each point shares), and "
            f"{len(curves)} λ rankings on disjoint training parts, {learned:.0f} minutes of λ learning (their "
            f"curves' seconds), on this machine's two cores; besides, {len(read)} runs of the full profile's "
            f"ranking, {read.runtime_s.sum() / 60:.1f} minutes of probe training and evaluation.")


def notebook_time_block() -> str:
    from papa.reproduce.timings import notebook_time

    return _relative(notebook_time(RunFolder.at(CPU_RUN)))


def test_durations_block() -> str:
    from docs.test_durations import (
        block,  # as a module: this file re-runs itself so when run as a file
    )

    return block()


def own_model_block(folder: Path = REPO / "artifacts" / "own_model") -> str:
    """docs/own-model.md's times: each committed run of `papa reproduce --models` on a model in a folder, from its
    record (`reproduction.json`) and its notebooks' times."""
    import pandas as pd

    from papa.reproduce.timings import read_run

    rows = ["| run | notebooks (seconds each) | probe runs | in all |", "|---|---|---|---|"]
    machine = None
    for run in sorted(p for p in folder.iterdir() if (p / "notebook_times.csv").is_file()):
        times = pd.read_csv(run / "notebook_times.csv")
        each = ", ".join(f"{name[:2]} {seconds:.0f}" for name, seconds in zip(times.notebook, times.seconds))
        results = pd.read_csv(run / "results.csv") if (run / "results.csv").is_file() else pd.DataFrame()
        if (run / "reproduction.json").is_file():  # the batch finished and recorded itself
            record = read_run(run / "reproduction.json")
            machine = record["machine"]
            what, total = f"`{record['command']}`", f"{record['seconds'] / 60:.1f} min"
        else:
            what = (f"`artifacts/own_model/{run.name}`: stopped after {times.notebook.iloc[-1]} (its command run "
                    "again resumes it)")
            total = f"{times.seconds.sum() / 60:.1f} min of notebooks so far"
        rows.append(f"| {what} | {each} | {len(results)} | {total} |")
    where = "" if machine is None else f"On {machine['cpu']} with {machine['cores']} cores, torch {machine['torch']}; "
    return "\n".join(rows) + (f"\n\n{where}records in `artifacts/own_model/<run>/` (`notebook_times.csv`, "
                               "`results.csv`, and `reproduction.json` once a batch finishes).")


#: The layers from the top (`tests/unit/test_layering.py` has them from the bottom).
_LAYERS_DOWN = ("cli", "reproduce", "sections", "paper", "runs", "probing", "tasks", "method", "core")


def _first_sentence(path: Path) -> str:
    import ast

    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    para = " ".join(doc.split("\n\n")[0].split())
    cut = re.search(r"\.\s+(?=[A-Z`*])", para)  # not "Fig. 4" nor "e.g. the"
    return (para if cut is None else para[:cut.start() + 1]).replace("|", "\\|")


def modules_block() -> str:
    """docs/architecture.md's table: every module of papa/ by layer, top down, with its docstring's first sentence
    (the module owns what it says it does)."""
    rows = ["| layer | module | its job |", "|---|---|---|"]
    for layer in _LAYERS_DOWN:
        if layer == "cli":
            paths = [REPO / "papa" / "cli.py"]
        else:
            top = REPO / "papa" / layer  # its own modules, then each subpackage's (its __init__ first)
            paths = sorted(top.rglob("*.py"), key=lambda p: (p.parent != top, str(p.parent), p.name != "__init__.py",
                                                            p.name))
        for path in paths:
            rel = path.relative_to(REPO / "papa").with_suffix("")
            name = "/".join(rel.parts[:-1]) + "/" if rel.name == "__init__" else rel.as_posix()
            rows.append(f"| {layer if path == paths[0] else ''} | `{name}` | {_first_sentence(path)} |")
    return "\n".join(rows)


def layers_block() -> str:
    """docs/architecture.md's picture: the layers top down, each with its modules (a subpackage by its name and
    size), an arrow between layers for the only direction imports go."""
    lines = ["```text"]
    for layer in _LAYERS_DOWN:
        if layer == "cli":
            names = ["cli"]
        else:
            top = REPO / "papa" / layer
            names = [p.stem for p in sorted(top.glob("*.py")) if p.name != "__init__.py"]
            names += [f"{d.name}/ ({len([*d.glob('*.py')]) - 1})" for d in sorted(top.iterdir())
                      if d.is_dir() and (d / "__init__.py").is_file()]
        text = textwrap.wrap(" · ".join(names), 96)
        lines += [f"{layer:<10} │ {text[0]}", *(f"{'':<10} │ {rest}" for rest in text[1:])]
        if layer != _LAYERS_DOWN[-1]:
            lines.append(f"{'':<4}▼")
    return "\n".join([*lines, "```"])


def run_folder_block() -> str:
    """docs/architecture.md's run folder layout, as `papa.core.run_folder` (its one owner) draws it."""
    from papa.core import run_folder

    doc = run_folder.__doc__ or ""
    return "\n".join(["```text", textwrap.dedent(doc.split("::", 1)[1]).strip("\n"), "```"])



def table1_trained_block() -> str:
    """Table 1's rows that the committed run does not reproduce, as notebook 04's table marks them (its ``note``
    column, `papa.sections.alternative_matrices.trained_size_notes` of the run's rows)."""
    from papa.paper.tables import short_model
    from papa.sections.alternative_matrices import NOTE_COLUMN, trained_size_notes

    notes = trained_size_notes(cpu_run().rows(profile="cpu"))
    model = short_model(ENCODER[0])
    names = {"trainable_toeplitz": "trained, Toeplitz init.", "trainable_average": "trained, average init."}
    kinds: dict[str, list[str]] = {}
    for (which, kind), note in notes.items():
        if which == model:
            kinds.setdefault(note, []).append(names.get(kind, kind))
    if not kinds:
        return "The run's Table 1 marks no row: its trained constants trained on the other rows' sizes."
    marked = "; ".join(f"{' and '.join(f'*{label}*' for label in labels)} “{note}”" for note, labels in kinds.items())
    return f"Notebook 04's table (`tables/table1_alternative_matrices.csv`, column `{NOTE_COLUMN}`) marks {marked}."


def fig4_paper_block() -> str:
    """Fig. 4's shares of the committed run beside the paper's, in one sentence (notebook 03 prints the same)."""
    from papa.sections.constant_patterns import paper_comparison

    intervals = cpu_run().intervals
    if not intervals:
        return "The run wrote no pattern intervals."
    task = sorted(intervals)[0]
    return f"{paper_comparison(intervals[task])} From `tables/fig4_pattern_intervals_{task}.csv` (notebook 03)."


def fig6_mlm_block() -> str:
    """Fig. 6's rows as notebook 07's table reads them (`papa.paper.tables.fraction_claims` of ``tables/fig6_mlm.csv``):
    whether the claim reads the objective, its change in nats, and the downstream task's relative drop."""
    import math

    from papa.paper.tables import (
        METRIC_NAMES,
        OBJECTIVE_COLUMN,
        OBJECTIVE_TASKS,
        TASK_NAMES,
        fraction_claims,
    )

    def minus(value: float, spec: str = ".3f") -> str:
        return format(value, spec).replace("-", "−")

    curves = pd.read_csv(cpu_run().folder.table("fig6_mlm"), index_col=0)
    metrics = dict(zip(curves.task, curves.metric))
    claims = fraction_claims(curves)
    rows = cpu_run().rows(profile="cpu")
    sentences = []
    for (model, task, _), row in claims.iterrows():
        name = TASK_NAMES.get(task, task)
        if task in OBJECTIVE_TASKS:
            mark = row.get(OBJECTIVE_COLUMN, "read")
            own = rows[(rows.task == task) & (rows.constants == "none") & rows.model.str.endswith(model)]
            sized = json.loads(own.extra.iloc[0]) if len(own) and isinstance(own.extra.iloc[0], str) else {}
            trained = (f", trained on {sized['train_examples']:,} paragraphs for {sized['epochs']} epochs"
                       if {"train_examples", "epochs"} <= set(sized) else "")
            read = (f"reads the {name} probe of {model}{trained}" if mark == "read" else
                    f"does **not read** the {name} probe of {model}{trained} ({mark.partition(': ')[2] or mark})")
            change = -row["drop_at_0"]
            sentences.append(
                f"Fig. 6's claim {read}. Its −log perplexity is "
                f"{minus(row['original'])} with the original attention (perplexity "
                f"{math.exp(-row['original']):,.0f}), {minus(row['at_half'])} with half the heads constant and "
                f"{minus(row['at_0'])} with all of them: {minus(change, '+.3f')} nats at 0, "
                f"{'a gain' if change > 0 else 'a loss'} (a difference in nats, not a relative drop: a log "
                "perplexity's zero is arbitrary).")
        else:
            sentences.append(f"{name} ({METRIC_NAMES.get(metrics.get(task), metrics.get(task))}): "
                             f"{row['original']:.3f} with the original attention, {row['at_0']:.3f} with every head "
                             f"constant, a relative drop of {row['relative_drop_at_0']:.1%}.")
    return " ".join(sentences)


def decoder_patterns_block() -> str:
    """The decoder's constant-matrix patterns by layer (``tables/decoder_patterns_lm.csv``, notebook 08)."""
    from papa.paper.patterns import by_layer_text, pattern_summary
    from papa.runs.profiles import get_profile

    table = pd.read_csv(cpu_run().folder.table("decoder_patterns_lm"), index_col=0)
    corpus = get_profile("cpu").for_task("lm").corpus_limit
    kinds = (("sink", "Sinks"), ("previous", "Previous-token heads"), ("diagonal", "Diagonal heads"))
    return (f"Patterns of {DECODER[0]}'s {len(table)} constant matrices (the LM task's constants over {corpus} "
            "paragraphs, `tables/decoder_patterns_lm.csv`), by layer. "
            + "".join(f"{by_layer_text(table, column, name)}. " for column, name in kinds)
            + f"Median row spread {pattern_summary(table)['median_spread']:.2f}.")

BLOCKS: dict[str, tuple[Path, Callable[[], str]]] = {
    "layers": (DOCS / "architecture.md", layers_block),
    "run-folder": (DOCS / "architecture.md", run_folder_block),
    "modules": (DOCS / "architecture.md", modules_block),
    "quick-run": (PAGE, quick_block),
    "feature-store": (DOCS / "performance.md", perf.feature_store_block),
    "cpu-recheck": (DOCS / "performance.md", perf.recheck_block),
    "run-options": (DOCS / "performance.md", perf.run_options_block),
    "run-options-bf16-store": (DOCS / "performance.md", functools.partial(
        perf.run_options_block, REPO / "artifacts" / "run_options" / "bf16_store")),
    "fig2-table": (DOCS / "results.md", fig2_table_block),
    "table1": (DOCS / "results.md", table1_block),
    "table1-trained": (DOCS / "results.md", table1_trained_block),
    "fig4-paper": (DOCS / "results.md", fig4_paper_block),
    "fig6-mlm": (DOCS / "results.md", fig6_mlm_block),
    "table2": (DOCS / "results.md", table2_block),
    "fig5-table": (DOCS / "results.md", fig5_table_block),
    "fig6-table": (DOCS / "results.md", fig6_table_block),
    "claim-margins": (DOCS / "results.md", margins_block),
    "lambda-full": (DOCS / "results.md", lambda_full_block),
    "probes-learn": (DOCS / "results.md", probes_learn_block),
    "mrpc-curve": (DOCS / "results.md", mrpc_curve_block),
    "run-rankings": (DOCS / "results.md", run_rankings_block),
    "draws-time": (DOCS / "results.md", draws_time_block),
    "ranking-agreement": (DOCS / "results.md", ranking_agreement_block),
    "paper-protocol": (DOCS / "results.md", paper_protocol_block),
    "profile-agreement": (DOCS / "results.md", profile_agreement_block),
    "claims": (DOCS / "results.md", claims_block),
    "cpu-notebook-time": (DOCS / "results.md", notebook_time_block),
    "cpu-rerun-time": (DOCS / "notebooks.md", notebook_time_block),
    "what-was-run": (REPO / "README.md", what_was_run_block),
    "run-found": (REPO / "README.md", run_found_block),
    "results-what-was-run": (DOCS / "results.md", what_was_run_block),
    "claims-brief": (REPO / "README.md", brief_block),
    "takeaway": (REPO / "README.md", takeaway_block),
    "finding": (REPO / "README.md", finding_block),
    "decoder-claims": (DOCS / "decoders.md", decoder_claims_block),
    "decoder-table": (DOCS / "decoders.md", decoder_table_block),
    "decoder-own-head": (DOCS / "decoders.md", decoder_own_head_block),
    "decoder-fig5": (DOCS / "decoders.md", decoder_fig5_block),
    "decoder-lm-probe-curve": (DOCS / "decoders.md", lm_probe_curve_block),
    "decoder-patterns": (DOCS / "decoders.md", decoder_patterns_block),
    "probe-inputs": (DOCS / "decoders.md", probe_inputs_block),
    "own-model": (DOCS / "own-model.md", own_model_block),
    "gpu-check": (DOCS / "performance.md", perf.gpu_table_block),
    "gpu-estimate": (DOCS / "scaling.md", perf.gpu_estimate_block),
    "test-durations": (DOCS / "tests.md", test_durations_block),
}


def stale_blocks(blocks: dict[str, tuple[Path, Callable[[], str]]] = BLOCKS) -> list[str]:
    """The blocks whose page differs from what their committed files give (or whose markers are missing)."""
    stale = []
    for name, (page, block) in blocks.items():
        begin, end = markers(name)
        text = page.read_text(encoding="utf-8")
        if begin not in text or end not in text or text.split(begin, 1)[1].split(end, 1)[0].strip() != block():
            stale.append(f"{page.name}: {name}")
    return stale


def update(page: Path = PAGE, reference_dir: Path = REFERENCE_DIR, profile: str = "quick") -> None:
    """Replace the quick-run block of `page` with `measurements_block` of `profile`'s reference run."""
    fill(page, "quick-run", quick_block(reference_dir, profile))


def update_all() -> None:
    """Every block of `BLOCKS`, from its committed files."""
    for name, (page, block) in BLOCKS.items():
        fill(page, name, block())


if __name__ == "__main__":
    if __spec__ is None:  # run as a file: again as a module from the repository's root, where docs/ imports
        import subprocess
        import sys

        sys.exit(subprocess.call([sys.executable, "-m", "docs.gen_measurements", *sys.argv[1:]], cwd=REPO))
    update_all()

"""The module of the MLM/ELECTRA section's notebook (07, Fig. 6): the MLM objective beside a downstream task, and
the claim that a model's own pretraining objective drops more than its downstream tasks."""
from __future__ import annotations

from collections.abc import Sequence

from papa.core.run_folder import RunFolder
from papa.core.vocabulary import NONE
from papa.paper.checks import check_table
from papa.paper.claims.notes import SectionClaims
from papa.paper.claims.reading import read_each
from papa.paper.claims.rules import (ClaimReading, Part, claim_reading, compared_part, not_read_claim, tally_part,
                                     unread_part)
from papa.paper.claims.run_tables import RunTables
from papa.paper.claims.scores import ClaimRun
from papa.paper.figures import fraction_curves, save_figure
from papa.paper.grids import Grids, run
from papa.paper.paper_numbers import CLAIMS
from papa.paper.tables import (DECODER_CHANCE_TABLE, MLM_PRETRAINED, OBJECTIVE_TASKS, curve_cells, fraction_claims,
                               listed, main_curves, means, save_table, setup, short_model, unread_objectives)
from papa.runs.statistics import Scores, above, difference, estimate, within
from papa.sections.main_results import drop_share, task_average_drop


def grids(models: Sequence[str], downstream_task: str) -> dict[str, Grids]:
    """The MLM objective beside one downstream task."""
    return {"results": Grids.of(models, ["mlm", downstream_task])}


# How the objectives are named. Fig. 6 reads MLM and the LM probe, not the LM's own frozen head: never adapted to
# constant attention while the probes are retrained, it loses more by construction.
OBJECTIVE_NAMES = {"mlm": "MLM", "lm": "LM (own head)", "lm_probe": "LM probe (from scratch)"}


# The paper's MLM numbers (Fig. 6): MLM-pretrained encoders lose 1–1.5 nats.
PAPER_MLM_NATS = (1.0, 1.5)


# The points of notebook 08's own-head curve beyond its original; it takes no training, so every fraction is scored.
DECODER_POINTS = (("1/2", "lambda"), ("1/8", "lambda"), ("1/16", "lambda"), ("0", NONE))


# Where notebook 08 writes each task's chance level.
CHANCE_FILE = RunFolder.table_file(DECODER_CHANCE_TABLE)


def _own_objective(task: str, model: str, decoders: bool) -> bool:
    return task == "lm_probe" if decoders else task == "mlm" and short_model(model) in MLM_PRETRAINED


def read_fig6(run: ClaimRun) -> ClaimReading:
    """Fig. 6's claim on `run`."""
    where = ("fig6", "Fig. 6", "07_mlm_electra", RunFolder.figure_file("fig6_mlm_electra"))
    objectives = run.models_tasks(OBJECTIVE_TASKS)
    own = [(m, t) for m, t in objectives if _own_objective(t, m, run.decoders)]
    others = sorted({short_model(m) for m, t in objectives if t == "mlm" and not _own_objective(t, m, run.decoders)})
    parts, nats = [], []
    models = sorted({m for m, _ in own})
    for model, task in own:
        original = run.scores(model, task)
        parts += _objective_drops(run, model, task, original, several_models=len(models) > 1)
        if task == "mlm" and original is not None:
            replaced = run.scores(model, task, "average", "task", NONE, "0")
            if replaced is not None:
                d = difference(replaced, original)
                nats.append(compared_part(f"loses 1-1.5 nats ({short_model(model)})", within(d, *PAPER_MLM_NATS),
                                          d.text(2)))
    own_head = run.decoders and any(t == "lm" for _, t in objectives)
    if not parts and not own_head:
        why = ("a model's own pretraining objective (MLM for the paper's MLM-pretrained encoders, an LM probe for a "
               "decoder) and a downstream task whose probe learns were not both run at fractions 1 and 0")
        if others:
            why += f" (MLM probes of {', '.join(others)} are not read: not pretrained with MLM)"
        return not_read_claim(*where, why)
    if not parts:  # the LM ran with its own head alone: say what the claim reads instead, never hide the line
        parts.append(unread_part(f"{OBJECTIVE_NAMES['lm_probe']} drops more",
                                 "an LM probe and a downstream task whose probe learns were not both run at fractions "
                                 "1 and 0 (the LM with its own frozen head is described, not read)"))
    if run.decoders:  # the sentence's other parts are of MLM-pretrained encoders and ELECTRA: say so, never drop them
        parts += [unread_part("MLM-pretrained encoders lose 1-1.5 nats", "a decoder is not pretrained with MLM"),
                  unread_part("ELECTRA", "a decoder is not ELECTRA")]
    else:
        parts.append(tally_part("MLM-pretrained encoders lose 1-1.5 nats", nats, none="no MLM-pretrained encoder"))
        electra = [m for m, t in objectives if "electra" in m.lower() and t == "mlm"]
        parts.append(unread_part("ELECTRA", "ELECTRA's MLM was run: read it in notebook 07's figure" if electra
                                 else "no ELECTRA model run"))
        if others:
            parts.append(unread_part(f"MLM probes of {', '.join(others)}", "not pretrained with MLM"))
    return claim_reading(*where, parts)


def _objective_drops(run: ClaimRun, model: str, task: str, original: Scores | None, *,
                     several_models: bool) -> list[Part]:
    """Whether `model`'s own objective `task` drops more than its downstream tasks with every head constant: its drop
    minus the downstream tasks' average drop at 0, relative, then normalised to chance; an LM probe is read only
    where it beats the strongest baseline."""
    replaced = run.scores(model, task, "average", "task", NONE, "0")
    if original is None or replaced is None:
        return []
    name = OBJECTIVE_NAMES[task] + (" at 0" if run.decoders else "") + (
        f" ({short_model(model)})" if several_models else "")
    if task == "lm_probe" and (why := run.beats_chance(model, task, original)):
        return [unread_part(f"{name} drops more", why)]
    parts = []
    for normalise in (False, True):
        chance = run.chance(model, task) if normalise else None
        downstream, tasks, settings, average = task_average_drop(run, model, "0", NONE, normalise=normalise)
        if normalise and (chance is None or downstream is None):
            if run.decoders:  # the decoders' reading promises it: say that it is missing
                parts.append(unread_part(f"{name} drops more, normalised to chance",
                                         f"the chance levels were not written ({CHANCE_FILE})"))
            continue
        if downstream is None:
            continue
        gap = estimate(lambda o, z, *rest: drop_share(o, z, chance) - average(*rest),  # noqa: B023
                       original, replaced, *settings)
        scale = "share of the margin over chance lost" if normalise else "relative drop"
        parts.append(compared_part(f"{name} drops more than {', '.join(tasks)}"
                                   + (", normalised to chance" if normalise else ""), above(gap),
                                   f"{original.values.mean():.2f} -> {replaced.values.mean():.2f} nats; "
                                   f"{scale} minus the tasks' {gap.text(percent=True)}"))
    return parts


def own_head_sentence(run: ClaimRun) -> str:
    """Each causal LM's own-head LM score at fractions 1 and 0 in nats, against the strongest baseline, described
    (not read); "" where no model scored both."""
    label, selection = DECODER_POINTS[-1]
    sentences = []
    for model in sorted({m for m, _ in run.models_tasks(("lm",))}):
        original, replaced = run.scores(model, "lm"), run.scores(model, "lm", "average", "task", selection, label)
        if original is None or replaced is None:
            continue
        at_1, at_0 = original.values.mean(), replaced.values.mean()
        level = run.chance(model, "lm")
        if level is None:
            baseline = f"; the strongest predictor that needs no model is not written yet ({CHANCE_FILE})"
        else:
            gap = at_0 - level
            side = "at" if round(gap, 3) == 0 else f"{abs(gap):.3f} nats {'below' if gap < 0 else 'above'}"
            name, how = run.chance_source(model, "lm")
            baseline = f", {side} {name} ({level:.3f} nats" + (f", {how}" if how else "") + ")"
        sentences.append(
            f"{short_model(model)}'s LM with its own head scores {at_1:.3f} nats with every head input-dependent and "
            f"{at_0:.3f} nats with every head constant{baseline}. The head is frozen, never adapted to constant "
            "attention, so this drop is not comparable with the downstream probes', retrained at every fraction: the "
            "curve is described, not read; Fig. 6's claim on the decoder is read with the LM probe trained from "
            "scratch.")
    return " ".join(sentences)


def read(run: RunTables) -> list[ClaimReading]:
    """Fig. 6's claim read on a run's tables."""
    return read_each(run, {"fig6": read_fig6})


claims = SectionClaims("07_mlm_electra", read)

#: What the section's notebook calls: its own functions and the machinery it shows.
__all__ = ["CHANCE_FILE", "CLAIMS", "DECODER_POINTS", "OBJECTIVE_NAMES", "PAPER_MLM_NATS", "check_table", "claims",
           "curve_cells", "fraction_claims", "fraction_curves", "grids", "listed", "main_curves", "means",
           "own_head_sentence", "read", "read_fig6", "run", "save_figure", "save_table", "setup", "unread_objectives"]

"""Fig. 6's claim (notebook 07): a model's own pretraining objective (MLM; a decoder's LM, with its own head and
as a probe) drops more than its downstream tasks, and MLM-pretrained encoders lose 1-1.5 nats (ELECTRA is named, not
read)."""
from __future__ import annotations

import numpy as np

from papa.core.run_folder import RunFolder
from papa.core.vocabulary import NONE, PAPER_BASE, PAPER_LARGE
from papa.paper.claims.main_results import drop_share, task_average_drop
from papa.paper.claims.rules import (ClaimReading, Part, claim_reading, compared_part, not_read_claim, tally_part,
                                     unread_part)
from papa.paper.claims.scores import ClaimRun
from papa.paper.sections import OBJECTIVE_TASKS, short_model
from papa.runs.statistics import Scores, above, difference, estimate, within


# The pretraining objectives Fig. 6 compares with the downstream tasks (`sections.OBJECTIVE_TASKS`): an encoder's
# MLM (a probe trained on its features), a decoder's LM scored by its own frozen head (notebook 08) and by an LM probe
# trained from scratch. How each is named in a part:
OBJECTIVE_NAMES = {"mlm": "MLM", "lm": "LM (own head)", "lm_probe": "LM probe (from scratch)"}
# The paper's hypothesis is about a model's own pretraining objective: MLM is read for the paper's MLM-pretrained
# encoders only (not ELECTRA, pretrained on replaced-token detection, nor e.g. a sentence-embedding model without an
# MLM head), LM (with its head, or a probe) for every decoder.
MLM_PRETRAINED = tuple(short_model(m) for m in (*PAPER_BASE, *PAPER_LARGE))
# The paper's MLM numbers (Fig. 6): MLM-pretrained encoders lose 1–1.5 nats.
PAPER_MLM_NATS = (1.0, 1.5)
# A decoder's LM with its own head is read at every fraction the notebook runs it (heads replaced in λ order, as its
# probes), since nothing but the reading needs more: its score takes no training. The probes, the paper's at 0.
DECODER_POINTS = (("1/2", "lambda"), ("1/8", "lambda"), ("1/16", "lambda"), ("0", NONE))


def _own_objective(task: str, model: str, decoders: bool) -> bool:
    return task in ("lm", "lm_probe") if decoders else task == "mlm" and short_model(model) in MLM_PRETRAINED


def unread_objectives(models: list[str] | set[str]) -> dict[str, str]:
    """For Fig. 6's figure: the MLM panel's reason where none of the encoders `models` was pretrained with MLM (the
    claim reads MLM only for the paper's MLM-pretrained encoders); {} where one was."""
    others = sorted({short_model(m) for m in models} - set(MLM_PRETRAINED))
    if not others or len(others) < len(set(models)):
        return {}
    return {"mlm": f"not read: {', '.join(others)} not pretrained with MLM"}


def _random_too(run: ClaimRun, model: str, task: str, label: str) -> str:
    """Where the run scored `task` at `label` in random order too (notebook 08's LM): its score, so that a size read
    in λ order is seen beside another order's ("" where it did not)."""
    random = run.draws(model, task, "random", label)
    if not random:
        return ""
    means = [s.values.mean() for s in random.values()]
    return (f"; in random order {np.mean(means):.2f} nats, "
            + (f"{len(means)} random orders" if len(means) > 1 else "1 order"))


def read_fig6(run: ClaimRun) -> ClaimReading:
    """Fig. 6's claim on `run`: a model's own pretraining objective drops more than its downstream tasks."""
    where = ("fig6", "Fig. 6", "07_mlm_electra", RunFolder.figure_file("fig6_mlm_electra"))
    objectives = run.models_tasks(OBJECTIVE_TASKS)
    own = [(m, t) for m, t in objectives if _own_objective(t, m, run.decoders)]
    others = sorted({short_model(m) for m, t in objectives if not _own_objective(t, m, run.decoders)})
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
    if not parts:
        why = ("a model's own pretraining objective (MLM for the paper's MLM-pretrained encoders, LM for a decoder) "
               "and a downstream task whose probe learns were not both run at fractions 1 and 0")
        if others:
            why += f" (MLM probes of {', '.join(others)} are not read: not pretrained with MLM)"
        return not_read_claim(*where, why)
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
    """Whether `model`'s own pretraining objective `task` (scored `original` with every head) drops more than its
    downstream tasks, at each fraction read (`DECODER_POINTS` for a decoder's LM, else 0)."""
    parts = []
    for label, selection in DECODER_POINTS if task == "lm" else (("0", NONE),):
        replaced = run.scores(model, task, "average", "task", selection, label)
        if original is None or replaced is None:
            continue
        name = OBJECTIVE_NAMES[task] + (f" at {label}" if run.decoders else "") + (
            f" ({short_model(model)})" if several_models else "")
        unstable = [why for t in [task, *sorted({t for m, t in run.models_tasks() if m == model})]
                    if selection == "lambda" and (why := run.unstable(model, t))]
        if task == "lm_probe" and (why := run.beats_chance(model, task, original)):
            parts.append(unread_part(f"{name} drops more", why))
            continue
        if unstable:
            parts.append(unread_part(f"{name} drops more", unstable[0]))
            continue
        parts += _drops_beside_tasks(run, model, task, name, (label, selection), original, replaced)
    return parts


def _drops_beside_tasks(run: ClaimRun, model: str, task: str, name: str, point: tuple[str, str], original: Scores,
                        replaced: Scores) -> list[Part]:
    """The objective's drop from `original` to `replaced` at `point` (fraction label, selection) minus the
    downstream tasks' average drop there: relative, then normalised to chance."""
    label, selection = point
    parts = []
    for normalise in (False, True):
        chance = run.chance(model, task) if normalise else None
        downstream, tasks, settings, average = task_average_drop(run, model, label, selection,
                                                                 normalise=normalise)
        if normalise and (chance is None or downstream is None):
            if run.decoders:  # the decoders' reading promises it: say that it is missing
                parts.append(unread_part(f"{name} drops more, normalised to chance",
                                         "the chance levels were not written (tables/decoder_chance_levels.csv)"))
            continue
        if downstream is None:
            continue
        gap = estimate(lambda o, z, *rest: drop_share(o, z, chance) - average(*rest),  # noqa: B023
                       original, replaced, *settings)
        scale = "share of the margin over chance lost" if normalise else "relative drop"
        ordered = ("" if selection == NONE else
                   f" (λ order: 1 order{_random_too(run, model, task, label)})")
        parts.append(compared_part(f"{name} drops more than {', '.join(tasks)}"
                                   + (", normalised to chance" if normalise else ""), above(gap),
                                   f"{original.values.mean():.2f} -> {replaced.values.mean():.2f} nats{ordered}; "
                                   f"{scale} minus the tasks' {gap.text(percent=True)}"))
    return parts

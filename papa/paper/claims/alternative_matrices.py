"""Table 1's claim (notebook 04): the average constants beat every data-free matrix and trained
Toeplitz-initialised ones, and come close to trained average-initialised ones."""
from __future__ import annotations

import json

from papa.core.run_folder import RunFolder
from papa.core.vocabulary import DATA_FREE_KINDS, NONE
from papa.paper.claims.rules import (CLOSE_MARGIN, EVERY_HEAD, ClaimReading, claim_reading, compared_part, control,
                                     not_read_claim, tally_part, unread_part)
from papa.paper.claims.scores import ClaimRun, model_count, part_label
from papa.runs.statistics import NOT_READ, above, difference, within


def _train_examples(run: ClaimRun, model: str, task: str, kind: str, corpus: str) -> set:
    """The training-set sizes the rows of a setting recorded (None: not recorded)."""
    rows = run.rows(model, task, constants=kind, constants_corpus=corpus, selection=NONE, fraction_label="0")
    if "extra" not in rows:
        return {None}
    return {json.loads(x).get("train_examples") if isinstance(x, str) and x else None for x in rows.extra}


def read_table1(run: ClaimRun) -> ClaimReading:
    """Table 1's claim on `run`: average constants beat every data-free matrix and trained Toeplitz, and come close
    to trained average constants."""
    where = ("table1", "Table 1", "04_alternative_matrices", RunFolder.table_file("table1_alternative_matrices"))
    pairs = run.models_tasks()
    k = model_count(pairs)
    beats, trained_toeplitz, trained_average = [], [], []
    for model, task in pairs:
        average = run.scores(model, task, "average", "task", NONE, "0")
        if average is None:
            continue
        label = part_label(model, task, k)
        for kind in DATA_FREE_KINDS:
            other = run.scores(model, task, kind, NONE, NONE, "0")
            if other is not None:
                d = difference(other, average)
                beats.append(compared_part(f"beats {kind} ({label})", above(d), d.text()))
        size = _train_examples(run, model, task, "average", "task")
        for kind, out in (("trainable_toeplitz", trained_toeplitz), ("trainable_average", trained_average)):
            other = run.scores(model, task, kind, "task", NONE, "0")
            if other is None:
                continue
            trained = _train_examples(run, model, task, kind, "task")
            if trained != size:
                out.append(unread_part(f"{kind} ({label})", f"trained on {_examples(trained)} examples, the others' "
                                                        f"probes on {_examples(size)}"))
                continue
            d = difference(other, average)
            if kind == "trainable_toeplitz":
                out.append(compared_part(f"beats {kind} ({label})", above(d), d.text()))
                continue
            gate = control(EVERY_HEAD, run.all_heads_drop(model, task), CLOSE_MARGIN, either_side=True)
            out.append(compared_part(f"close to {kind} ({label})", within(d, -CLOSE_MARGIN, CLOSE_MARGIN), d.text(),
                                     gate))
    if not beats:
        return not_read_claim(*where, "average and data-free constants were not all run with every head replaced")
    parts = [tally_part(f"beats every data-free matrix ({len(beats)} comparisons)", beats)]
    for name, found in (("beats trained Toeplitz-initialised", trained_toeplitz),
                        ("close to trained average-initialised", trained_average)):
        if not found:
            parts.append(unread_part(name, "not run"))
        elif all(p.verdict == NOT_READ for p in found):
            parts.append(unread_part(name, found[0].numbers))
        else:
            parts.append(tally_part(name, [p for p in found if p.verdict != NOT_READ]))
    return claim_reading(*where, parts)


def _examples(sizes: set) -> str:
    return "/".join(str(s) for s in sorted(sizes, key=str)) or "?"

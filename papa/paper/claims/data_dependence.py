"""Table 2's claim (notebook 05): constants averaged on another corpus do as well as the task's own."""
from __future__ import annotations

from papa.core.run_folder import RunFolder
from papa.core.vocabulary import NONE
from papa.paper.claims.rules import (ALIKE_MARGIN, EVERY_HEAD, ClaimReading, claim_reading, compared_part, control,
                                     not_read_claim)
from papa.paper.claims.scores import ClaimRun, model_count, part_label
from papa.runs.statistics import difference, within
from papa.tasks.registry import corpus_label


def read_table2(run: ClaimRun) -> ClaimReading:
    """Table 2's claim on `run`: constants averaged on another corpus do as well as the task's own."""
    where = ("table2", "Table 2", "05_data_dependence", RunFolder.table_file("table2_data_dependence"))
    rows = run.results[(run.results.constants == "average") & (run.results.fraction_label == "0")]
    others = sorted(set(rows.constants_corpus) - {"task", NONE})
    if not others:
        return not_read_claim(*where, "constants from another corpus were not run beside the task's own")
    other = others[0]
    corpus = corpus_label(other)  # "mlm" reads WikiText: the page names the text, not the task
    pairs = run.models_tasks()
    k = model_count(pairs)
    parts = []
    for model, task in pairs:
        own = run.scores(model, task, "average", "task", NONE, "0")
        theirs = run.scores(model, task, "average", other, NONE, "0")
        if own is not None and theirs is not None:
            d = difference(own, theirs)
            # Which constants replace the heads cannot matter by more than replacing them costs at all.
            gate = control(EVERY_HEAD, run.all_heads_drop(model, task), ALIKE_MARGIN, either_side=True)
            parts.append(compared_part(f"{corpus}'s constants alike ({part_label(model, task, k)})",
                                       within(d, -ALIKE_MARGIN, ALIKE_MARGIN), d.text(), gate))
    if not parts:
        return not_read_claim(*where, f"no task was run with both its own and {corpus}'s constants")
    return claim_reading(*where, parts)

"""Table 2's claim (notebook 05): constants averaged on another corpus do as well as the task's own."""
from __future__ import annotations

from papa.core.vocabulary import NONE
from papa.paper.claims.rules import ALIKE_MARGIN, ClaimReading, _compare, _not_read, _reading
from papa.paper.claims.scores import _count, _label, _Run
from papa.runs.statistics import difference, within
from papa.tasks.registry import corpus_label


def _table2(run: _Run) -> ClaimReading:
    where = ("table2", "Table 2", "05_data_dependence", "tables/table2_data_dependence.csv")
    rows = run.results[(run.results.constants == "average") & (run.results.fraction_label == "0")]
    others = sorted(set(rows.constants_corpus) - {"task", NONE})
    if not others:
        return _not_read(*where, "constants from another corpus were not run beside the task's own")
    other = others[0]
    corpus = corpus_label(other)  # "mlm" reads WikiText: the page names the text, not the task
    pairs = run.models_tasks()
    k = _count(pairs)
    parts = []
    for model, task in pairs:
        own = run.scores(model, task, "average", "task", NONE, "0")
        theirs = run.scores(model, task, "average", other, NONE, "0")
        if own is not None and theirs is not None:
            d = difference(own, theirs)
            parts.append(_compare(f"{corpus}'s constants alike ({_label(model, task, k)})",
                                  within(d, -ALIKE_MARGIN, ALIKE_MARGIN), d.text()))
    if not parts:
        return _not_read(*where, f"no task was run with both its own and {corpus}'s constants")
    return _reading(*where, parts)

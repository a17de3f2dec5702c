"""Fig. 5's claim (notebook 06): λ order beats every other way of choosing the heads to keep, and reversed λ is
the worst, over every draw of the drawn orders."""
from __future__ import annotations

from papa.core.vocabulary import NONE, RANKED, SELECTION_METHODS
from papa.paper.claims.rules import RANKINGS, ClaimReading, Part, _compare, _not_read, _reading, _tally, _unread
from papa.paper.claims.scores import DRAWN_ORDERS, _contrast, _label, _numbers, _Run
from papa.runs.statistics import above


def _fig5(run: _Run) -> ClaimReading:
    """Per task and fraction strictly between 0 and 1: λ beats every other order, and reversed λ is the worst, over
    every draw of the drawn orders; a ranking learned by another profile in parts of its own, gated by its own
    draws."""
    where = ("fig5", "Fig. 5", "06_head_selection", "figures/fig5_head_selection.png")
    methods = [m for m in SELECTION_METHODS if m in set(run.results.selection)]
    mid = run.results[run.results.selection.isin(methods) & (run.results.fraction > 0) & (run.results.fraction < 1)
                      & (run.results.constants == "average") & (run.results.constants_corpus == "task")]
    points = sorted(set(zip(mid.model, mid.task, mid.fraction_label)))
    k = len({m for m, _, _ in points})
    best: dict[str | None, list[Part]] = {}
    worst: dict[str | None, list[Part]] = {}
    unstable: dict[str | None, list[Part]] = {}
    for model, task, label in points:
        free = {m: run.draws(model, task, m, label) for m in methods if m not in RANKED}  # drawn the grid's way
        for profile in (None, *run.ranking_profiles(model, task)):
            # λ-ranked methods of `profile`'s ranking against the data-free orders
            ran = {m: run.draws(model, task, m, label, profile=profile) if m in RANKED else free[m] for m in methods}
            ran = {m: list(draws.values()) for m, draws in ran.items() if draws}
            if "lambda" not in ran or len(ran) < 2:
                continue  # Fig. 2's tasks run λ alone
            rankings = [*run.draws(model, task, "lambda", label, profile=profile),
                        *run.draws(model, task, "reversed_lambda", label, profile=profile)]
            why = run.unstable(model, task, rankings, profile)
            name = f"{_label(model, task, k)} at {label}" + ("" if profile is None else f", λ of the {profile} "
                                                                                          "profile")
            if why:
                unstable.setdefault(profile, []).append(_unread(name, why))
                continue
            for m, draws in ran.items():
                if m not in RANKED:  # λ against the data-free orders
                    d = _contrast(ran["lambda"], draws)
                    arms = [(RANKINGS, ran["lambda"])] + [(f"{m} orders", draws)] * (m in DRAWN_ORDERS)
                    best.setdefault(profile, []).append(_compare(f"λ beats {m} ({name})", above(d),
                                                                 _numbers(d, arms)))
            if "reversed_lambda" in ran:
                for m, draws in ran.items():
                    if m != "reversed_lambda":
                        d = _contrast(draws, ran["reversed_lambda"])
                        arms = [(RANKINGS if m in RANKED else f"{m} orders", draws)] * (m in DRAWN_ORDERS) + [
                            (f"reversed {RANKINGS}", ran["reversed_lambda"])]
                        worst.setdefault(profile, []).append(_compare(f"{m} beats reversed λ ({name})", above(d),
                                                                      _numbers(d, arms)))
    profiles = sorted({*best, *unstable}, key=lambda p: (p is not None, p or ""))
    if not profiles:
        return _not_read(*where, run.not_run("λ and another selection method at a fraction between 0 and 1",
                                             lambda r: (r.fraction > 0) & (r.fraction < 1)
                                             & (r.selection != "lambda") & (r.selection != NONE)))
    parts = []
    for profile in profiles:
        whose = "" if profile is None else f", λ of the {profile} profile"
        none = "no λ ranking could be read" + (f" ({unstable[profile][0].numbers})" if unstable.get(profile) else "")
        parts += [_tally(f"λ beats every other method{whose}", best.get(profile, []), none=none),
                  _tally(f"reversed λ is the worst{whose}", worst.get(profile, []),
                         none="reversed λ not run" if best.get(profile) else none)]
        if unstable.get(profile) and best.get(profile):
            parts.append(_unread(f"{len(unstable[profile])} points{whose}", unstable[profile][0].numbers))
    return _reading(*where, parts)

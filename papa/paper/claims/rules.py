"""How every claim is read: its parts and reading, Holm's correction and the verdict, the margins, and `RULES`.

A part **holds** where its 95% interval lies on the claim's side of its bound, **does not hold** on the other side,
and is **inconclusive** where it straddles it; one the run cannot read is **not read**. A part bounded by a margin
is **not informative** unless its `Control` (the same comparison where the effect is largest) clears the margin.
A claim holds when every part holds and does not hold when one does not, Holm-corrected across all its comparisons;
it is **partly read** when the parts read hold but others are not read. Fig. 4's shares are **descriptive**, with no
verdict. The margins come from the paper's own numbers.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from papa.paper.paper_numbers import (CLAIMS, PAPER_AVERAGE_RELATIVE_DROP, PAPER_DIAGONAL_SHARE,
                                      PAPER_MAX_RELATIVE_DROP, PAPER_SPECIAL_SHARE)
from papa.runs.stability import STABLE_RHO
from papa.runs.statistics import (ALPHA, DOES_NOT_HOLD, HOLDS, INCONCLUSIVE, NOT_INFORMATIVE, NOT_READ, PARTLY_READ,
                                  UNREAD, Estimate, Outcome, all_of, any_of, corrected)

# "No major drop" at 1/2 (Fig. 2): the drop's interval below this many points of the metric (0.02 = 2 points).
HALF_MARGIN = 0.02
# An equivalence margin from the claim's own number: "about x" read as within ± this share of x.
RELATIVE_MARGIN = 0.25
# "8% on average": the model-average relative drop within ±25% of 8% (Table 1's 9.5% is inside, Table 4's 12.1% not).
AVERAGE_MARGIN = RELATIVE_MARGIN * PAPER_AVERAGE_RELATIVE_DROP
# Table 2's "as well as": the difference within ± this (the paper's Tables 2 and 5 differ by at most 0.01).
ALIKE_MARGIN = 0.02
# Table 1's "close to trained average-initialised": within ± this (Tables 1 and 4 differ by at most 0.03).
CLOSE_MARGIN = 0.03
# "Spread over several tokens rather than one" (Fig. 4): median normalised row entropy at least this.
SPREAD_THRESHOLD = 0.5
#: The fewest models whose exact Spearman test can reach `ALPHA`: its smallest one-sided p is 1/n! (1/4! = 0.042).
FIG3_MODELS = next(n for n in range(3, 10) if 1 / math.factorial(n) < ALPHA)
# The claims with parts that rest on a λ ranking.
LAMBDA_CLAIMS = ("fig2_half", "fig5", "fig6")
# How a part names the draws of a λ ranking it averages over (`drawn_numbers`).
RANKINGS = "λ rankings"

#: When a claim reads the parts that rest on a λ ranking (`papa.runs.stability.gate_reason`).
GATE = (f"read where the ranking's draws include one on disjoint training data and no pair of them agrees below "
        f"Spearman's ρ {STABLE_RHO} beyond ρ's 95% interval")

#: How a part bounded by a margin is gated by its control (`Control`).
CONTROLLED = ("not informative where the control's 95% interval does not clear the margin (every head replaced by "
              "the task's average constants: original − that)")

#: Each claim's rule, in one line.
RULES = {
    "fig2_half": f"per task whose probe learns: original − (λ, 1/2) below {HALF_MARGIN} (upper end of its 95% "
                 f"interval; over every λ ranking the run drew, their spread in the interval; {GATE}; {CONTROLLED}); 'sometimes "
                 "improves': on some task (λ, 1/2) − original above 0 (Holm over every task read); another profile's "
                 "ranking in parts of its own",
    "fig2_all": f"per model, the relative drop at 0 averaged over its tasks: the mean over models within "
                f"{PAPER_AVERAGE_RELATIVE_DROP:.0%} ± {RELATIVE_MARGIN:.0%} of it "
                f"({PAPER_AVERAGE_RELATIVE_DROP - AVERAGE_MARGIN:.0%} to "
                f"{PAPER_AVERAGE_RELATIVE_DROP + AVERAGE_MARGIN:.0%}; the interval's side of {PAPER_AVERAGE_RELATIVE_DROP:.0%} said where it excludes it), and each "
                f"model's mean over its tasks below {PAPER_MAX_RELATIVE_DROP:.0%} (the paper's bound is on a model's "
                "average: its own CoLA drops are over it; not informative where the same average with every head a "
                "data-free matrix, the one that drops most, does not clear the bound by its interval)",
    "fig3": "over models: Spearman's ρ of original score and relative drop above 0, one-sided p < "
            f"{ALPHA:.3g} (exact over every permutation below 10 models; read from {FIG3_MODELS} models, the fewest "
            "whose exact test can reach it)",
    "fig4_diagonal": "descriptive: the share of diagonal heads with a 95% bootstrap interval over the corpus "
                     f"sentences, beside the paper's about {PAPER_DIAGONAL_SHARE:.0%}",
    "fig4_special": "descriptive: the share of heads mostly on special tokens with a 95% bootstrap interval over the "
                    f"corpus sentences, beside the paper's about {PAPER_SPECIAL_SHARE:.0%}",
    "fig4_spread": "descriptive: the median normalised row entropy (0 = one token, 1 = uniform) with a 95% bootstrap "
                   f"interval over the corpus sentences; 'spread' where at least {SPREAD_THRESHOLD}",
    "table1": f"at 0, per task: average − each data-free kind above 0; average − trained Toeplitz above 0; |average − "
              f"trained average| within {CLOSE_MARGIN} (trained rows read only at the others' training size; "
              f"{CONTROLLED})",
    "table2": f"at 0, per task: other corpus's constants − the task's own within ±{ALIKE_MARGIN} ({CONTROLLED})",
    "fig5": "per task and fraction strictly between 0 and 1: λ − each other method above 0; each method − reversed λ "
            f"above 0 ({GATE}; over "
            "every λ ranking and random permutation the run drew, their spread in the interval; '(1 order)' where "
            "an order was drawn once); another profile's ranking in parts of its own",
    "fig6": "per model: its own objective's drop at 0 − the mean of its downstream tasks' above 0, as relative drops "
            "and as shares of the margin over chance, the strongest predictor that needs no model (the majority class; "
            "for the LM the best unigram model fit on any training text the run has, the probe's own training "
            "tokens' beside it) (MLM probe for MLM-pretrained encoders; for decoders an LM probe trained from "
            "scratch, read only where it beats that strongest baseline by its interval; the LM scored by the "
            "model's own frozen head is described beside it, not read: a head never adapted to constant attention "
            "is not comparable with probes retrained at every fraction); the paper's nats and ELECTRA read only "
            "where such models ran, 'partly read' where they cannot be",
}

#: Where each claim's margin or threshold comes from (the docs print it beside `RULES`, docs/claim_pages.py).
MARGIN_SOURCES = {
    "fig2_half": f"{HALF_MARGIN * 100:.0f} points of the metric (\"no major drop\"; the paper gives no number)",
    "fig2_all": f"±{RELATIVE_MARGIN:.0%} of the paper's {PAPER_AVERAGE_RELATIVE_DROP:.0%}; Tables 1 and 4: CoLA alone "
                "drops 34% / 36%, the task averages are 9.5% / 12.1%, so \"never more than 20%\" bounds a model's "
                "average (Fig. 3's x-axis), not a task",
    "fig3": f"read from {FIG3_MODELS} models: with one fewer the exact test's smallest p is "
            f"1/{math.factorial(FIG3_MODELS - 1)} = {1 / math.factorial(FIG3_MODELS - 1):.3f}",
    "fig4_diagonal": "descriptive (the constants have no seeds: their uncertainty is the corpus's)",
    "fig4_special": "descriptive (the constants have no seeds: their uncertainty is the corpus's)",
    "fig4_spread": f"'spread' from a median normalised row entropy of {SPREAD_THRESHOLD}",
    "table1": f"Tables 1 and 4 put average and trained-average constants at most {CLOSE_MARGIN} apart",
    "table2": f"±{ALIKE_MARGIN}: Tables 2 and 5 differ by at most 0.01",
    "fig5": f"the gate's ρ {STABLE_RHO} (the λ ranking's draws must agree before its order is read)",
    "fig6": "the nats and ELECTRA only where such models ran ('partly read' on a decoder); a probe only where it beats "
            "the strongest baseline that needs no model",
}


@dataclass(frozen=True)
class Control:
    """What shows a part could have failed: the comparison where its effect is largest, its numbers, the margin, and
    whether its 95% interval clears that margin (`shows_effect`)."""

    name: str
    numbers: str
    margin: float
    shows_effect: bool
    percent: bool = False

    @property
    def text(self) -> str:
        """e.g. "control: every head replaced 0.004 [-0.001, +0.009], not beyond the margin 0.02"."""
        side = "beyond" if self.shows_effect else "not beyond"
        margin = f"{self.margin:.0%}" if self.percent else f"{self.margin:g}"
        return f"control: {self.name} {self.numbers}, {side} the margin {margin}"


def control(name: str, e: Estimate | None, margin: float, *, either_side: bool = False, percent: bool = False
            ) -> Control:
    """The control `name`: it shows an effect where `e`'s 95% interval lies above `margin` (with `either_side`, or
    below −`margin`); no estimate shows none. `percent` prints shares as percentages."""
    if e is None:
        return Control(name, "not run", margin, False, percent)
    low, high = e.interval()
    shows = bool(low > margin or (either_side and high < -margin))
    return Control(name, e.text(percent=percent), margin, shows, percent)


#: How a part names its usual control: the drop with every head constant (`ClaimRun.all_heads_drop`).
EVERY_HEAD = "every head replaced"


@dataclass(frozen=True)
class Part:
    """One part of a claim's sentence as this run reads it: one comparison (`test`), or a tally of comparisons
    (`members`, combined as "everywhere", or as "somewhere" with `anywhere`)."""

    name: str        # e.g. "no major drop at 1/2 (sst2)"
    verdict: str     # one of VERDICTS
    numbers: str     # the estimate behind it, e.g. "0.012 [-0.004, 0.028]"
    test: Outcome | None = None
    members: tuple["Part", ...] = ()
    anywhere: bool = False
    control: Control | None = None
    estimate: Estimate | None = None  # the quantity compared, where a page reads its interval


def compared_part(name: str, test: Outcome, numbers: str, control: Control | None = None,
                  estimate: Estimate | None = None) -> Part:
    """A part that is one comparison, its verdict `test`'s (gated by `control` once the claim is read)."""
    return Part(name, test.verdict, numbers, test, control=control, estimate=estimate)


def gated(part: Part) -> Part:
    """`part` read against its control: "holds" or "inconclusive" become "not informative" where the control shows
    no effect beyond the margin; the control's numbers join the part's."""
    c = part.control
    if c is None:
        return part
    verdict = NOT_INFORMATIVE if not c.shows_effect and part.verdict in (HOLDS, INCONCLUSIVE) else part.verdict
    return replace(part, verdict=verdict, numbers=f"{part.numbers}; {c.text}")


def unread_part(name: str, why: str) -> Part:
    """A part the run cannot read, and `why`."""
    return Part(name, NOT_READ, why, Outcome(NOT_READ))


def tally_part(name: str, members: Sequence[Part], *, anywhere: bool = False, none: str = "") -> Part:
    """A part made of comparisons, settled when the claim is read; with no member, not read (`none` says why)."""
    if not members:
        return unread_part(name, none or "nothing to compare")
    return Part(name, NOT_READ, "", None, tuple(members), anywhere)


@dataclass(frozen=True)
class ClaimReading:
    """One claim of the paper as this run reads it; `decoder` is the same claim read on the run's causal LMs."""

    claim: str       # key of `papa.paper.paper_numbers.CLAIMS`
    where: str       # the paper's figure or table
    notebook: str    # the section notebook that computes it
    verdict: str     # one of VERDICTS
    ours: str        # our numbers, one line
    evidence: str    # the figure (or table) behind it, relative to the run's output folder
    parts: tuple[Part, ...] = field(default=())
    decoder: "ClaimReading | None" = None
    ran: bool = True  # False: nothing of the claim ran at all

    @property
    def text(self) -> str:
        """The paper's claim."""
        return CLAIMS[self.claim]

    @property
    def rule(self) -> str:
        """How the verdict is read, in one line."""
        return RULES[self.claim]

    @property
    def unread(self) -> list[str]:
        """The parts of the claim this run could not read."""
        return [p.name for p in self.parts if p.verdict == NOT_READ]

    @property
    def verdict_text(self) -> str:
        """The verdict as printed: "partly read (k of m parts)" says how much was read."""
        if self.verdict != PARTLY_READ:
            return self.verdict
        read = sum(p.verdict not in UNREAD for p in self.parts)
        idle = sum(p.verdict == NOT_INFORMATIVE for p in self.parts)
        return f"{PARTLY_READ} ({read} of {len(self.parts)} parts" + (f"; {idle} not informative)" if idle else ")")


def _corrected(parts: Sequence[Part]) -> list[Part]:
    """The parts Holm-corrected: each "somewhere" tally across its members for "holds", then every comparison of
    the claim as one family for "does not hold" (any one of them decides it)."""
    parts = [settle_anywhere(p) if p.members and p.anywhere else p for p in parts]
    family = [(i, None) for i, p in enumerate(parts) if p.test is not None]
    family += [(i, j) for i, p in enumerate(parts) if p.members and not p.anywhere
               for j, m in enumerate(p.members) if m.test is not None]
    tests = [parts[i].test if j is None else parts[i].members[j].test for i, j in family]
    fixed = dict(zip(family, corrected(tests, "fails")))
    out = []
    for i, p in enumerate(parts):
        if (i, None) in fixed:
            p = gated(replace(p, verdict=fixed[i, None].verdict, test=fixed[i, None]))
        elif p.members and not p.anywhere:
            members = tuple(gated(replace(m, verdict=fixed[i, j].verdict, test=fixed[i, j])) if (i, j) in fixed
                            else m for j, m in enumerate(p.members))
            verdict = all_of(m.verdict for m in members)
            p = replace(p, verdict=verdict, numbers=_tally_text(members, verdict), members=members)
        out.append(p)
    return out


def settle_anywhere(part: Part) -> Part:
    """A "somewhere" tally: Holm across its members for "holds"; it fails only where all do, so it carries their
    largest p of failing."""
    members = [replace(m, verdict=t.verdict, test=t)
               for m, t in zip(part.members, corrected([m.test or Outcome(m.verdict) for m in part.members], "holds"))]
    verdict = any_of(m.verdict for m in members)
    p_fails = max((m.test.p_fails for m in members if m.verdict not in UNREAD), default=math.nan)
    read = [m for m in members if m.verdict not in UNREAD]
    held = sum(m.verdict == HOLDS for m in members)
    smallest = min((m.test.p_adjusted for m in read), default=math.nan)
    holm = f"Holm over {len(read)}" + (f", smallest adjusted p {smallest:.3f}" if math.isfinite(smallest) else "")
    return replace(part, verdict=verdict, test=Outcome(verdict, math.nan, p_fails), members=tuple(members),
                   numbers=f"holds on {held} of {len(read)} ({holm})" + _example(members, verdict))


def claim_reading(claim: str, where: str, notebook: str, evidence: str, parts: Sequence[Part], ours: str = ""
                  ) -> ClaimReading:
    """A claim read from its `parts`, Holm-corrected, with its verdict and one line of numbers (`ours` when given)."""
    parts = _corrected(parts)
    verdict = all_of(p.verdict for p in parts)
    shown = [p for p in parts if p.verdict != NOT_READ]
    line = ours or "; ".join(f"{p.name}: {p.numbers} ({p.verdict})" for p in shown)
    unread = [p for p in parts if p.verdict == NOT_READ]
    if unread and shown:
        line += "; not read: " + "; ".join(f"{p.name} ({p.numbers})" for p in unread)
    elif unread:
        line = "; ".join(f"{p.name}: {p.numbers}" for p in unread)
    return ClaimReading(claim, where, notebook, verdict, line, evidence, tuple(parts))


def not_read_claim(claim: str, where: str, notebook: str, evidence: str, why: str) -> ClaimReading:
    """A claim of which nothing ran, and `why`."""
    return ClaimReading(claim, where, notebook, NOT_READ, why, evidence, (unread_part(claim, why),), ran=False)


def _example(parts: Sequence[Part], verdict: str) -> str:
    """A member that illustrates a tally's `verdict`: where it holds, the one nearest to failing; else the first."""
    verdict = HOLDS if verdict == PARTLY_READ else verdict
    alike = [p for p in parts if p.verdict == verdict]
    if not alike:
        return ""
    if verdict == HOLDS:
        shown = max(alike, key=lambda p: p.test.p_holds if p.test is not None and math.isfinite(p.test.p_holds)
                    else -1.0)
    else:
        shown = alike[0]
    return f" (e.g. {shown.name} {shown.numbers})"


def _tally_text(parts: Sequence[Part], verdict: str) -> str:
    """The count per verdict and one example, e.g. "holds on 10 of 12, inconclusive on 2 (e.g. ...)"."""
    counts = [(v, sum(p.verdict == v for p in parts))
              for v in (HOLDS, INCONCLUSIVE, DOES_NOT_HOLD, NOT_INFORMATIVE, NOT_READ)]
    text = ", ".join(f"{v} on {n}" + (f" of {len(parts)}" if i == 0 else "") for i, (v, n) in enumerate(counts)
                     if n or i == 0)
    return text + _example(parts, verdict)

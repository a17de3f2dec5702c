"""The pages' hand-written prose states no fact of the run: no verdict, count of parts or draws of a ranking outside
the blocks docs/gen_measurements.py writes from the committed run (hand-written, "learned once … not read" and "λ
rankings of two seeds" could stand beside generated blocks that read four draws).

A hand-written sentence may explain a rule; what the run shows under that rule is generated, so that a rerun cannot
leave a page saying one thing in its prose and another in its blocks.
"""
from __future__ import annotations

import re

import pytest

from conftest import REPO

PAGES = [REPO / "README.md", REPO / "docs" / "results.md", REPO / "docs" / "decoders.md", REPO / "docs" / "status.md"]

#: Statements about the run that only a generated block may make.
RUN_FACTS = {
    "a count of a ranking's draws": re.compile(
        r"rankings? (?:of|with) (?:one|two|three|four|five|\d+) (?:seeds|draws)|(?:one|two|three|four|\d+) seeds "
        r"(?:of theirs )?reproduce|learned once", re.I),
    "a verdict on a claim or a figure": re.compile(
        r"(?:Fig\. \d|Table \d|claims? \(?[a-z]\)?|[A-Z][a-zA-Z-]+'s λ parts)[^.;:]{0,80}?"
        r"\b(?:is|are) (?:not )?read\b|\ball of Fig\. \d[^.]{0,40}\bnot read", re.I),
    "a tally of parts": re.compile(r"\b\d+ of \d+(?: parts)?\b[^.]{0,20}\b(?:hold|read)", re.I),
    "a claim named by a letter the pages never define": re.compile(r"\bclaims? \([a-h]\)", re.I),
}


def hand_written(text: str) -> str:
    """`text` without its generated blocks (between ``<!-- name: begin -->`` and ``<!-- name: end -->``)."""
    return re.sub(r"<!-- ([a-z0-9-]+): begin -->.*?<!-- \1: end -->", "", text, flags=re.S)


def run_facts(text: str) -> list[str]:
    """The hand-written statements of the run in a page's `text`: each as "what: the words"."""
    prose = hand_written(text)
    return [f"{what}: {m.group(0)!r}" for what, pattern in RUN_FACTS.items() for m in pattern.finditer(prose)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_hand_written_sentence_states_a_fact_of_the_run(page):
    found = run_facts(page.read_text(encoding="utf-8"))
    assert not found, f"{page.name} states the run by hand (generate it or remove it): {found}"


@pytest.mark.parametrize("sentence", [
    "committed: the λ rankings of two seeds and the constants",
    "A ranking learned once has nothing to be gated on.",
    "so their λ parts at 1/2 and all of Fig. 5 (read on SST-2 alone) are not read",
    "Fig. 5 is not read on the decoder",
    "Claims (b) and (d) are read on both",
    "its Fig. 6 is 4 of 12 parts read",
])
def test_the_guard_catches_hand_written_run_facts(sentence):
    assert run_facts(sentence)


def test_generated_blocks_are_left_to_the_drift_test():
    """A block's verdicts are the run's own (the drift test holds them), so the guard skips them."""
    block = "<!-- claims: begin -->\nFig. 5 is not read; holds on 7 of 9\n<!-- claims: end -->\n"
    assert run_facts(block) == [] and run_facts(block.replace("<!-- claims: end -->", "")) != []

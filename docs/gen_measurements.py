"""Regenerate the quick reproduction's table in docs/measurements.md from the committed reference run
(``artifacts/timings/quick/``: the run's own notebook_times.csv and reproduction.json), so that no time there is
typed by hand. A unit test (tests/unit/reproduce/test_timings.py) fails when the page and the files differ.

    python docs/gen_measurements.py
"""
from __future__ import annotations

from pathlib import Path

from papa.reproduce.timings import REFERENCE_DIR, measurements_block, reference

PAGE = Path(__file__).resolve().parent / "measurements.md"
BEGIN, END = "<!-- quick-run: begin -->", "<!-- quick-run: end -->"


def update(page: Path = PAGE, reference_dir: Path = REFERENCE_DIR, profile: str = "quick") -> None:
    """Replace what lies between the page's markers with `measurements_block` of `profile`'s reference run."""
    expected = reference(profile, reference_dir)
    if expected is None:
        raise SystemExit(f"no reference run of profile {profile} in {reference_dir}: copy notebook_times.csv and "
                         "reproduction.json of a run from an empty folder there")
    text = page.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{page} has no {BEGIN} ... {END} block to fill")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    page.write_text(f"{head}{BEGIN}\n{measurements_block(expected)}\n{END}{tail}", encoding="utf-8")


if __name__ == "__main__":
    update()

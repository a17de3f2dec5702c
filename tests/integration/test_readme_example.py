"""The README's library example runs as printed, on the offline model, and does what its comments say."""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readmes_library_example_runs_and_moves_the_output():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 1, "the README shows one library example"
    out = io.StringIO()
    scope: dict = {}
    with contextlib.redirect_stdout(out):
        exec(compile(blocks[0], "README.md", "exec"), scope)  # noqa: S102 -- the README's own code, as a user runs it
    moved = float(re.search(r"tensor\(([-\d.e]+)", out.getvalue()).group(1))
    assert moved > 0  # two heads replaced: the output moved
    assert scope["ctrl"].head_modes()[0][3] == "replace" and scope["ctrl"].head_modes()[0][2] != "replace"

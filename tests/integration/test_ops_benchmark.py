"""benchmarks/ops.py on the real offline model: one row per mode, exact op counts, and the attention-free pass
running fewer ops than any mode that keeps some input-dependent heads."""
from __future__ import annotations

import pytest

from benchmarks import ops

pytestmark = pytest.mark.integration


def _rows(capsys) -> dict[str, list[str]]:
    assert ops.main(["--repeats", "1"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "---" not in line]
    return {cells[0]: cells[1:] for cells in ([c.strip() for c in line.strip("|").split("|")] for line in lines[1:])}


def test_ops_per_mode(capsys):
    rows = _rows(capsys)
    assert list(rows) == ["plain", "capture", "attention-free (all constant, Q/K dropped)",
                          "1/2 input-dependent, Q/K dropped", "λ mix (every head)"]
    ops_per_pass = {name: int(cells[0]) for name, cells in rows.items()}
    free = "attention-free (all constant, Q/K dropped)"
    assert ops_per_pass[free] < min(v for k, v in ops_per_pass.items() if k not in ("plain", free))
    assert all(float(cells[4]) > 0 for cells in rows.values())  # host milliseconds per pass
    # added ops per layer (attention-free runs fewer than the plain forward: negative), those that are not views (each
    # mode launches kernels of its own), and the target beside each mode that has one
    others = [cells for name, cells in rows.items() if name != "plain"]
    assert all(float(cells[2]) > 0 and cells[3].startswith("≤ ") and "(met)" in cells[3] for cells in others)
    assert float(rows[free][1]) < 0 < min(float(cells[1]) for name, cells in rows.items()
                                          if name not in ("plain", free))
    # counts are exact: a second run counts the same
    assert {name: int(cells[0]) for name, cells in _rows(capsys).items()} == ops_per_pass

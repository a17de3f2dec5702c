"""benchmarks/probe_diagnosis.py on the real offline model and SST-2: both probes' rows, with sane numbers."""
from __future__ import annotations

import re
import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import probe_diagnosis  # noqa: E402

pytestmark = pytest.mark.integration


def test_the_diagnosis_table_on_minilm(data_dir, capsys):
    probe_diagnosis.main(["--model", "all-MiniLM-L6-v2", "--task", "sst2", "--train", "48", "--eval", "32",
                          "--epochs", "1", "--data-dir", str(data_dir)])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith(("| raw", "| standardised"))]
    assert len(rows) == 2
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        shares = [float(cells[i]) for i in (1, 3, 4, 5)]
        assert all(0.0 <= s <= 1.0 for s in shares)
        assert 0.0 <= float(re.search(r"accuracy ([0-9.]+)", cells[7]).group(1)) <= 1.0
    # MiniLM's features are LayerNorm'd: the paper's probe starts unsaturated
    assert float(rows[0].strip("|").split("|")[1]) < 0.1
    assert "48 training / 32 evaluation examples" in out


def test_a_task_without_a_trained_probe_is_refused_before_loading(capsys):
    with pytest.raises(SystemExit):
        probe_diagnosis.main(["--task", "lm"])
    assert "--task must be a sentence, pair or token task" in capsys.readouterr().err

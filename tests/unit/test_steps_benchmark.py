"""benchmarks/steps.py: its inputs are checked before any work, and its smoke mode times every kind of
step in every mode the CPU runs and writes the JSON's fields (no timing is asserted)."""
from __future__ import annotations

import json

import pytest

from benchmarks import steps


@pytest.mark.parametrize("argv, says", [
    (["--smoke", "--device", "cpu", "--modes", "graphed"], "--modes graphed: step mode 'graphed' replays CUDA graphs"),
    (["--smoke", "--device", "cpu", "--steps", "0"], "--steps must be at least 1"),
    (["--smoke", "--device", "cpu", "--peak-tflops", "-1"], "--peak-tflops must be positive"),
    (["--smoke", "--device", "cpu", "--tasks", "lm"], "--tasks lm: it trains no probe"),
    (["--device", "cpu"], "--hub None: give the folder"),
])
def test_bad_input_is_refused_before_any_work(argv, says, tmp_path):
    with pytest.raises(SystemExit, match=says.replace("(", r"\(")):
        steps.check(steps._arguments([*argv, "--json", str(tmp_path / "out.json")]))


@pytest.mark.slow  # the benchmark's smoke run, every kind and mode
def test_smoke_writes_every_kind_and_mode(tmp_path, capsys):
    out = tmp_path / "steps.json"
    assert steps.main(["--smoke", "--device", "cpu", "--tasks", "sst2", "--steps", "2", "--repeats", "1",
                       "--peak-tflops", "1.0", "--json", str(out)]) == 0
    written = json.loads(out.read_text())
    rows = written["rows"]
    assert written["smoke"] is True
    assert {(r["kind"], r["mode"]) for r in rows} == {(k, m) for k in steps.KINDS for m in ("eager", "compiled")}
    for r in rows:
        assert r["step_s"] > 0 and r["flops_per_step"] > 0
        assert r["tflops"] == pytest.approx(r["flops_per_step"] / r["step_s"] / 1e12)
        assert r["peak_share"] == pytest.approx(r["tflops"] / 1.0)
        assert (r["n"], r["batch_size"], r["task"], r["backend"]) == (16, 4, "sst2", "aot_eager")
    by = {(r["kind"], r["mode"]): r for r in rows}
    for kind in steps.KINDS:
        assert by[(kind, "eager")]["speedup_vs_eager"] == 1.0
        assert by[(kind, "compiled")]["speedup_vs_eager"] == pytest.approx(
            by[(kind, "eager")]["step_s"] / by[(kind, "compiled")]["step_s"])
    # λ and trained constants run the backbone forward and backward: far more FLOPs than a stored probe's step
    assert by[("lambda", "eager")]["flops_per_step"] > 2 * by[("stored", "eager")]["flops_per_step"]
    assert "| model | task | n | batch | kind | mode |" in capsys.readouterr().out


@pytest.mark.slow  # the benchmark's smoke run, stopped after its first kind
def test_a_stopped_run_keeps_every_kind_it_measured(tmp_path, monkeypatch):
    out, timed, real = tmp_path / "steps.json", [], steps.KindBench.time

    def stops_at_the_second(self):
        if timed:
            raise RuntimeError("stopped")
        timed.append(self.kind)
        return real(self)

    monkeypatch.setattr(steps.KindBench, "time", stops_at_the_second)
    with pytest.raises(RuntimeError, match="stopped"):
        steps.main(["--smoke", "--device", "cpu", "--tasks", "sst2", "--steps", "2", "--repeats", "1",
                    "--peak-tflops", "1.0", "--json", str(out)])
    written = json.loads(out.read_text())
    assert written["complete"] is False and {r["kind"] for r in written["rows"]} == set(timed)

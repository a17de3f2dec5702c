"""benchmarks/store_paths.py --smoke: the step's fetch timed on every store path a CPU has, on tiny shapes, with
its inputs checked before any work."""
from __future__ import annotations

import json

import pytest

from benchmarks import store_paths as bench_store


def test_the_smoke_run_times_every_path_the_cpu_has(tmp_path, capsys):
    out = tmp_path / "paths.json"
    bench_store.main(["--smoke", "--seeds", "2", "--json", str(out), "--folder", str(tmp_path)])
    record = json.loads(out.read_text())
    paths = [row["path"] for row in record["rows"]]
    assert paths == ["host: all seeds in one gather", "host: one get per seed", "host_bf16: prefetch",
                     "disk: batch by batch", "disk_streamed: chunks", "disk_streamed_bf16: chunks"]
    # one epoch of 64 examples in batches of 4: 16 steps on every path, chunks included
    assert all(row["steps"] == 16 and row["ms_per_step"] > 0 for row in record["rows"])
    assert record["command"].startswith("python -m benchmarks.store_paths --smoke")
    assert "disk_streamed: chunks" in capsys.readouterr().out
    assert [p.name for p in tmp_path.iterdir()] == ["paths.json"]  # the disk stores are removed
    assert record["complete"] is True


def test_a_stopped_run_keeps_every_path_it_timed(tmp_path, monkeypatch):
    out, real = tmp_path / "paths.json", bench_store._fetch_seconds
    calls = []

    def stops_at_the_fifth(*args):
        calls.append(1)
        if len(calls) > 4:  # two passes a path: two paths timed, the third stopped
            raise RuntimeError("stopped")
        return real(*args)

    monkeypatch.setattr(bench_store, "_fetch_seconds", stops_at_the_fifth)
    with pytest.raises(RuntimeError, match="stopped"):
        bench_store.main(["--smoke", "--json", str(out), "--folder", str(tmp_path)])
    record = json.loads(out.read_text())
    assert record["complete"] is False and len(record["rows"]) == 2


@pytest.mark.parametrize("args, message", [(["--examples", "0"], "--examples 0"), (["--kept", "1.5"], "--kept 1.5"),
                                           (["--seeds", "0"], "--seeds 0"),
                                           (["--chunk-examples", "0"], "--chunk-examples 0"),
                                           (["--folder", "/no/such/folder"], "no such folder")])
def test_bad_inputs_are_refused_before_any_work(args, message, capsys):
    with pytest.raises(SystemExit):
        bench_store.main(["--smoke", *args])
    assert message in capsys.readouterr().err

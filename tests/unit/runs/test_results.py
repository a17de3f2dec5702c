"""The tidy results table: atomic appends, run ids, seed aggregation with t-intervals, relative drops."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from papa.core.errors import CorruptArtifactError, IncompatibleArtifactError
from papa.runs.results import COLUMNS, ResultRow, ResultsTable, aggregate, relative_drop, run_id


def row(seed: int = 0, value: float = 0.5, *, fraction: float | str = 1.0, metric: str = "accuracy",
        model: str = "bert", task: str = "sst2", constants: str = "average", selection: str = "lambda",
        rid: str | None = None, **kw) -> ResultRow:
    config = dict(model=model, task=task, constants=constants, selection=selection, fraction=fraction, seed=seed)
    return ResultRow(model=model, task=task, constants=constants, constants_corpus="task", selection=selection,
                     fraction=fraction, n_input_dependent=0, seed=seed, profile="quick", metric=metric, value=value,
                     runtime_s=1.25, run_id=rid or run_id(**config), **kw)


def test_run_id_is_stable_and_order_free():
    a = run_id(model="bert", task="sst2", fraction=0.5, seed=0)
    assert len(a) == 16 and int(a, 16) >= 0
    assert a == run_id(seed=0, fraction=0.5, task="sst2", model="bert")
    assert a == run_id(model="bert", task="sst2", fraction=Fraction(1, 2), seed=0)
    assert a != run_id(model="bert", task="sst2", fraction=0.5, seed=1)
    with pytest.raises(TypeError, match="cannot hash"):
        run_id(model=object())


def test_row_fills_label_and_validates():
    r = row(fraction="1/16", extra={"b": 2, "a": 1})
    assert r.fraction == 0.0625 and r.fraction_label == "1/16" and r.extra == '{"a": 1, "b": 2}'
    assert list(r.to_dict()) == list(COLUMNS)
    with pytest.raises(ValueError, match="unknown profile"):
        ResultRow(**{**row().to_dict(), "profile": "huge"})
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        row(fraction=2.0)


def test_append_read_round_trip(tmp_path):
    table = ResultsTable(tmp_path / "results.csv")
    empty = table.read()
    assert list(empty.columns) == list(COLUMNS) and empty.empty
    rows = [row(s, value=1 / 3 + s / 10) for s in range(3)] + [row(0, value=0.8, metric="f1", model="NA")]
    rows[0].extra = '{"note": "a, \\"quoted\\" value"}'
    table.append(rows)
    df = table.read()
    assert list(df.columns) == list(COLUMNS) and len(df) == 4
    assert df["value"].tolist() == [r.value for r in rows]  # floats survive the CSV exactly
    assert df["model"].tolist() == ["bert", "bert", "bert", "NA"]  # "NA" is a name, not a missing value
    assert df["extra"].tolist() == [rows[0].extra, "", "", ""]
    assert df["seed"].dtype == np.int64 and df["fraction"].dtype == np.float64
    assert table.completed_ids() == {r.run_id for r in rows}
    assert table.has(rows[1].run_id) and not table.has("0" * 16)


def test_rerun_replaces_rows_of_its_run_id(tmp_path):
    table = ResultsTable(tmp_path / "results.csv")
    table.append([row(0, 0.5), row(1, 0.6)])
    table.append(row(0, 0.9))  # same configuration, new value
    df = table.read()
    assert len(df) == 2 and df["run_id"].is_unique
    assert df.set_index("seed").loc[0, "value"] == 0.9
    # A run with two metrics shares one run_id; re-running it replaces both.
    rid = run_id(kind="two-metrics")
    table.append([row(5, 0.1, metric="f1", rid=rid), row(5, 0.2, metric="accuracy", rid=rid)])
    table.append([row(5, 0.3, metric="f1", rid=rid)])
    again = table.read()
    assert again[again.run_id == rid][["metric", "value"]].values.tolist() == [["f1", 0.3]]


def test_append_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "results.csv"
    table = ResultsTable(path)
    table.append([row(0), row(1)])
    left = [".results.csv.lock", "results.csv"]  # no temp file left behind; the lock file stays by design
    assert sorted(p.name for p in tmp_path.iterdir()) == left
    before = path.read_bytes()

    def crash(self, *args, **kwargs):
        raise KeyboardInterrupt("interrupted while writing")

    monkeypatch.setattr(pd.DataFrame, "to_csv", crash)
    with pytest.raises(KeyboardInterrupt):
        table.append([row(2)])
    monkeypatch.undo()
    assert path.read_bytes() == before  # the old table is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == left


def _append_each(path, seeds) -> None:
    table = ResultsTable(path)
    for seed in seeds:
        table.append([row(seed)])


@pytest.mark.slow  # processes appending at once
def test_concurrent_appends_keep_every_row(tmp_path):
    """Four processes append six rows each, one at a time, to one table: the lock keeps every row (without it, two
    writers that read the same table each rewrite it without the other's row)."""
    import multiprocessing

    path = tmp_path / "results.csv"
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_append_each, args=(path, range(w * 6, w * 6 + 6))) for w in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert [w.exitcode for w in workers] == [0, 0, 0, 0]
    assert sorted(ResultsTable(path).read()["seed"]) == list(range(24))


def test_a_table_of_another_format_is_refused_in_one_line(tmp_path):
    """A table without the format column (papa's first format, whose run ids hashed fewer settings) or of another
    format is refused before it is read, naming the format it has and the one papa reads."""
    path = tmp_path / "results.csv"
    pd.DataFrame([row(s).to_dict() for s in range(2)]).drop(columns="format").to_csv(path, index=False)
    with pytest.raises(IncompatibleArtifactError, match=r"results table that is in artifact format 1; this papa "
                                                        r"reads format 2") as err:
        ResultsTable(path).read()
    assert "\n" not in str(err.value)
    with pytest.raises(IncompatibleArtifactError):
        ResultsTable(path).append(row(5))  # an append never mixes formats either
    pd.DataFrame([{**row().to_dict(), "format": 3}]).to_csv(path, index=False)
    with pytest.raises(IncompatibleArtifactError, match="artifact format 3"):
        ResultsTable(path).read()
    table = ResultsTable(tmp_path / "new.csv")
    table.append(row(0, layout="sep_last"))
    assert set(table.read()["format"]) == {2} and list(table.read()["layout"]) == ["sep_last"]
    with pytest.raises(ValueError, match="unknown layout"):
        row(layout="left")
    with pytest.raises(ValueError, match="unknown dtype 'float64'"):
        row(dtype="float64")


def test_read_validates_columns(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text("model,task,value,format\nbert,sst2,0.5,2\n")
    with pytest.raises(CorruptArtifactError, match=r"results\.csv lacks the column\(s\) constants"):
        ResultsTable(path).read()
    pd.DataFrame([{**row().to_dict(), "seed": "zero"}]).to_csv(path, index=False)
    with pytest.raises(CorruptArtifactError, match="'seed' holds a non-number"):
        ResultsTable(path).read()


def test_aggregate_three_seeds_by_hand():
    values = [0.80, 0.85, 0.87]
    df = pd.DataFrame([row(s, v).to_dict() for s, v in enumerate(values)]
                      + [row(0, 0.7, fraction=0.0).to_dict()])
    agg = aggregate(df)
    assert list(agg.columns) == ["model", "task", "constants", "constants_corpus", "selection", "fraction",
                                 "fraction_label", "profile", "layout", "dtype", "probe_inputs", "precision", "execution",
                                 "batch_order", "metric", "n", "mean", "std", "ci95", "low", "high"]
    assert agg["fraction"].tolist() == [0.0, 1.0]  # sorted by the group keys
    full = agg[agg.fraction == 1.0].iloc[0]
    mean = sum(values) / 3
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / 2)
    half = stats.t.ppf(0.975, 2) * std / math.sqrt(3)  # t(0.975, 2) = 4.303
    assert full["n"] == 3 and full["fraction_label"] == "1"
    assert full["mean"] == pytest.approx(mean) and full["std"] == pytest.approx(std)
    assert full["ci95"] == pytest.approx(half) and half == pytest.approx(4.302653 * std / math.sqrt(3))
    assert (full["low"], full["high"]) == (pytest.approx(mean - half), pytest.approx(mean + half))
    single = agg[agg.fraction == 0.0].iloc[0]
    assert single["n"] == 1 and single["mean"] == 0.7
    assert math.isnan(single["ci95"]) and math.isnan(single["std"])


def test_aggregate_empty_and_missing_columns(tmp_path):
    agg = aggregate(ResultsTable(tmp_path / "not-yet.csv").read())
    assert agg.empty and {"n", "mean", "ci95"} <= set(agg.columns)
    with pytest.raises(KeyError, match="selection"):
        aggregate(pd.DataFrame({"model": ["a"], "value": [1.0]}))


def test_relative_drop():
    rows = []
    for model, base, zero in (("bert", 0.80, 0.72), ("roberta", 0.90, 0.81)):
        for s in range(3):
            rows.append(row(s, base, model=model, fraction=1.0).to_dict())
            rows.append(row(s, zero, model=model, fraction=0.0).to_dict())
            rows.append(row(s, base - 0.01, model=model, fraction=0.5).to_dict())
    agg = aggregate(pd.DataFrame(rows))
    drop = relative_drop(agg)
    assert drop["model"].tolist() == ["bert", "roberta"]
    assert drop["relative_drop"].tolist() == pytest.approx([0.1, 0.1])
    assert drop["baseline"].tolist() == pytest.approx([0.80, 0.90]) and drop["target"].tolist() == pytest.approx(
        [0.72, 0.81])
    half = relative_drop(agg, target_fraction="1/2")
    assert half["relative_drop"].tolist() == pytest.approx([0.01 / 0.80, 0.01 / 0.90])


def test_relative_drop_with_baseline_recorded_without_constants():
    rows = [row(0, 0.8, fraction=1.0, constants="none", selection="none").to_dict(),
            row(0, 0.6, fraction=0.0, constants="average").to_dict(),
            row(0, 0.4, fraction=0.0, constants="zeros").to_dict()]
    agg = aggregate(pd.DataFrame(rows))
    assert relative_drop(agg)["relative_drop"].isna().all()  # no baseline with the same constants kind
    drop = relative_drop(agg, match=("model", "task", "profile", "metric"))
    assert drop.set_index("constants")["relative_drop"].to_dict() == pytest.approx({"average": 0.25, "zeros": 0.5})
    twice = aggregate(pd.DataFrame(rows + [row(0, 0.8, fraction=1.0, selection="random").to_dict()]))
    with pytest.raises(ValueError, match="ambiguous baseline"):
        relative_drop(twice, match=("model", "task", "profile", "metric"))


_groups = st.lists(
    st.tuples(st.sampled_from(["bert", "roberta"]), st.sampled_from([0.0, 0.0625, 0.5, 1.0]),
              st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)),
    min_size=1, max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(_groups)
def test_aggregate_mean_within_group_range(data):
    df = pd.DataFrame([row(i, v, model=m, fraction=f).to_dict() for i, (m, f, v) in enumerate(data)])
    agg = aggregate(df)
    assert agg["n"].sum() == len(df)
    for _, g in agg.iterrows():
        vals = df[(df.model == g["model"]) & (df.fraction == g["fraction"])]["value"]
        tol = 1e-9 * max(1.0, vals.abs().max())  # summation rounding, e.g. mean of [0.1, 0.1, 0.1]
        assert vals.min() - tol <= g["mean"] <= vals.max() + tol
        assert g["n"] == len(vals)
        if g["n"] > 1:
            assert g["ci95"] >= 0 and g["low"] <= g["mean"] <= g["high"]
        else:
            assert math.isnan(g["ci95"])

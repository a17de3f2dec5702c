"""Profiles with per-task sizes: what each task gets, how profile files inherit them, and bad input."""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from papa.core.errors import InputError
from papa.runs.profiles import PROFILES, Profile, get_profile, load_profile_file
from papa.tasks.data import disjoint_part, subset_indices


@pytest.fixture(autouse=True)
def _restore_profiles(monkeypatch):
    # profile files register themselves by name: keep each test's registrations to itself
    monkeypatch.setattr("papa.runs.profiles.PROFILES", dict(PROFILES))


def _file(tmp_path, name, **spec):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"name": name, **spec}), encoding="utf-8")
    return path


def test_cpu_profile_gives_each_task_its_sizes():
    cpu = get_profile("cpu")
    cola, sst2, ner, mrpc = (cpu.for_task(t) for t in ("cola", "sst2", "ner", "mrpc"))
    assert cola.train_limit == 3000 and mrpc.train_limit == 500
    assert cola.epochs is None and cola.eval_limit is None        # Table 3's epochs, whole validation set
    # λ: as many epochs as the measured curves needed (artifacts/lambda_curve/), Table 3's where they never agreed
    assert [cpu.for_task(t).rank_epochs for t in ("cola", "sst2", "ner", "pos", "mrpc")] == [None, None, 2, 1, 1]
    assert cpu.seeds == (0, 1, 2, 3, 4)
    assert sst2.train_limit == cpu.train_limit == 2000 and ner.eval_limit == 500 and ner.train_limit == 1000
    assert cola.name == "cpu" and cola.tasks == ()                 # rows still record the profile's name
    assert cpu.trainable_limit == 200 and cpu.trainable_epochs == 1
    quick = get_profile("quick")
    assert quick.for_task("cola") == dataclasses.replace(quick, tasks=())  # no sizes of its own: the profile's
    assert quick.for_task("lm").eval_limit == 4 and quick.for_task("lm").rank_limit == 4  # the decoder's one batch
    assert cpu.sizes_text().startswith("2000 training examples per task (cola: 3000,")


def test_lm_probe_is_sized_like_lm_and_trains_on_its_learning_curves_largest_point_on_the_cpu():
    quick, cpu = get_profile("quick"), get_profile("cpu")
    for name in ("eval_limit", "corpus_limit", "rank_limit"):
        assert getattr(quick.for_task("lm_probe"), name) == getattr(quick.for_task("lm"), name)
    # the vocabulary-sized probe trains on no more paragraphs than the other probes' examples (quick: a decoder's)
    assert quick.for_task("lm_probe").train_limit <= quick.train_limit
    probe = cpu.for_task("lm_probe")
    # the largest point of its learning curve (on 60 paragraphs it scored below a unigram model); λ (if a grid asks
    # for it) learns on the training paragraphs, so no more of them than the probe trains on
    assert (probe.train_limit, probe.eval_limit, probe.corpus_limit, probe.rank_limit) == (240, 200, 500, 60)
    assert probe.train_limit == max(cpu.curve_sizes("lm_probe")) and probe.rank_limit <= probe.train_limit
    assert (probe.eval_limit, probe.corpus_limit) == (cpu.for_task("lm").eval_limit, cpu.for_task("lm").corpus_limit)


def test_profile_is_hashable_and_equal_however_its_tasks_are_given():
    a = Profile("x", 1, 1, 1, 1, 1, 1, tasks={"cola": {"epochs": 3, "train_limit": None}})
    b = Profile("x", 1, 1, 1, 1, 1, 1, tasks=(("cola", (("train_limit", None), ("epochs", 3))),))
    assert a == b and hash(a) == hash(b)
    assert a.for_task("cola").epochs == 3 and a.for_task("sst2").epochs == 1


def test_a_size_set_in_a_file_holds_for_every_task(tmp_path):
    small = load_profile_file(_file(tmp_path, "small-cpu", base="cpu", train_limit=32, eval_limit=16))
    assert small.for_task("cola").train_limit == 32 and small.for_task("sst2").train_limit == 32
    assert small.for_task("ner").eval_limit == 16
    assert small.for_task("mlm").rank_limit == 400  # sizes the file leaves alone keep the base's per-task values
    own = load_profile_file(_file(tmp_path, "own", base="cpu", tasks={"cola": {"epochs": 3}}))
    assert own.for_task("cola").epochs == 3 and own.for_task("cola").train_limit == 2000
    assert own.for_task("sst2").train_limit == 2000  # "tasks" replaces the base's per-task sizes


@pytest.mark.parametrize("spec, message", [
    ({"tasks": {"colaa": {"epochs": 3}}}, "unknown task 'colaa'"),
    ({"tasks": {"cola": {"seeds": [1]}}}, "a task may set only"),
    ({"tasks": {"cola": {"epochs": 0}}}, "task 'cola'.*epochs must be a positive integer"),
    ({"tasks": ["cola"]}, "\"tasks\" must map task names"),
    ({"trainable_limit": -1}, "trainable_limit must be a positive integer"),
    ({"look_limit": 0}, "look_limit must be a positive integer or null"),
    ({"timing_repeats": 0}, "timing_repeats must be a positive integer"),
    ({"timing_repeats": None}, "timing_repeats must be a positive integer, got None"),
])
def test_bad_per_task_sizes_are_refused_with_what_to_do(tmp_path, spec, message):
    with pytest.raises(ValueError, match=message):
        load_profile_file(_file(tmp_path, "bad", **spec))


def test_the_notebooks_looks_are_sized_by_the_profile(tmp_path):
    quick, cpu = get_profile("quick"), get_profile("cpu")
    assert (quick.look_limit, quick.timing_repeats) == (500, 1)  # a smoke run looks at a part, times once
    assert (cpu.look_limit, cpu.timing_repeats) == (None, 3)     # whole splits
    assert load_profile_file(_file(tmp_path, "looks", base="cpu", look_limit=50)).look_limit == 50


def test_subsets_pick_first_or_fixed_random_examples_in_order():
    assert subset_indices(10, 3, "first") == [0, 1, 2]
    random = subset_indices(1000, 50, "random")
    assert random == sorted(random) and len(set(random)) == 50 and random != list(range(50))
    assert random == subset_indices(1000, 50, "random")  # fixed
    assert subset_indices(5, None, "random") == subset_indices(5, 9, "random") == [0, 1, 2, 3, 4]


def test_disjoint_parts_share_no_example_with_the_grid_or_each_other():
    taken = subset_indices(1000, 300, "random")
    parts = [disjoint_part(1000, taken, 200, k) for k in (1, 2, 3)]
    assert all(len(p) == 200 and p == sorted(p) for p in parts)
    seen = set(taken)
    for p in parts:
        assert not seen & set(p)
        seen |= set(p)
    assert disjoint_part(1000, taken, 200, 2) == parts[1]  # fixed
    with pytest.raises(InputError, match="part 4 of 200 examples outside it needs 1100"):
        disjoint_part(1000, taken, 200, 4)
    with pytest.raises(InputError, match="numbered 1, 2"):
        disjoint_part(1000, taken, 200, 0)


def test_a_grid_runs_with_its_task_sizes():
    from papa.runs.session import GridConfig, resolve_grid

    assert resolve_grid(GridConfig("cola", profile="cpu"))[1].train_limit == 3000
    assert resolve_grid(GridConfig("ner", profile="cpu"))[1].eval_limit == 500


def test_learning_curve_points_are_profiles_of_their_own(tmp_path):
    cpu = get_profile("cpu")
    assert cpu.curve_sizes("mrpc")[-1] is None and cpu.curve_sizes("sst2") == ()
    point = cpu.curve_profile("mrpc", 250)
    assert point.name == "cpu-mrpc-n250" and point.train_limit == 250 and point.epochs is None
    assert get_profile("cpu-mrpc-n250") == point  # registered: result rows and workers find it by name
    assert cpu.curve_profile("mrpc", None).name == "cpu-mrpc-all"
    # at the profile's own size for the task, the point is the profile's own run (not computed twice)
    assert cpu.curve_profile("mrpc", 500) is cpu and cpu.curve_profile("lm_probe", 240) is cpu
    spec = load_profile_file(_file(tmp_path, "curvy", base="quick", curves={"sst2": [8, None]}))
    assert spec.curve_sizes("sst2") == (8, None)
    with pytest.raises(ValueError, match="learning curve of 'sst2' needs a list"):
        load_profile_file(_file(tmp_path, "flat", curves={"sst2": 8}))
    with pytest.raises(ValueError, match="learning curve of 'sst2'.*positive integer"):
        load_profile_file(_file(tmp_path, "zero", curves={"sst2": [0]}))


def test_lambda_learning_rate_is_optional_and_validated(tmp_path):
    assert get_profile("cpu").rank_lr is None  # λ learns at the probe's Table 3 rate
    fast = load_profile_file(_file(tmp_path, "fast-rank", base="cpu", rank_lr=0.01,
                                   tasks={"cola": {"rank_lr": 1, "train_limit": 3000}}))
    assert fast.for_task("sst2").rank_lr == 0.01
    cola = fast.for_task("cola")
    assert cola.rank_lr == 1.0 and isinstance(cola.rank_lr, float)
    assert Profile("x", 1, 1, 1, 1, 1, 1, rank_lr=1e-3) == Profile("x", 1, 1, 1, 1, 1, 1, rank_lr=0.001)


@pytest.mark.parametrize("value", [0, -1e-3, "0.01", True, float("nan"), float("inf")])
def test_bad_lambda_learning_rates_are_refused_with_what_to_do(tmp_path, value):
    with pytest.raises(ValueError, match=r"rank_lr must be a positive number .*or null"):
        Profile("x", 1, 1, 1, 1, 1, 1, rank_lr=value)
    if isinstance(value, float) and not math.isfinite(value):
        return  # JSON has no NaN or infinity
    with pytest.raises(ValueError, match=r"profile file .*task 'cola'.*rank_lr must be a positive number"):
        load_profile_file(_file(tmp_path, "bad-rate", tasks={"cola": {"rank_lr": value}}))


RHO_NEEDED = 0.9  # the cpu profile's rule (papa/runs/profiles.py): ρ >= 0.9 between two seeds, else Table 3's


def _curves_by_task() -> dict[str, dict]:
    """The longest measured λ learning curve of each task (artifacts/lambda_curve/, by its lambda_curve.py)."""
    longest: dict[str, dict] = {}
    for path in sorted((Path(__file__).resolve().parents[3] / "artifacts" / "lambda_curve").glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        if record["profile"] == "cpu" and record["rows"] and \
                record["steps"] > longest.get(record["task"], {}).get("steps", 0):
            longest[record["task"]] = record
    return longest


def test_cpu_lambda_epochs_are_the_fewest_the_measured_curves_needed():
    from papa.tasks.registry import get_task

    curves = _curves_by_task()
    assert {"cola", "sst2", "ner", "pos"} <= set(curves)  # every task whose probe learns was measured
    cpu = get_profile("cpu")
    for task, record in curves.items():
        per_epoch = math.ceil(record["examples"] / record["batch_size"])
        paper = [r for r in record["rows"] if r["lambda_lr"].endswith("(paper)")]
        table3 = get_task(task).hparams.epochs
        agreed = [r["step"] // per_epoch for r in paper if r["spearman"] >= RHO_NEEDED and r["step"] % per_epoch == 0]
        wanted = min(agreed) if agreed and min(agreed) < table3 else None  # None: Table 3's epochs
        assert record["examples"] == cpu.for_task(task).rank_limit
        assert cpu.for_task(task).rank_epochs == wanted, task

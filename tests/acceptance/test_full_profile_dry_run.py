"""A dry run of the `full` profile: the seven section notebooks, executed by papermill as `papa reproduce` executes
them, on the paper's models, at the sizes of a tiny profile file based on `full`.

The models are the paper's seven architectures built from the hub folders (../shared/hub, $PAPA_HUB_DIR: configs
and tokenizers, no weights) with seeded random weights and saved locally; the profile's hub ids are pointed at them
(`run_notebooks(Batch(model_dir=...))`). The data are the real local files (../shared/data, $PAPA_DATA_DIR) plus a
few lines of MNLI in the GLUE layout, which the data directory lacks. So every path the full profile takes on the
paper's models runs here (24 layers x 16 heads, 1/16 of 384 heads, sentence pairs at n = 256 in the MNLI layout,
ELECTRA in notebook 07); the numbers mean nothing. The base models (all seven notebooks) and the large ones
(notebooks 02, 04, 05) run as two tests (`run_notebooks(Batch(models=...))`): together they took 19 minutes on 2
idle CPU cores (about 40 on busy ones).
The test prints what each notebook and each model's grids cost (run with ``-s``)::

    PAPA_FULL_DRY_RUN=1 .venv/bin/python -m pytest -s tests/acceptance/test_full_profile_dry_run.py
"""
from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from papa.core.vocabulary import PAPER_NOTEBOOKS
from papa.reproduce.batch import Batch
from papa.reproduce.notebooks import ELECTRA_BASE, PAPER_BASE, PAPER_LARGE, PAPER_TASKS, run_notebooks

# Too long for CI (which must stay under 45 minutes): run on demand, before a full reproduction.
pytestmark = [pytest.mark.integration, pytest.mark.acceptance, pytest.mark.slow,
              pytest.mark.skipif(os.environ.get("PAPA_FULL_DRY_RUN") != "1",
                                 reason="the full profile's dry run takes about 20 minutes on 2 CPU cores: set "
                                        "PAPA_FULL_DRY_RUN=1 to run it")]

MODELS = (*PAPER_BASE, *PAPER_LARGE, ELECTRA_BASE)
# The smallest grid that still takes every path: two examples everywhere (one would make some metrics degenerate),
# one epoch, one seed, and the fractions whose head configurations differ in kind (none, 1/16, all replaced).
PROFILE = {"name": "full-dry-run", "base": "full", "train_limit": 2, "eval_limit": 2, "corpus_limit": 2,
           "rank_limit": 2, "rank_epochs": 1, "epochs": 1, "seeds": [0], "fractions": ["1", "1/16", "0"]}
SEED = 0

# MNLI in GLUE's original column layout (train: 12 columns, dev: 16); sentences written for this test. The first
# premises are long, so that the pairs fill n = 256 and get cut, as long MNLI premises do.
MNLI_TRAIN_HEADER = ("index", "promptID", "pairID", "genre", "sentence1_binary_parse", "sentence2_binary_parse",
                     "sentence1_parse", "sentence2_parse", "sentence1", "sentence2", "label1", "gold_label")
MNLI_DEV_HEADER = (*MNLI_TRAIN_HEADER[:11], "label2", "label3", "label4", "label5", "gold_label")
_LONG_PREMISE = ("The committee met every week for a year to read the reports that the regional offices sent in, "
                 "and each time it found that the figures for the northern district did not add up, because the "
                 "office there counted the same shipments twice whenever they crossed a county line. ") * 4
MNLI_ROWS = [  # (genre, premise, hypothesis, gold label)
    ("government", _LONG_PREMISE, "The northern office counted some shipments twice.", "entailment"),
    ("fiction", _LONG_PREMISE, "The committee met only once.", "contradiction"),
    ("travel", "The old town is best seen on foot, early in the morning.", "The old town has a market.", "neutral"),
    ("slate", "Critics loved the film, but it made little money.", "The film was a box-office hit.",
     "contradiction"),
]


def _mnli_line(i: int, genre: str, premise: str, hypothesis: str, gold: str, dev: bool) -> str:
    parses = [f"( {premise} )", f"( {hypothesis} )", f"(ROOT {premise})", f"(ROOT {hypothesis})"]
    labels = [gold] * (5 if dev else 1)
    return "\t".join([str(i), str(1000 + i), f"{1000 + i}e", genre, *parses, premise, hypothesis, *labels, gold])


@pytest.fixture(scope="module")
def dry_data_dir(data_dir: Path, tmp_path_factory) -> Path:
    """The real data directory (linked, not copied), plus glue_data/MNLI with a few lines in the GLUE layout."""
    root = tmp_path_factory.mktemp("data")
    for name in ("conll2003", "wikitext"):
        (root / name).symlink_to(data_dir / name, target_is_directory=True)
    (root / "glue_data").mkdir()
    for task in ("CoLA", "SST-2", "MRPC"):
        (root / "glue_data" / task).symlink_to(data_dir / "glue_data" / task, target_is_directory=True)
    mnli = root / "glue_data" / "MNLI"
    mnli.mkdir()
    for file, header, dev in (("train.tsv", MNLI_TRAIN_HEADER, False), ("dev_matched.tsv", MNLI_DEV_HEADER, True),
                              ("dev_mismatched.tsv", MNLI_DEV_HEADER, True)):
        rows = MNLI_ROWS if not dev else MNLI_ROWS[::-1]
        lines = ["\t".join(header), *(_mnli_line(i, *row, dev=dev) for i, row in enumerate(rows))]
        (mnli / file).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def random_models(hub_dir: Path, tmp_path_factory) -> dict[str, float]:
    """Each of the paper's models with seeded random weights, saved (model and tokenizer) under a folder named as
    its hub id with '/' as '--' (`papa.reproduce.notebooks.local_models`). Yields the folder and the seconds each
    model took to build and save; the folder (about 6 GB) is removed afterwards."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    root = tmp_path_factory.mktemp("models")
    seconds = {}
    for name in MODELS:
        folder = name.replace("/", "--")
        start = time.perf_counter()
        config = AutoConfig.from_pretrained(hub_dir / folder)
        torch.manual_seed(SEED)
        model = AutoModel.from_config(config)
        model.save_pretrained(root / folder)
        AutoTokenizer.from_pretrained(hub_dir / folder).save_pretrained(root / folder)
        del model
        seconds[name] = time.perf_counter() - start
    yield root, seconds
    shutil.rmtree(root, ignore_errors=True)


_GRID_LINE = re.compile(r"^(?P<model>\S+) (?P<task>\w+): (?P<seconds>\d+)s$", re.MULTILINE)


def grid_times(notebook: Path) -> pd.DataFrame:
    """The seconds each (model, task) grid took in an executed notebook, from the lines `run_grids` prints."""
    nb = nbformat.read(notebook, as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                   if o.get("output_type") == "stream" and o.get("name") == "stdout")
    rows = [{"model": m["model"], "task": m["task"], "seconds": int(m["seconds"])} for m in _GRID_LINE.finditer(text)]
    return pd.DataFrame(rows, columns=["model", "task", "seconds"])


# Run apart, the base and the large models each stay closer to a CI budget; the large ones run the notebooks that
# name them (02, 04, 05).
SPLITS = {  # the paper's notebooks: the decoder notebook (08) runs SmolLM2 under every profile
    "base": ((*PAPER_BASE, ELECTRA_BASE), PAPER_NOTEBOOKS),
    "large": (PAPER_LARGE, ("02_main_results", "04_alternative_matrices", "05_data_dependence")),
}


@pytest.mark.parametrize("split", list(SPLITS))
def test_full_profile_dry_run(split, tmp_path, dry_data_dir, random_models):
    models, names = SPLITS[split]
    model_dir, build_seconds = random_models
    profile = tmp_path / "full-dry-run.json"
    profile.write_text(json.dumps(PROFILE))
    out = tmp_path / "out"
    start = time.perf_counter()
    times = run_notebooks(Batch(str(profile), names=names, models=models, out_dir=out, data_dir=str(dry_data_dir),
                                model_dir=model_dir, progress=True))
    total = time.perf_counter() - start

    # Every notebook ran, on the paper's models (local copies), in the profile file's name.
    assert list(times["notebook"]) == list(names)
    results = pd.read_csv(out / "results.csv", keep_default_na=False, dtype={"fraction_label": str})
    assert set(results["profile"]) == {PROFILE["name"]}
    short = results["model"].map(lambda m: Path(m).name)
    assert set(short) == {m.replace("/", "--") for m in models}
    assert set(results["task"]) == ({*PAPER_TASKS, "mlm"} if split == "base" else set(PAPER_TASKS))
    # 1/16 of the heads stay input-dependent: 9 of a base model's 144, 24 of a large model's 384.
    sixteenth = results["fraction_label"] == "1/16"
    counts = {m: set(results.loc[sixteenth & (short == m), "n_input_dependent"]) for m in set(short)}
    assert all(c == ({24} if "large" in m else {9}) for m, c in counts.items() if c), counts
    assert any(counts.values()), counts
    # MNLI's pairs at n = 256 for every model of notebook 02, constants of all heads at that length.
    mnli = results[(results["task"] == "mnli") & (results["fraction_label"] == "0")]
    assert {m.replace("/", "--") for m in models if m != ELECTRA_BASE} <= set(short[mnli.index])
    deberta = "deberta-large" if split == "large" else "deberta-base"
    constants = list((out / "constants").glob(f"*{deberta}__mnli*-official-n256.safetensors"))
    assert constants, sorted(p.name for p in (out / "constants").iterdir())
    from papa.method.constants import load_constants

    loaded = load_constants(constants[0])
    layers, heads = (24, 16) if split == "large" else (12, 12)
    assert tuple(loaded.matrices.shape) == (layers, heads, 256, 256) and loaded.metadata.pairs
    if split == "base":  # ELECTRA in notebook 07: MLM and MNLI
        electra = results[short == "google--electra-base-discriminator"]
        assert set(electra["task"]) == {"mlm", "mnli"}

    # What it cost: per notebook, and per model (the grids' own timings, summed over tasks).
    grids = pd.concat([grid_times(out / "notebooks" / f"{name}.ipynb").assign(notebook=name) for name in names],
                      ignore_index=True)
    per_model = grids.pivot_table(index="model", columns="notebook", values="seconds", aggfunc="sum", fill_value=0)
    per_model["all grids"] = per_model.sum(axis=1)
    per_model["build+save"] = [round(build_seconds.get(_hub_id(m), 0.0)) for m in per_model.index]
    per_task = grids.pivot_table(index="model", columns="task", values="seconds", aggfunc="sum", fill_value=0)
    report = "\n".join([
        f"full-profile dry run, {split} models ({json.dumps({k: v for k, v in PROFILE.items() if k != 'name'})})",
        "seconds per notebook (papermill wall time):", times[["notebook", "seconds"]].to_string(index=False),
        "seconds of grids per model and notebook (the notebooks' own printed timings):", per_model.to_string(),
        "seconds of grids per model and task:", per_task.to_string(),
        f"notebooks: {total:.0f}s; building and saving all seven models: {sum(build_seconds.values()):.0f}s",
    ])
    (tmp_path / f"dry_run_times_{split}.txt").write_text(report + "\n")
    print("\n" + report)


def _hub_id(folder: str) -> str:
    return next((m for m in MODELS if m.replace("/", "--") == folder), folder)

"""One-off: convert papa's committed artifacts from format 1 to format 2 (run once from the repository root).

Every results row's old run id is first recomputed from its row and its profile by format 1's rules (old_ids.py) and
must match; its format-2 configuration is then `papa.runs.keys.run_config` of the same settings, checked against the
plain upgrade of the old configuration (the defaults format 1 left out, added). Predictions and probe-input files are
renamed to the new ids; every safetensors header and JSON record gets format 2.
"""
import glob
import json
import os
import sys
from types import SimpleNamespace as NS

import numpy as np
import pandas as pd
from safetensors.numpy import load_file, save_file
from safetensors import safe_open

import old_ids
from papa.core.artifacts import FORMAT
from papa.core.vocabulary import NONE
from papa.runs.keys import PointKey, run_config
from papa.runs.results import run_id
from papa.tasks.registry import TASKS

DEFAULTS = {"sample": "first", "layout": "sep_last", "dtype": "float32", "probe_inputs": "raw", "precision": "float32",
            "execution": "eager", "batch_order": "per_seed"}


def upgrade(old: dict) -> dict:
    new = {**DEFAULTS, **old, "format": FORMAT}
    if new["rank"] is not None and len(new["rank"]) == 2:
        new["rank"] = [*new["rank"], None]
    elif new["rank"] is not None:
        new["rank"] = list(new["rank"])
    return new


def package_config(row, old: dict) -> dict:
    prof = old_ids.profile_of(row.profile, row.task)
    cfg = NS(task=row.task, rounding=old["rounding"], profile=row.profile, layout=row.layout, dtype=row.dtype,
             probe_inputs=row.probe_inputs, precision=row.precision, compile=row.execution == "compiled",
             batch_order=row.batch_order)
    keeps_all = row.constants == NONE
    key = PointKey(constants=row.constants, constants_corpus=row.constants_corpus, selection=row.selection,
                   n_input_dependent=int(row.n_input_dependent), keeps_all=keeps_all,
                   replaces_all=row.fraction_label == "0")
    kind = row.constants
    return run_config(cfg, prof, key, model=row.model, kind=kind, fraction=row.fraction_label,
                      constants_corpus=row.constants_corpus, trains_probe=TASKS[row.task].trains_probe)


def header(path):
    with safe_open(path, framework="np") as f:
        return f.metadata() or {}


def rewrite(path, key, change, new_path=None):
    """Rewrite the JSON under header `key` of a safetensors file with `change(dict)`; tensors as they are."""
    meta = header(path)
    tensors = load_file(path)
    head = json.loads(meta[key])
    change(head)
    meta[key] = json.dumps(head, sort_keys=True)
    target = new_path or path
    tmp = target + ".tmp"
    save_file(tensors, tmp, metadata=meta)
    os.replace(tmp, target)
    if new_path and new_path != path:
        os.remove(path)


def convert_tables():
    mapping = {}
    for table in old_ids.TABLES:
        old_ids.OLD_QUICK = "own_model/quick" in table
        df = pd.read_csv(table, dtype=str, keep_default_na=False)
        assert "format" not in df, table
        new_ids = []
        for row in df.itertuples():
            old = old_ids.reconstruct(row)
            assert old is not None, (table, row.run_id)
            new = upgrade(old)
            if not old_ids.OLD_QUICK:  # today's quick profile is not the one these rows ran with
                pkg = package_config(row, old)
                assert pkg == new, (table, row.run_id, {k: (pkg.get(k), new.get(k)) for k in set(pkg) | set(new)
                                                        if pkg.get(k) != new.get(k)})
            nid = run_id(**new, seed=int(row.seed))
            assert mapping.get(row.run_id, nid) == nid
            mapping[row.run_id] = nid
            new_ids.append(nid)
        df["run_id"] = new_ids
        df["format"] = str(FORMAT)
        df.to_csv(table, index=False)
        print(table, len(df), "rows")
    return mapping


def convert_predictions(mapping):
    n = 0
    for folder in ("artifacts/cpu/predictions", "artifacts/run_options/cpu/predictions"):
        for path in sorted(glob.glob(f"{folder}/*.safetensors")):
            old = os.path.basename(path)[:-12]
            new = mapping[old]

            def change(head, new=new):
                assert head["format_version"] == 1
                head["format_version"], head["run_id"] = FORMAT, new
            rewrite(path, "papa_predictions", change, f"{folder}/{new}.safetensors")
            n += 1
    print("predictions", n)


def convert_probe_inputs():
    for path in sorted(glob.glob("artifacts/cpu/probe_inputs/*.safetensors")):
        meta = json.loads(header(path)["papa_input_statistics"])
        assert run_id(**meta["point"]) == meta["point_id"] == os.path.basename(path)[:-12]
        new_point = upgrade(meta["point"])
        new_id = run_id(**new_point)

        def change(head, new_point=new_point, new_id=new_id):
            head["point"], head["point_id"], head["format_version"] = new_point, new_id, FORMAT
        rewrite(path, "papa_input_statistics", change, f"artifacts/cpu/probe_inputs/{new_id}.safetensors")
    print("probe inputs", len(glob.glob("artifacts/cpu/probe_inputs/*.safetensors")))


def convert_rankings():
    for path in sorted(glob.glob("artifacts/cpu/rankings/*.safetensors")):
        if json.loads(header(path)["papa_ranking"])["format_version"] == FORMAT:
            continue

        def change(head):
            assert head["format_version"] == 1
            head["format_version"] = FORMAT
            meta = head["metadata"]
            if "lambda_learning_rate" not in meta and "learning_rate" in meta:
                meta["lambda_learning_rate"] = meta["learning_rate"]  # format 1 learned λ at the probe's rate
            name = meta.get("model_name") or meta.get("model", {}).get("model_name")
            assert name and not name.startswith(("/", ".", "~")), (path, name)
        rewrite(path, "papa_ranking", change)
    for path in sorted(glob.glob("artifacts/cpu/rankings/curves/*.safetensors")):
        if json.loads(header(path)["papa_lambda_curve"])["format_version"] == FORMAT:
            continue

        def change(head):
            assert head["format_version"] == 1
            head["format_version"] = FORMAT
        rewrite(path, "papa_lambda_curve", change)
    print("rankings and curves converted")


def convert_json():
    for path in sorted(glob.glob("artifacts/**/phase_times/*.json", recursive=True)):
        if path.startswith("artifacts/quick"):
            continue
        record = json.load(open(path))
        assert record["format"] == "papa-phase-times-1", path
        record["format"] = FORMAT
        text = json.dumps(record, sort_keys=True)
        open(path, "w").write(text)
    for path in ("artifacts/cpu/reproduction.json", "artifacts/own_model/quick/reproduction.json",
                 "artifacts/timings/quick/reproduction.json"):
        record = json.load(open(path))
        assert record["format"] == "papa.reproduction/1"
        record["format"] = FORMAT
        open(path, "w").write(json.dumps(record, indent=1) + "\n")
    index = json.load(open("artifacts/cpu/constants/index.json"))
    for entry in index:
        assert entry["metadata"]["format_version"] == 1
        entry["metadata"]["format_version"] = FORMAT
    open("artifacts/cpu/constants/index.json", "w").write(json.dumps(index, indent=1, sort_keys=True) + "\n")
    print("json records converted")


def convert_run_id_lists(mapping):
    for path in ("artifacts/cross_cpu/cpu/paired.csv", "artifacts/cpu_recheck/pairs.csv"):
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
        df["run_id"] = [mapping[r] for r in df.run_id]
        df.to_csv(path, index=False)
    print("run-id lists converted")


if __name__ == "__main__":
    step = sys.argv[1]
    if step == "check":
        m = {}
        for table in old_ids.TABLES:
            old_ids.OLD_QUICK = "own_model/quick" in table
            df = pd.read_csv(table, dtype=str, keep_default_na=False)
            for row in df.itertuples():
                old = old_ids.reconstruct(row)
                new = upgrade(old)
                if not old_ids.OLD_QUICK:
                    pkg = package_config(row, old)
                    if pkg != new:
                        print(table, row.run_id, {k: (pkg.get(k), new.get(k)) for k in set(pkg) | set(new) if pkg.get(k) != new.get(k)})
                        sys.exit(1)
        print("all rows agree")
    elif step == "rankings":
        convert_rankings()
    elif step == "all":
        mapping = convert_tables()
        convert_predictions(mapping)
        convert_probe_inputs()
        convert_rankings()
        convert_run_id_lists(mapping)
        convert_json()

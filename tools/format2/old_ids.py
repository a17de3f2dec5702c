"""Format 1's run-id rules, kept only for the one-off conversion (to_format2.py): every committed row's run id is
recomputed from its row and its profile. own_model/quick ran under the quick profile of before commit bde4769:
`git show bde4769^:papa/runs/profiles.py > tools/format2/old_profiles.py` first."""
import glob, json, sys
import pandas as pd
from papa.core.vocabulary import (DEFAULT_BATCH_ORDER, DEFAULT_DTYPE, DEFAULT_PRECISION, NONE, PAPER_PROBE_INPUTS,
                                  RANKED, ROUNDINGS)
from papa.method.selection import parse_selection
from papa.runs.profiles import get_profile
from papa.runs.results import run_id
from papa.tasks.registry import TASKS


def ranking_key(p):
    key = (p.rank_limit, p.rank_epochs)
    return key if p.rank_lr is None else (*key, p.rank_lr)


def profile_of(name, task):
    import re
    m = re.fullmatch(r"(\w+)-(\w+)-(n\d+|all)", name)
    if m:
        size = None if m[3] == "all" else int(m[3][1:])
        return get_profile(m[1]).curve_profile(m[2], size)
    if name == "quick" and OLD_QUICK:
        import old_profiles
        return old_profiles.get_profile(name).for_task(task)
    return get_profile(name).for_task(task)


TABLES = ["artifacts/cpu/results.csv", "artifacts/run_options/cpu/results.csv",
          "artifacts/cpu_recheck/frozen_results.csv", "artifacts/cpu_recheck/trained_results.csv",
          "artifacts/own_model/cpu-sst2/results.csv", "artifacts/own_model/quick/results.csv"]


def old_config(row, rounding):
    prof = profile_of(row.profile, row.task)
    spec = TASKS[row.task]
    sel = parse_selection(row.selection) if row.selection != NONE else None
    ranked = sel is not None and sel.method in RANKED
    if ranked and sel.profile not in (None, row.profile):
        prof_rank = ranking_key(get_profile(sel.profile).for_task(row.task))
    else:
        prof_rank = ranking_key(prof)
    keeps_all = row.constants == NONE
    c = dict(model=row.model, task=row.task, constants=row.constants, constants_corpus=row.constants_corpus,
             selection=row.selection, fraction=row.fraction_label, rounding=rounding, profile=row.profile,
             train_limit=prof.train_limit, eval_limit=prof.eval_limit,
             corpus_limit=None if row.constants_corpus == NONE else prof.corpus_limit, epochs=prof.epochs,
             rank=prof_rank if ranked else None)
    if prof.sample != "first":
        c["sample"] = prof.sample
    if row.layout != "sep_last":
        c["layout"] = row.layout
    if row.dtype != DEFAULT_DTYPE:
        c["dtype"] = row.dtype
    if row.probe_inputs != PAPER_PROBE_INPUTS:
        c["probe_inputs"] = row.probe_inputs
    if row.precision != DEFAULT_PRECISION:
        c["precision"] = row.precision
    if row.execution == "compiled":
        c["execution"] = "compiled"
    if row.batch_order != DEFAULT_BATCH_ORDER:
        c["batch_order"] = row.batch_order
    trainable = row.constants.startswith("trainable_") and not keeps_all
    if trainable and (prof.trainable_limit, prof.trainable_epochs) != (None, None):
        c.update(train_limit=prof.trainable_limit or prof.train_limit, epochs=prof.trainable_epochs or prof.epochs)
    return c


OLD_QUICK = False


def reconstruct(row):
    for rounding in ROUNDINGS:
        c = old_config(row, rounding)
        if run_id(**c, seed=int(row.seed)) == row.run_id:
            return c
    return None


if __name__ == "__main__":
    bad = 0
    for f in TABLES:

        OLD_QUICK = "own_model/quick" in f
        df = pd.read_csv(f, keep_default_na=False, dtype=str)
        if "profile" not in df:
            print("skip", f, list(df.columns)); continue
        miss = [r.run_id for r in df.itertuples() if reconstruct(r) is None]
        bad += len(miss)
        print(f, len(df), "unmatched", len(miss), miss[:3])
    sys.exit(1 if bad else 0)

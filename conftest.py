"""The environment of every pytest run in this repository, tests/ and notebooks/ alike (pytest loads this file for
any path under the root, so `pytest notebooks/` gets it as `make test` does)."""
from __future__ import annotations

import os
from pathlib import Path

# Tests never reach the hub: models come from files, data from the data directory, hub paths are faked.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
# nbval's kernels inherit this environment but run in notebooks/: a relative data directory (PAPA_DATA_DIR=
# ../shared/data, typed from the clone's root) is made absolute here, where it was meant, or they would not find it.
if os.environ.get("PAPA_DATA_DIR", "").strip() and not Path(os.environ["PAPA_DATA_DIR"].strip()).is_absolute():
    os.environ["PAPA_DATA_DIR"] = str(Path(os.environ["PAPA_DATA_DIR"].strip()).resolve())

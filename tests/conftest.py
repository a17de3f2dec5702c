"""Shared fixtures: where the real data lives, and tiny random models of every supported architecture."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The local data directory (GLUE TSVs, CoNLL-2003, WikiText): $PAPA_DATA_DIR, else ../shared/data."""
    path = Path(os.environ.get("PAPA_DATA_DIR", REPO.parent / "shared" / "data"))
    if not path.is_dir():
        pytest.skip(f"no data directory at {path}: set PAPA_DATA_DIR to the folder holding glue_data/ and conll2003/")
    return path

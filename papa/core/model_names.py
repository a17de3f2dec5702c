"""How a model is named in what papa records: its name, never where it lies."""
from __future__ import annotations

import os
import re
from pathlib import Path, PurePath

# The Hugging Face cache's layout: <cache>/models--<org>--<name>/snapshots/<revision>
_HF_CACHE_DIR = re.compile(r"^models--(?P<id>.+)$")


def is_local_path(name: str) -> bool:
    """`name` names a place on this machine (absolute, ``./``, ``../``, ``~`` or an existing folder), not a hub id."""
    text = str(name)
    return os.path.isabs(text) or text.startswith((".", "~")) or os.path.isdir(text)


def looks_local(name: str) -> bool:
    """`name` can only be a place on this machine: `is_local_path`, or more than one ``/`` (a hub id has one)."""
    return is_local_path(name) or str(name).count("/") > 1


def model_file_name(model_name: str) -> str:
    """The model's name (in artifact files, result rows, metadata): a hub id or alias as it is; a local folder by its
    name, a mirror's ``org--name`` folder or a Hugging Face cache snapshot by the hub id they record (``org/name``)."""
    if not is_local_path(model_name):
        return str(model_name)
    path = PurePath(os.path.expanduser(str(model_name)))
    if not path.name or path.name in (".", ".."):
        path = Path(os.path.expanduser(str(model_name))).resolve()
    parts = path.parts
    if len(parts) >= 3 and parts[-2] == "snapshots" and _HF_CACHE_DIR.match(parts[-3]):
        return _HF_CACHE_DIR.match(parts[-3])["id"].replace("--", "/")
    return path.name.replace("--", "/")

"""Atomic writes and fingerprints shared by every artifact papa saves, and the check that an output can be written."""
from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from papa.core.errors import Arg, CorruptArtifactError, IncompatibleArtifactError, OutputPathError

#: The format of every artifact papa writes; `check_format` refuses any other.
FORMAT = 2


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path for `path`; on success rename it over `path`, with mode 0666 less the umask. The temporary
    lies in a private folder ``.<name>.<random>.tmp`` beside `path`, which a writer killed mid-write leaves for
    `remove_stale_temporaries`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    tmp_path = folder / path.name
    try:
        yield tmp_path
        with open(tmp_path, "rb") as fh:
            os.fsync(fh.fileno())
        # Writers that replace the file they are given (safetensors does) may leave another mode than the umask's.
        os.chmod(tmp_path, 0o666 & ~_umask())
        os.replace(tmp_path, path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def remove_stale_temporaries(path: str | os.PathLike) -> None:
    """Remove what `atomic_path` writers of `path` killed mid-write left beside it. Only call it where no other writer
    of `path` can be live: it would remove that writer's temporary folder too."""
    path = Path(path)
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)


def check_format(found: object, where: str | os.PathLike, what: str) -> None:
    """Raise `IncompatibleArtifactError` unless `found` (the format a file records; None: it records none) is
    `FORMAT`; `where` names the file and `what` the kind of artifact, e.g. "head ranking"."""
    if found != FORMAT:
        has = "records no artifact format" if found is None else f"is in artifact format {found!r}"
        raise IncompatibleArtifactError(f"{where} is a {what} that {has}; this papa reads format {FORMAT}: make it "
                                        "again with this papa (the command that wrote it, in a new folder).")


@contextmanager
def _opened_safetensors(path: str | os.PathLike, framework: str, fix: str | None) -> Iterator:
    """The safetensors file at `path`, open; a file that cannot be read (missing, truncated, another format) raises
    `CorruptArtifactError` saying so, and `fix` (what the user should do) where given."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework=framework) as f:
            yield f
    except Exception as exc:  # safetensors raises several types for truncated/garbled files
        advice = f"; it may be truncated: {fix}" if fix is not None else ""
        raise CorruptArtifactError(f"{path} is not a readable safetensors file ({exc}){advice}.") from exc


def read_safetensors(path: str | os.PathLike, *, framework: str = "pt", fix: str) -> tuple[dict, dict]:
    """(header metadata, tensors) of the safetensors file at `path`; raises `CorruptArtifactError` (with `fix`, the
    advice) if it cannot be read."""
    with _opened_safetensors(path, framework, fix) as f:
        return f.metadata() or {}, {k: f.get_tensor(k) for k in f.keys()}


def read_safetensors_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The header metadata of the safetensors file at `path` ({} if none), tensors unread; raises
    `CorruptArtifactError` if it cannot be read."""
    with _opened_safetensors(path, "np", None) as f:  # the header alone: no tensor is read, so numpy does
        return f.metadata() or {}


#: Floats of every table to 10 significant digits: last-bit differences between CPUs do not change the bytes.
TABLE_FLOAT_FORMAT = "%.10g"
#: float32 numbers differ between CPUs from about their 8th digit: a rewritten table that agrees to this is kept.
SAME_TABLE_RTOL = 1e-6


def write_table(table, path: str | os.PathLike, *, index: bool = True) -> Path:
    """Write the pandas `table` as CSV at `path`, atomically, unless a `same_table` is already there; returns the
    path."""
    path = Path(path)
    text = table.to_csv(index=index, float_format=TABLE_FLOAT_FORMAT)
    if path.is_file() and same_table(path.read_text(encoding="utf-8"), text):
        return path
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return path


def same_table(old: str, new: str, rtol: float = SAME_TABLE_RTOL) -> bool:
    """Whether two CSV texts hold the same table: the same columns, rows and text cells, and numbers equal to `rtol`
    (NaN equal to NaN)."""
    if old == new:
        return True
    import io

    import numpy as np
    import pandas as pd

    try:
        a, b = pd.read_csv(io.StringIO(old)), pd.read_csv(io.StringIO(new))
    except (ValueError, pd.errors.ParserError):
        return False
    if list(a.columns) != list(b.columns) or a.shape != b.shape:
        return False
    for column in a.columns:
        x, y = a[column], b[column]
        if pd.api.types.is_numeric_dtype(x) and pd.api.types.is_numeric_dtype(y):
            if not np.allclose(x.to_numpy(float), y.to_numpy(float), rtol=rtol, atol=0.0, equal_nan=True):
                return False
        elif not x.astype(str).equals(y.astype(str)):
            return False
    return True


def write_json_atomic(path: str | os.PathLike, obj: object) -> None:
    """Write `obj` as indented JSON, atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def check_output_dir(path: str | os.PathLike, argument: str = "out_dir", flag: str = "--out") -> Path:
    """Raise `OutputPathError` (naming `argument`, or `flag` on the CLI) unless `path` is, or can be created as, a
    directory this process can write in; creates nothing."""
    path = Path(path)
    given = Arg(argument, str(path), flag=flag)
    existing = path
    while not existing.exists() and existing != existing.parent:
        if existing.is_symlink():  # a dangling link cannot become a directory either
            break
        existing = existing.parent
    if not existing.is_dir():
        blocker = f"{path} is" if existing == path else f"{existing} (on the way to {path}) is"
        raise OutputPathError(f"{given}: {blocker} not a directory: pass a directory (it is created if missing), or "
                              "move that file away.", advice=[given])
    try:  # os.access says yes to root on read-only mounts; creating a file is the real test
        fd, probe = tempfile.mkstemp(prefix=".papa-write-test.", dir=existing)
    except OSError as exc:
        raise OutputPathError(f"{given}: cannot write in {existing} ({exc.strerror or exc}): pass a directory you can "
                              "write to.", advice=[given]) from None
    os.close(fd)
    os.unlink(probe)
    return path


def check_output_file(path: str | os.PathLike, argument: str = "out", flag: str = "--out") -> Path:
    """Raise `OutputPathError` unless a file can be written at `path` (its folder is writable, it is no directory)."""
    path = Path(path)
    if path.is_dir():
        given = Arg(argument, str(path), flag=flag)
        raise OutputPathError(f"{given} is a directory: give a file name (e.g. {path / 'report.csv'}).",
                              advice=[given])
    check_output_dir(path.parent, argument, flag)
    return path


def fingerprint_texts(texts: Iterable[str]) -> str:
    """sha256 over the texts in order (length-prefixed, so ("ab","c") != ("a","bc"))."""
    h = hashlib.sha256()
    for t in texts:
        b = t.encode("utf-8")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()

"""Constant attention matrices: the average kind (paper 3.1), the data-free kinds (5.2), and their one file format.

A file is one safetensors file: ``matrices`` [L, H, N, N] float32, for averages ``counts`` [N, N] float64, and the
metadata as JSON under the header key ``papa``.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
from safetensors.torch import save_file

from papa.core.artifacts import FORMAT, atomic_path, check_format, read_safetensors
from papa.core.errors import Arg, CorruptArtifactError, IncompatibleArtifactError
from papa.core.vocabulary import DATA_FREE_KINDS, KINDS, LAYOUTS
from papa.method.signature import ModelSignature


@dataclass(frozen=True)
class ConstantsMetadata:
    """Provenance of a set of constant matrices."""

    kind: str
    model: ModelSignature
    max_length: int
    layout: str
    corpus: str = ""
    corpus_fingerprint: str = ""
    num_examples: int = 0
    preprocessing: str = ""
    pairs: bool = False  # the corpus held sentence pairs (a middle separator in slot n/2)
    # the dtype the model ran in while averaging; None where no model ran or none was recorded
    dtype: str | None = None
    format_version: int = FORMAT
    created: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "ConstantsMetadata":
        return cls.from_fields(json.loads(text))

    @classmethod
    def from_fields(cls, fields: dict) -> "ConstantsMetadata":
        """The metadata whose JSON object is `fields` (as `to_json` writes it)."""
        return cls(**{**fields, "model": ModelSignature(**fields["model"])})


@dataclass
class ConstantMatrices:
    """One constant attention matrix per head: ``matrices[layer, head]`` is [max_length, max_length]."""

    matrices: torch.Tensor
    metadata: ConstantsMetadata
    counts: torch.Tensor | None = None

    def __post_init__(self) -> None:
        _validate(self.matrices, self.counts, self.metadata, source="ConstantMatrices")

    @property
    def num_layers(self) -> int:
        return self.matrices.shape[0]

    @property
    def num_heads(self) -> int:
        return self.matrices.shape[1]

    @property
    def max_length(self) -> int:
        return self.matrices.shape[-1]

    def save(self, path: str | os.PathLike) -> Path:
        """Write atomically as safetensors with the metadata in the header; returns the path."""
        path = Path(path)
        tensors = {"matrices": self.matrices.detach().to("cpu", torch.float32).contiguous()}
        if self.counts is not None:
            tensors["counts"] = self.counts.detach().to("cpu", torch.float64).contiguous()
        with atomic_path(path) as tmp:
            save_file(tensors, str(tmp), metadata={"papa": self.metadata.to_json()})
        return path

    def check_compatible(self, signature: ModelSignature, *, max_length: int | None = None,
                         layout: str | None = None) -> None:
        """Raise `IncompatibleArtifactError` unless these constants fit the model (and length/layout if given)."""
        meta, where = self.metadata, f"constants ({self.metadata.kind}, made for {self.metadata.model.model_name!r})"
        fix = "extract constants for this model with `papa extract` (or build data-free ones for it)"
        if (self.num_layers, self.num_heads) != (signature.num_layers, signature.num_heads):
            raise IncompatibleArtifactError(
                f"{where} have {self.num_layers} layers x {self.num_heads} heads but the model "
                f"{signature.model_name!r} has {signature.num_layers} x {signature.num_heads}: {fix}."
            )
        if meta.kind not in DATA_FREE_KINDS:
            for attr in ("config_fingerprint", "weights_fingerprint"):
                mine, theirs = getattr(meta.model, attr), getattr(signature, attr)
                if mine != theirs:
                    raise IncompatibleArtifactError(
                        f"{where} belong to another model: {attr} {mine} != {theirs} of {signature.model_name!r}: "
                        f"{fix}."
                    )
        if max_length is not None and max_length != self.max_length:
            again = Arg("max_length", max_length)
            raise IncompatibleArtifactError(
                f"{where} were made at sequence length {self.max_length}, not {max_length}: "
                f"re-extract with {again} or encode inputs at {self.max_length}.", advice=[again])
        if layout is not None and layout != meta.layout:
            again = Arg("layout", layout)
            raise IncompatibleArtifactError(
                f"{where} were made with input layout {meta.layout!r}, not {layout!r}: use constants made in "
                f"{layout!r} (extract them with {again}), or encode inputs in {meta.layout!r}.", advice=[again])


def _validate(matrices: torch.Tensor, counts: torch.Tensor | None, meta: ConstantsMetadata, source: str) -> None:
    if meta.kind not in KINDS and not meta.kind.startswith("trained:"):
        raise CorruptArtifactError(f"{source}: unknown constants kind {meta.kind!r}; expected one of {KINDS}.")
    if meta.layout not in LAYOUTS:
        raise CorruptArtifactError(f"{source}: unknown input layout {meta.layout!r}; expected one of "
                                   f"{', '.join(LAYOUTS)}.")
    expected = (meta.model.num_layers, meta.model.num_heads, meta.max_length, meta.max_length)
    if tuple(matrices.shape) != expected:
        raise CorruptArtifactError(
            f"{source}: matrices have shape {tuple(matrices.shape)} but the metadata says {expected} "
            "(layers, heads, length, length); the file does not match its own metadata: re-create it."
        )
    if not torch.isfinite(matrices).all():
        bad = (~torch.isfinite(matrices)).nonzero()[0].tolist()
        raise CorruptArtifactError(
            f"{source}: non-finite (NaN/inf) entry in the constant matrix of layer {bad[0]}, head {bad[1]} "
            "(unobserved entries must be 0): re-create the constants."
        )
    if (matrices < 0).any():
        bad = (matrices < 0).nonzero()[0].tolist()
        raise CorruptArtifactError(
            f"{source}: negative entry in the constant matrix of layer {bad[0]}, head {bad[1]}; attention weights "
            "are non-negative: re-create the constants."
        )
    if counts is not None:
        if tuple(counts.shape) != expected[2:]:
            raise CorruptArtifactError(f"{source}: counts have shape {tuple(counts.shape)}, expected {expected[2:]}; "
                                       "the file does not match its own metadata: re-create it.")
        # Counts weigh rows in the pattern statistics (papa.paper.patterns): NaN or negative ones would pass silently.
        if not torch.isfinite(counts).all():
            bad = (~torch.isfinite(counts)).nonzero()[0].tolist()
            raise CorruptArtifactError(f"{source}: non-finite (NaN/inf) observation count at row {bad[0]}, column "
                                       f"{bad[1]} (unobserved entries must be 0): re-create the constants.")
        if (counts < 0).any():
            bad = (counts < 0).nonzero()[0].tolist()
            raise CorruptArtifactError(f"{source}: negative observation count at row {bad[0]}, column {bad[1]}; "
                                       "counts are how many examples observed an entry: re-create the constants.")


def _check_format(fields: dict, path: Path) -> None:
    """Raise `IncompatibleArtifactError` unless the metadata `fields` are of papa's format, with a ``dtype`` field."""
    check_format(fields.get("format_version"), path, "constants file")
    if "dtype" not in fields:
        raise IncompatibleArtifactError(
            f"{path} is a constants file of an older papa: its metadata has no 'dtype' field (the dtype its model "
            f"ran in is at most named inside its free-text 'preprocessing' record, {fields.get('preprocessing')!r}), "
            "and this papa reads it only from that field: extract the constants again with this papa (`papa "
            "extract`, or delete the file and re-run the grid that wrote it).")


def load_constants(path: str | os.PathLike) -> ConstantMatrices:
    """Load and validate a constants file written by `ConstantMatrices.save`."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no constants file at {path}: create one with `papa extract`.")
    header, tensors = read_safetensors(path, fix="delete it and re-run `papa extract`")
    if "papa" not in header or "matrices" not in tensors:
        raise CorruptArtifactError(f"{path} is a safetensors file but not a papa constants file (no 'papa' metadata "
                                   "or no 'matrices' tensor): pass a file written by `papa extract`.")
    try:
        fields = json.loads(header["papa"])
        if not isinstance(fields, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        raise CorruptArtifactError(f"{path}: unreadable papa metadata ({exc}): re-create the file.") from exc
    _check_format(fields, path)  # the format first: an older file is refused for what it is, not as unreadable
    try:
        meta = ConstantsMetadata.from_fields(fields)
    except (ValueError, TypeError, KeyError) as exc:
        raise CorruptArtifactError(f"{path}: unreadable papa metadata ({exc}): re-create the file.") from exc
    matrices, counts = tensors["matrices"], tensors.get("counts")
    _validate(matrices, counts, meta, source=str(path))
    return ConstantMatrices(matrices=matrices.float(), metadata=meta, counts=counts)


def write_constants_index(directory: str | os.PathLike) -> Path:
    """Write ``<directory>/index.json``: every constants file there with its size, metadata and the sha256 of its
    matrices; entries of an earlier index whose file is not there are kept."""
    import hashlib

    directory = Path(directory)
    index = directory / "index.json"
    entries = {}
    if index.is_file():
        # the tensors are not shipped: a clone that rebuilt only some must not lose the others' record
        try:
            entries = {e["file"]: e for e in json.loads(index.read_text(encoding="utf-8"))}
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptArtifactError(f"{index} is not a constants index ({exc}): remove it and write it again "
                                       "from the constants files") from exc
    for path in sorted(directory.glob("*.safetensors")):
        constants = load_constants(path)
        digest = hashlib.sha256(constants.matrices.contiguous().numpy().tobytes()).hexdigest()
        entries[path.name] = {"file": path.name, "bytes": path.stat().st_size, "matrices_sha256": digest,
                              "metadata": json.loads(constants.metadata.to_json())}
    entries = [entries[name] for name in sorted(entries)]
    with atomic_path(index) as tmp:
        Path(tmp).write_text(json.dumps(entries, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return index


# ---- data-free kinds (paper 5.2) -------------------------------------------------------------------------------

def row_normalised(m: torch.Tensor) -> torch.Tensor:
    """`m` with each row divided by its sum; a row summing to 0 stays 0."""
    s = m.sum(-1, keepdim=True)
    return torch.where(s > 0, m / s.clamp_min(torch.finfo(m.dtype).tiny), torch.zeros_like(m))


def toeplitz_matrix(n: int) -> torch.Tensor:
    """Harmonic Toeplitz matrix: entry (i, j) proportional to 1 / (|i - j| + 1), rows summing to 1 (paper 5.2)."""
    idx = torch.arange(n)
    return row_normalised(1.0 / ((idx[:, None] - idx[None, :]).abs() + 1).float())


def data_free_constants(kind: str, signature: ModelSignature, max_length: int,
                        layout: str = "sep_last") -> ConstantMatrices:
    """Identity, Toeplitz or zeros matrices for every head of the model described by `signature`."""
    n = max_length
    if kind == "identity":
        base = torch.eye(n)
    elif kind == "toeplitz":
        base = toeplitz_matrix(n)
    elif kind == "zeros":
        base = torch.zeros(n, n)
    else:
        raise ValueError(f"unknown data-free constants kind {kind!r}; choose one of {DATA_FREE_KINDS}.")
    mats = base.expand(signature.num_layers, signature.num_heads, n, n).contiguous()
    meta = ConstantsMetadata(kind=kind, model=signature, max_length=n, layout=layout,
                             preprocessing="data-free")
    return ConstantMatrices(matrices=mats, metadata=meta)


def with_matrices(constants: ConstantMatrices, matrices: torch.Tensor, kind: str) -> ConstantMatrices:
    """A copy with new matrices (e.g. after training) and the kind renamed (e.g. ``trained:average``)."""
    return ConstantMatrices(matrices=matrices.detach().float().cpu().clamp_min(0),
                            metadata=replace(constants.metadata, kind=kind), counts=constants.counts)

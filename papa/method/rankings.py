"""The saved head ranking (paper 3.2): the learned λ of every head and the replacement order derived from them.

A file is one safetensors file: ``lambdas`` `[L, H]` float32, ``order`` `[L*H, 2]` int64, and the metadata as JSON
under the header key ``papa_ranking``.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from papa.core.artifacts import FORMAT, atomic_path, check_format, read_safetensors
from papa.core.errors import CorruptArtifactError, IncompatibleArtifactError
from papa.core.model_names import model_file_name
from papa.method.selection import RANK_COMMAND, Head, check_order, replacement_order

RANKING_HEADER_KEY = "papa_ranking"


@dataclass(frozen=True, eq=False)  # eq=False: comparing tensors field-wise is ambiguous
class HeadRanking:
    """Learned λ of every head and the replacement order derived from them, with free-form JSON `metadata`
    (any ``num_layers``/``num_heads`` it names must match the tensors)."""

    order: list[Head]
    lambdas: torch.Tensor | None = None
    metadata: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        _validate_ranking(self, source="HeadRanking")

    # The grid is read off the order: it is a permutation of all heads, so its largest indices give the shape.
    @property
    def num_layers(self) -> int:
        return 1 + max(layer for layer, _ in self.order)

    @property
    def num_heads(self) -> int:
        return 1 + max(head for _, head in self.order)

    @property
    def model_name(self) -> str | None:
        name = self.metadata.get("model_name")
        if name is None and isinstance(self.metadata.get("model"), Mapping):
            name = self.metadata["model"].get("model_name")
        return name

    @classmethod
    def from_lambdas(cls, lambdas: torch.Tensor, *, signature: Any = None, method: str = "lambda",
                     **metadata: Any) -> "HeadRanking":
        """A ranking whose order is `replacement_order(method, ..., lambdas=lambdas)`; `signature` is stored under
        ``model``, further keyword arguments in the metadata."""
        lam = torch.as_tensor(lambdas).detach().to("cpu", torch.float32)
        if lam.dim() != 2:
            raise ValueError(f"lambdas must be an [L, H] tensor, got shape {tuple(lam.shape)}.")
        meta: dict[str, Any] = {"method": method, **metadata}
        if signature is not None:
            sig = signature.to_dict() if hasattr(signature, "to_dict") else dict(signature)
            meta.setdefault("model_name", sig.get("model_name"))
            meta["model"] = sig
        meta.setdefault("created", _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
        order = replacement_order(method, lam.shape[0], lam.shape[1], lambdas=lam, seed=metadata.get("seed"))
        return cls(order=order, lambdas=lam, metadata=meta)

    def order_for(self, method: str, *, seed: int | None = None) -> list[Head]:
        """The replacement order of `method` for this ranking's grid (λ-based methods use the stored λ)."""
        return replacement_order(method, self.num_layers, self.num_heads, lambdas=self.lambdas, seed=seed)

    def save(self, path: str | os.PathLike) -> Path:
        """Write atomically as one safetensors file; returns the path."""
        path = Path(path)
        tensors = {"order": torch.tensor(self.order, dtype=torch.int64).reshape(-1, 2).contiguous()}
        if self.lambdas is not None:
            tensors["lambdas"] = self.lambdas.contiguous()
        header = {"format_version": FORMAT, "num_layers": self.num_layers,
                  "num_heads": self.num_heads, "has_lambdas": self.lambdas is not None, "metadata": self.metadata}
        try:
            text = json.dumps(header, sort_keys=True)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"ranking metadata must be JSON-serialisable ({exc}): store plain str/int/float/list/"
                             "dict values.") from exc
        with atomic_path(path) as tmp:
            save_file(tensors, str(tmp), metadata={RANKING_HEADER_KEY: text})
        return path

    def check_compatible(self, num_layers: int, num_heads: int, model_name: str | None = None, *,
                         signature: Any = None, max_length: int | None = None, layout: str | None = None) -> None:
        """Raise `IncompatibleArtifactError` unless this ranking fits a model of this shape, and whatever of name,
        `signature` fingerprints, `max_length` and `layout` is given and recorded."""
        where = f"head ranking (made for {self.model_name!r})" if self.model_name else "head ranking"
        fix = f"learn a ranking for this model with {RANK_COMMAND}"
        if (self.num_layers, self.num_heads) != (num_layers, num_heads):
            raise IncompatibleArtifactError(
                f"{where} covers {self.num_layers} layers x {self.num_heads} heads but the model"
                f"{f' {model_name!r}' if model_name else ''} has {num_layers} x {num_heads}: {fix}."
            )
        # the model as given may be a folder: it is recorded by its name
        if model_name is not None and self.model_name is not None and model_file_name(model_name) != self.model_name:
            raise IncompatibleArtifactError(
                f"{where} belongs to model {self.model_name!r}, not {model_name!r} (both {num_layers} x {num_heads}): "
                f"{fix}."
            )
        recorded = self.metadata.get("model") if isinstance(self.metadata.get("model"), Mapping) else {}
        if signature is not None:
            for attr in ("config_fingerprint", "weights_fingerprint"):
                mine, theirs = recorded.get(attr), getattr(signature, attr, None)
                if mine is not None and theirs is not None and mine != theirs:
                    raise IncompatibleArtifactError(
                        f"{where} belongs to another model: {attr} {mine} != {theirs} of "
                        f"{getattr(signature, 'model_name', 'the model')!r}: {fix}."
                    )
        for key, wanted, what in (("max_length", max_length, "sequence length"), ("layout", layout, "input layout")):
            mine = self.metadata.get(key)
            if wanted is not None and mine is not None and mine != wanted:
                raise IncompatibleArtifactError(
                    f"{where} was learned at {what} {mine!r}, not {wanted!r}: {fix} at {key}={wanted!r}."
                )


def _validate_ranking(r: HeadRanking, source: str) -> None:
    """Normalise the fields (pairs of ints, float32 CPU λ) and check that they agree with each other."""
    if not isinstance(r.metadata, dict):
        raise CorruptArtifactError(f"{source}: metadata must be a dict, got {type(r.metadata).__name__}.")
    if r.lambdas is not None:
        lam = torch.as_tensor(r.lambdas).detach().to("cpu", torch.float32)
        if lam.dim() != 2 or 0 in lam.shape:
            raise CorruptArtifactError(f"{source}: lambdas must be a non-empty [layers, heads] tensor, got shape "
                                       f"{tuple(lam.shape)}.")
        num_layers, num_heads = lam.shape
    else:
        lam = None
        try:  # without λ the grid is read off the order; check_order below validates it against that grid
            pairs = [(int(a), int(b)) for a, b in r.order]
        except (TypeError, ValueError) as exc:
            raise CorruptArtifactError(f"{source}: a head order must hold (layer, head) pairs ({exc}).") from exc
        if not pairs:
            raise CorruptArtifactError(f"{source}: the head order is empty.")
        num_layers = 1 + max(p[0] for p in pairs)
        num_heads = 1 + max(p[1] for p in pairs)
    # A shape the metadata states (model signature fields) must be the shape of the tensors.
    for where, d in (("metadata", r.metadata), ("metadata['model']", r.metadata.get("model"))):
        if isinstance(d, Mapping):
            for key, actual in (("num_layers", num_layers), ("num_heads", num_heads)):
                if key in d and d[key] != actual:
                    raise CorruptArtifactError(
                        f"{source}: {where} says {key}={d[key]!r} but the ranking covers {num_layers} layers x "
                        f"{num_heads} heads; the file does not match its own metadata: "
                        f"re-create it with {RANK_COMMAND}."
                    )
    try:
        order = check_order(r.order, num_layers, num_heads)
    except ValueError as exc:
        raise CorruptArtifactError(f"{source}: {exc} Re-create the ranking with {RANK_COMMAND}.") from exc
    if lam is not None:
        if not torch.isfinite(lam).all():
            bad = (~torch.isfinite(lam)).nonzero()[0].tolist()
            raise CorruptArtifactError(f"{source}: λ of layer {bad[0]}, head {bad[1]} is not finite: re-learn λ.")
        outside = (lam <= 0) | (lam >= 1)
        if outside.any():
            bad = outside.nonzero()[0].tolist()
            raise CorruptArtifactError(
                f"{source}: λ of layer {bad[0]}, head {bad[1]} is {lam[bad[0], bad[1]].item()!r}, outside (0, 1) "
                f"where a sigmoid puts it (were raw θ saved instead of λ?): re-learn λ with {RANK_COMMAND}."
            )
    object.__setattr__(r, "order", order)
    object.__setattr__(r, "lambdas", lam)


def load_ranking(path: str | os.PathLike) -> HeadRanking:
    """Load and validate a ranking written by `HeadRanking.save`."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no head ranking file at {path}: create one with {RANK_COMMAND}.")
    header, tensors = read_safetensors(path, fix=f"delete it and re-run {RANK_COMMAND}")
    if RANKING_HEADER_KEY not in header or "order" not in tensors:
        raise CorruptArtifactError(f"{path} is a safetensors file but not a papa head ranking (no "
                                   f"'{RANKING_HEADER_KEY}' metadata or no 'order' tensor): re-run {RANK_COMMAND}.")
    try:
        head = json.loads(header[RANKING_HEADER_KEY])
        version, num_layers, num_heads = head["format_version"], head["num_layers"], head["num_heads"]
        has_lambdas, metadata = head["has_lambdas"], head["metadata"]
    except (ValueError, TypeError, KeyError) as exc:
        raise CorruptArtifactError(f"{path}: unreadable ranking metadata ({exc!r}): "
                                   f"re-create it with {RANK_COMMAND}.") from exc
    check_format(version, path, "head ranking")
    order_t, lam = tensors["order"], tensors.get("lambdas")
    total = num_layers * num_heads
    if order_t.dtype not in (torch.int64, torch.int32) or tuple(order_t.shape) != (total, 2):
        raise CorruptArtifactError(
            f"{path}: 'order' is {order_t.dtype} of shape {tuple(order_t.shape)}, expected int64 ({total}, 2) for "
            f"{num_layers} layers x {num_heads} heads: re-create it with {RANK_COMMAND}."
        )
    if has_lambdas != (lam is not None):
        raise CorruptArtifactError(f"{path}: metadata says has_lambdas={has_lambdas} but the file "
                                   f"{'has' if lam is not None else 'lacks'} a 'lambdas' tensor: re-create it.")
    if lam is not None and tuple(lam.shape) != (num_layers, num_heads):
        raise CorruptArtifactError(f"{path}: 'lambdas' has shape {tuple(lam.shape)} but the metadata says "
                                   f"({num_layers}, {num_heads}): re-create it with {RANK_COMMAND}.")
    order = [(int(a), int(b)) for a, b in order_t.tolist()]
    try:
        check_order(order, num_layers, num_heads)
    except ValueError as exc:
        raise CorruptArtifactError(f"{path}: {exc} Re-create it with {RANK_COMMAND}.") from exc
    try:
        return HeadRanking(order=order, lambdas=lam, metadata=metadata)
    except CorruptArtifactError as exc:
        raise CorruptArtifactError(str(exc).replace("HeadRanking", str(path), 1)) from exc

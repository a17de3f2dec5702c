"""Which heads to replace, and in which order (paper 3.2 and 5.4), plus the saved head ranking.

A *replacement order* lists every (layer, head) exactly once, in the order heads lose their input-dependent
attention. Keeping a fraction ``f`` of the heads input-dependent (the paper's x-axis: 1, 1/2, 1/8, 1/16, 0) replaces
the first ``total - round(f * total)`` heads of the order. The paper's own method ("lambda") replaces the heads with
the smallest learned λ first; 5.4 compares it with layer order (both directions), a random order and the reverse.

A `HeadRanking` stores the learned λ and the order derived from them as one safetensors file (tensors ``lambdas``
[L, H] float32 and ``order`` [L*H, 2] int64) whose header carries the metadata as JSON under ``papa_ranking``.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from papa.core.artifacts import atomic_path, read_safetensors
from papa.core.errors import Arg, CorruptArtifactError, IncompatibleArtifactError, InputError
from papa.core.vocabulary import PAPER_FRACTIONS as _PAPER_FRACTION_LABELS, ROUNDINGS, SELECTION_METHODS

# The paper's x-axis (4.2) as exact fractions: share of heads that stay input-dependent.
PAPER_FRACTIONS = tuple(Fraction(label) for label in _PAPER_FRACTION_LABELS)
RANKING_FORMAT_VERSION = 1
RANKING_HEADER_KEY = "papa_ranking"
# Named in error messages as the way to (re-)create a ranking.
RANK_COMMAND = "papa rank"

# fraction * total is "whole" if this close to an integer: absorbs float noise (0.1 * 30) but not real halves (4.5).
_WHOLE_TOL = 1e-9

Head = tuple[int, int]


# ---- replacement orders ----------------------------------------------------------------------------------------

def replacement_order(method: str, num_layers: int, num_heads: int, *, lambdas: torch.Tensor | None = None,
                      seed: int | None = None) -> list[Head]:
    """Every (layer, head) exactly once, in the order `method` replaces them.

    "lambda": smallest λ first (least input-dependent); "reversed_lambda": largest λ first; ties in λ are broken by
    (layer, head) in both. "first_to_last" / "last_to_first": layer order, heads 0..H-1 within each layer.
    "random": a permutation fixed by `seed` alone (the global RNG is neither read nor advanced).
    """
    _check_grid(num_layers, num_heads)
    if method not in SELECTION_METHODS:
        raise ValueError(f"unknown head selection method {method!r}; choose one of {', '.join(SELECTION_METHODS)}.")
    heads = [(layer, head) for layer in range(num_layers) for head in range(num_heads)]
    if method == "first_to_last":
        return heads
    if method == "last_to_first":
        return [(layer, head) for layer in reversed(range(num_layers)) for head in range(num_heads)]
    if method == "random":
        if seed is None or isinstance(seed, bool) or not isinstance(seed, int):
            first = Arg("seed", 0, flag="--seeds")
            raise InputError(f"the 'random' head order needs an integer seed (got {seed!r}): pass {first}, 1, ...",
                             advice=[first])
        # A private generator: the order depends on the seed only, not on whatever else ran before.
        random.Random(seed).shuffle(heads)
        return heads
    if lambdas is None:
        raise ValueError(f"the {method!r} head order needs the learned λ of every head: pass lambdas= "
                         f"(an [{num_layers}, {num_heads}] tensor, e.g. HeadRanking.lambdas from {RANK_COMMAND}).")
    lam = _as_lambda_tensor(lambdas, num_layers, num_heads)
    values = lam.tolist()
    sign = 1.0 if method == "lambda" else -1.0
    # Sorting on (±λ, layer, head) makes ties deterministic and independent of the sort algorithm.
    return sorted(heads, key=lambda lh: (sign * values[lh[0]][lh[1]], lh[0], lh[1]))


def _check_grid(num_layers: int, num_heads: int) -> None:
    for name, v in (("num_layers", num_layers), ("num_heads", num_heads)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}.")


def _as_lambda_tensor(lambdas: Any, num_layers: int, num_heads: int) -> torch.Tensor:
    lam = torch.as_tensor(lambdas).detach().to("cpu", torch.float64)
    if tuple(lam.shape) != (num_layers, num_heads):
        raise ValueError(f"lambdas must have shape ({num_layers}, {num_heads}) = (layers, heads), "
                         f"got {tuple(lam.shape)}: pass the λ learned for this model.")
    if not torch.isfinite(lam).all():
        bad = (~torch.isfinite(lam)).nonzero()[0].tolist()
        raise ValueError(f"lambdas has a non-finite value at layer {bad[0]}, head {bad[1]}: "
                         f"re-learn λ ({RANK_COMMAND}).")
    return lam


def check_order(order: Sequence[Sequence[int]], num_layers: int, num_heads: int) -> list[Head]:
    """`order` as a list of int pairs; ValueError unless it lists every head of the grid exactly once."""
    _check_grid(num_layers, num_heads)
    pairs: list[Head] = []
    for item in order:
        try:
            layer, head = (int(v) for v in item)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"a head order must hold (layer, head) pairs, found {item!r}.") from exc
        pairs.append((layer, head))
    total = num_layers * num_heads
    outside = [p for p in pairs if not (0 <= p[0] < num_layers and 0 <= p[1] < num_heads)]
    if outside:
        raise ValueError(f"head order names {outside[0]} outside the model's {num_layers} layers x {num_heads} heads.")
    seen: set[Head] = set()
    for p in pairs:
        if p in seen:
            raise ValueError(f"head order lists {p} more than once; it must be a permutation of all {total} heads.")
        seen.add(p)
    if len(pairs) != total:
        missing = next((layer, head) for layer in range(num_layers) for head in range(num_heads)
                       if (layer, head) not in seen)
        raise ValueError(f"head order lists {len(pairs)} of the {total} heads (missing e.g. {missing}); it must be a "
                         "permutation of all heads.")
    return pairs


# ---- fractions -------------------------------------------------------------------------------------------------

def parse_fraction(s: str) -> Fraction:
    """A fraction of input-dependent heads from CLI text: "1", "0", "1/2", "1/16", "0.0625"."""
    text = str(s).strip()
    try:
        value = Fraction(text)
    except (ValueError, ZeroDivisionError) as exc:
        raise ValueError(f"cannot read {s!r} as a fraction of heads: write it like 1, 1/2, 1/16, 0.0625 or 0.") from exc
    _check_range(value, s)
    return value


def as_fraction(value: float | int | Fraction | str) -> Fraction:
    """`value` (float, int, Fraction or text like "1/16") as an exact Fraction in [0, 1]."""
    if isinstance(value, str):
        return parse_fraction(value)
    if isinstance(value, bool):
        raise ValueError(f"fraction of heads must be a number, got {value!r}.")
    if isinstance(value, Fraction):
        frac = value
    elif isinstance(value, int):
        frac = Fraction(value)
    else:
        try:
            f = float(value)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"fraction of heads must be a number or text like '1/16', got {value!r}.") from exc
        if not math.isfinite(f):
            raise ValueError(f"fraction of heads must be finite, got {value!r}: use a value in [0, 1].")
        frac = Fraction(f)  # exact binary value; 0.0625 is exactly 1/16
    _check_range(frac, value)
    return frac


def _check_range(frac: Fraction, original: object) -> None:
    if not 0 <= frac <= 1:
        raise ValueError(f"fraction of input-dependent heads must lie in [0, 1], got {original!r}: use e.g. 1, 1/2, "
                         "1/8, 1/16 or 0 (1 keeps every head's attention, 0 replaces all).")


def fraction_label(value: float | int | Fraction | str) -> str:
    """Readable label of a fraction: "1", "0", "1/16" (floats snap to the nearest small-denominator fraction)."""
    frac = as_fraction(value).limit_denominator(10_000)
    return str(frac)


def num_input_dependent(fraction: float | int | Fraction | str, total_heads: int, rounding: str = "exact") -> int:
    """How many of `total_heads` stay input-dependent when a share `fraction` of them does.

    rounding="exact" insists that fraction * total is whole (1/16 of 72 = 4.5 is an error); "down" floors and
    "nearest" rounds halves up.
    """
    if rounding not in ROUNDINGS:
        raise ValueError(f"unknown rounding {rounding!r}; choose one of {', '.join(ROUNDINGS)}.")
    if isinstance(total_heads, bool) or not isinstance(total_heads, int) or total_heads < 1:
        raise ValueError(f"total_heads must be a positive integer, got {total_heads!r}.")
    frac = as_fraction(fraction)
    x = frac * total_heads
    nearest_int = math.floor(x + Fraction(1, 2))
    if abs(x - nearest_int) <= _WHOLE_TOL:
        return int(nearest_int)  # whole up to float noise: every rounding agrees
    if rounding == "exact":
        down, nearest = Arg("rounding", "down"), Arg("rounding", "nearest")
        raise InputError(
            f"{fraction!r} of {total_heads} heads is {float(x):g}, not a whole number of heads: pick a fraction that "
            f"divides {total_heads} or pass {down} ({math.floor(x)} heads) or {nearest} ({nearest_int} heads).",
            advice=(down, nearest))
    return int(math.floor(x) if rounding == "down" else nearest_int)


def heads_to_replace(order: Sequence[Sequence[int]], fraction: float | int | Fraction | str, num_layers: int,
                     num_heads: int, rounding: str = "exact") -> torch.Tensor:
    """[L, H] bool mask of the replaced heads: the first total - k heads of `order`, k = heads kept input-dependent.

    Fraction 1 replaces none, 0 replaces all. The mask can be passed to `PapaController.replace`.
    """
    pairs = check_order(order, num_layers, num_heads)
    total = num_layers * num_heads
    keep = num_input_dependent(fraction, total, rounding)
    mask = torch.zeros(num_layers, num_heads, dtype=torch.bool)
    for layer, head in pairs[: total - keep]:
        mask[layer, head] = True
    return mask


# ---- the saved ranking -----------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)  # eq=False: comparing tensors field-wise is ambiguous
class HeadRanking:
    """Learned λ of every head and the replacement order derived from them, with provenance.

    `metadata` is free-form JSON (model name and signature fields, task, seed, max_length, layout, constants
    fingerprint, steps/epochs, ...); if it names ``num_layers``/``num_heads`` (top level or under ``model``) they must
    match the tensors.
    """

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
        """A ranking whose order is `replacement_order(method, ..., lambdas=lambdas)`.

        `signature` (a `papa.ModelSignature` or a dict of its fields) is stored under ``model``; further keyword
        arguments (task, seed, max_length, layout, constants_fingerprint, steps, epochs, ...) go into the metadata.
        """
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
        header = {"format_version": RANKING_FORMAT_VERSION, "num_layers": self.num_layers,
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
        """Raise `IncompatibleArtifactError` unless this ranking fits a model of this shape (and name, if given).

        With `signature` (a `papa.ModelSignature`) the recorded config and weights fingerprints must match it; with
        `max_length` / `layout` the recorded ones must (values the ranking does not record are not checked).
        """
        where = f"head ranking (made for {self.model_name!r})" if self.model_name else "head ranking"
        fix = f"learn a ranking for this model with {RANK_COMMAND}"
        if (self.num_layers, self.num_heads) != (num_layers, num_heads):
            raise IncompatibleArtifactError(
                f"{where} covers {self.num_layers} layers x {self.num_heads} heads but the model"
                f"{f' {model_name!r}' if model_name else ''} has {num_layers} x {num_heads}: {fix}."
            )
        if model_name is not None and self.model_name is not None and model_name != self.model_name:
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
    if version > RANKING_FORMAT_VERSION:
        raise CorruptArtifactError(f"{path} has ranking format version {version}; this papa reads up to "
                                   f"{RANKING_FORMAT_VERSION}: upgrade papa.")
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

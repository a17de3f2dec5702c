"""Which heads to replace, and in which order (paper 3.2 and 5.4).

A replacement order lists every (layer, head) once; keeping a fraction ``f`` of the heads input-dependent replaces
the first ``total - f * total`` heads of it.
"""
from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import torch

from papa.core.errors import Arg, InputError, check_one_of
from papa.core.vocabulary import PAPER_FRACTIONS as _PAPER_FRACTION_LABELS, RANKED, ROUNDINGS, SELECTION_METHODS
from papa.core.vocabulary import SELECTION_VARIANT_SEPARATOR

# The paper's x-axis (4.2) as exact fractions: share of heads that stay input-dependent.
PAPER_FRACTIONS = tuple(Fraction(label) for label in _PAPER_FRACTION_LABELS)
# Named in error messages as the way to (re-)create a ranking.
RANK_COMMAND = "papa rank"

# fraction * total is "whole" if this close to an integer: absorbs float noise (0.1 * 30) but not real halves (4.5).
_WHOLE_TOL = 1e-9

Head = tuple[int, int]


# ---- selections: a method and which draw of its order ----------------------------------------------------------

# a profile's name has no segment that reads as a draw (part0 included, so that full-part0 is refused, not a profile)
_DRAW = r"(?:seed|part)[0-9]+"
# another profile's draw names the profile, then its part and seed as a ranking's file does: full-part1, full-seed1
_RANKED_VARIANT = re.compile(r"^(?:seed(?P<seed>[1-9][0-9]*)|part(?P<part>[1-9][0-9]*)"
                             rf"|(?!{_DRAW}$)(?P<profile>[a-z][a-z0-9_]*(?:-(?!{_DRAW}$|{_DRAW}-)[a-z0-9_]+)*)"
                             r"(?:-part(?P<profile_part>[1-9][0-9]*))?(?:-seed(?P<profile_seed>[1-9][0-9]*))?)$")
_RANDOM_VARIANT = re.compile(r"^(?P<seed>[1-9][0-9]*)$")


@dataclass(frozen=True)
class Selection:
    """A selection as a grid names it (`name`): its method and which draw of the method's order. Ranked methods read the
    ranking learned with `seed`, on training subset `part` (0: the grid's own) by `profile` (None: the grid's); "random"
    draws its permutation with `seed`."""

    name: str
    method: str
    seed: int = 0
    part: int = 0
    profile: str | None = None

    @property
    def is_variant(self) -> bool:
        """Whether this is another draw than the plain method's."""
        return self.name != self.method


def parse_selection(name: str) -> Selection:
    """The `Selection` a name stands for: a method, or ``<method>@<variant>`` (``lambda@seed1``, ``lambda@part2``,
    ``lambda@full-part1``, ``random@3``); raises `InputError` otherwise."""
    method, sep, variant = str(name).partition(SELECTION_VARIANT_SEPARATOR)
    if method not in SELECTION_METHODS:
        where = f" in {name!r}" if sep else ""
        raise InputError(f"unknown head selection method {method!r}{where}; choose one of "
                         f"{', '.join(SELECTION_METHODS)}, optionally with a variant (e.g. lambda@part1, random@2).")
    if not sep:
        return Selection(name, method)
    if method in RANKED:
        match = _RANKED_VARIANT.match(variant)
        if match:
            return Selection(name, method, seed=int(match["seed"] or match["profile_seed"] or 0),
                             part=int(match["part"] or match["profile_part"] or 0), profile=match["profile"])
        accepted = ("seed<k> or part<k> (k ≥ 1), or a profile's name (e.g. full), alone or with one of its draws "
                    "(full-part1, full-seed1)")
    elif method == "random":
        match = _RANDOM_VARIANT.match(variant)
        if match:
            return Selection(name, method, seed=int(match["seed"]))
        accepted = "the permutation's seed k ≥ 1 (random is random@0)"
    else:
        raise InputError(f"{name!r}: {method} is one fixed order and has no variants; write {method}.")
    raise InputError(f"{name!r}: the variant {variant!r} of {method} is not one of: {accepted}.")


def selection_method(name: str) -> str:
    """The method of a selection's name (``lambda@part1`` -> ``lambda``)."""
    return parse_selection(name).method


# ---- replacement orders ----------------------------------------------------------------------------------------

def replacement_order(method: str, num_layers: int, num_heads: int, *, lambdas: torch.Tensor | None = None,
                      seed: int | None = None) -> list[Head]:
    """Every (layer, head) exactly once, in the order `method` replaces them. "lambda": smallest λ first;
    "reversed_lambda": largest first (ties by (layer, head)); "first_to_last" / "last_to_first": layer order; "random":
    a permutation fixed by `seed` alone."""
    _check_grid(num_layers, num_heads)
    check_one_of(method, SELECTION_METHODS, "head selection method")
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
    if isinstance(value, (Fraction, int)):
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
    return str(as_fraction(value).limit_denominator(10_000))


def num_input_dependent(fraction: float | int | Fraction | str, total_heads: int, rounding: str = "exact") -> int:
    """How many of `total_heads` stay input-dependent when a share `fraction` of them does. rounding="exact" insists
    that fraction * total is whole (1/16 of 72 = 4.5 is an error); "down" floors and "nearest" rounds halves up."""
    check_one_of(rounding, ROUNDINGS, "rounding")
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
    """[L, H] bool mask of the replaced heads: the first total - k heads of `order`, k = heads kept input-dependent
    (fraction 1 replaces none)."""
    total = num_layers * num_heads
    return replaced_heads(order, total - num_input_dependent(fraction, total, rounding), num_layers, num_heads)


def replaced_heads(order: Sequence[Sequence[int]], n_replaced: int, num_layers: int, num_heads: int) -> torch.Tensor:
    """[L, H] bool mask of the first `n_replaced` heads of `order`."""
    pairs = check_order(order, num_layers, num_heads)
    mask = torch.zeros(num_layers, num_heads, dtype=torch.bool)
    for layer, head in pairs[:n_replaced]:
        mask[layer, head] = True
    return mask

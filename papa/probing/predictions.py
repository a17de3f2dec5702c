"""One run's outcome on every evaluation example, kept so that its metric can be recomputed on resamples.

Three forms by task kind: labels (sentence, pair), flattened label sequences with offsets (token), and summed
cross-entropies with scored token counts (`VOCABULARY_KINDS`). A file is one safetensors file of those arrays with a
JSON header under ``papa_predictions``.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from papa.core.artifacts import FORMAT, atomic_path, check_format, read_safetensors
from papa.core.errors import CorruptArtifactError, InputError, check_one_of
from papa.tasks.metrics import compute_metric, get_metric
from papa.tasks.metric_statistics import per_example_statistics
from papa.tasks.registry import TASKS, VOCABULARY_KINDS, TaskSpec

PREDICTIONS_HEADER_KEY = "papa_predictions"

# Which arrays each task kind keeps, and which metrics read each form.
_FORMS = {"sentence": "labels", "pair": "labels", "token": "sequences", **dict.fromkeys(VOCABULARY_KINDS, "losses")}
_METRIC_FORMS = {"accuracy": "labels", "matthews_correlation": "labels", "f1": "labels",
                 "seqeval_f1": "sequences", "neg_log_perplexity": "losses"}
_ARRAYS = {"labels": ("predicted", "reference"), "sequences": ("predicted", "reference", "offsets"),
           "losses": ("loss", "tokens")}
_REQUIRED_METADATA = ("run_id", "task", "metric")


@dataclass(frozen=True, eq=False)  # eq=False: comparing arrays field-wise is ambiguous
class EvalPredictions:
    """Per-example evaluation outcome of one run.

    `predicted`/`reference`: int64 label ids, [N], or for token kinds the sentences' labels end to end with sentence
    i at ``offsets[i]:offsets[i + 1]``. `loss`: float64 [N] summed cross-entropies (nats); `tokens`: int64 [N] scored
    tokens. `label_names` is required for token kinds; `metadata` is the file's provenance.
    """

    kind: str
    predicted: np.ndarray | None = None
    reference: np.ndarray | None = None
    offsets: np.ndarray | None = None
    loss: np.ndarray | None = None
    tokens: np.ndarray | None = None
    label_names: tuple[str, ...] = ()
    metadata: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        _validate(self)

    @classmethod
    def from_labels(cls, kind: str, predicted: Sequence[int], reference: Sequence[int],
                    label_names: Sequence[str] = ()) -> "EvalPredictions":
        """One predicted and one reference label per example (sentence and pair kinds)."""
        return cls(kind, predicted=np.asarray(predicted), reference=np.asarray(reference),
                   label_names=tuple(label_names))

    @classmethod
    def from_sequences(cls, predicted: Sequence[Sequence[int]], reference: Sequence[Sequence[int]],
                       label_names: Sequence[str], kind: str = "token") -> "EvalPredictions":
        """One predicted and one reference label sequence per sentence (token kinds), as `compute_metric` takes them."""
        if len(predicted) != len(reference):
            raise InputError(f"{len(predicted)} predicted sentences but {len(reference)} reference sentences")
        lengths = [len(p) for p in predicted]
        for i, (p, r) in enumerate(zip(predicted, reference)):
            if len(p) != len(r):
                raise InputError(f"sentence {i}: {len(p)} predicted labels but {len(r)} reference labels")
        offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
        flat = lambda seqs: np.fromiter((t for s in seqs for t in s), dtype=np.int64, count=int(offsets[-1]))  # noqa
        return cls(kind, predicted=flat(predicted), reference=flat(reference), offsets=offsets,
                   label_names=tuple(label_names))

    @classmethod
    def from_losses(cls, kind: str, loss: Sequence[float], tokens: Sequence[int]) -> "EvalPredictions":
        """Each example's summed cross-entropy and number of scored tokens (the `VOCABULARY_KINDS`)."""
        return cls(kind, loss=np.asarray(loss, dtype=np.float64), tokens=np.asarray(tokens))

    @property
    def form(self) -> str:
        """Which arrays this kind keeps: "labels", "sequences" or "losses"."""
        return _FORMS[self.kind]

    @property
    def num_examples(self) -> int:
        """How many evaluation examples (sentences, pairs, paragraphs) the run was scored on."""
        if self.form == "labels":
            return len(self.predicted)
        if self.form == "sequences":
            return len(self.offsets) - 1
        return len(self.loss)

    def keeping(self, indices: Sequence[int] | np.ndarray) -> "EvalPredictions":
        """These predictions on the examples `indices` only, in that order (repeats allowed)."""
        idx = self._indices(indices)
        if self.form == "labels":
            arrays = {"predicted": self.predicted[idx], "reference": self.reference[idx]}
        elif self.form == "sequences":
            spans = [np.arange(self.offsets[i], self.offsets[i + 1]) for i in idx]
            flat = np.concatenate(spans) if spans else np.zeros(0, dtype=np.int64)
            lengths = [len(s) for s in spans]
            arrays = {"predicted": self.predicted[flat], "reference": self.reference[flat],
                      "offsets": np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])}
        else:
            arrays = {"loss": self.loss[idx], "tokens": self.tokens[idx]}
        return EvalPredictions(self.kind, label_names=self.label_names, metadata=dict(self.metadata), **arrays)

    def metric_inputs(self, indices: Sequence[int] | np.ndarray | None = None) -> tuple[Any, Any]:
        """(predictions, references) of the examples `indices` (repeats allowed; None = all, in order) in the form
        `compute_metric` takes them: label lists, lists of per-sentence label lists, or (mean loss, None)."""
        idx = self._indices(indices)
        if self.form == "labels":
            return self.predicted[idx].tolist(), self.reference[idx].tolist()
        if self.form == "sequences":
            spans = [(int(self.offsets[i]), int(self.offsets[i + 1])) for i in idx]
            return ([self.predicted[a:b].tolist() for a, b in spans],
                    [self.reference[a:b].tolist() for a, b in spans])
        # As evaluate_probe pools them: the summed loss of every scored token over their number.
        total, count = float(self.loss[idx].sum()), int(self.tokens[idx].sum())
        return total / max(count, 1), None

    def example_statistics(self, metric: str) -> np.ndarray:
        """Each example's counts that sum to `metric` ([examples, k]), for bootstrap resamples."""
        if self.form == "losses":
            return per_example_statistics(metric, self.loss, self.tokens)
        preds, refs = self.metric_inputs()
        return per_example_statistics(metric, preds, refs, label_names=self.label_names or None,
                                      num_labels=len(self.label_names) or None)

    def _indices(self, indices: Sequence[int] | np.ndarray | None) -> np.ndarray:
        n = self.num_examples
        if indices is None:
            return np.arange(n)
        idx = np.asarray(indices)
        if idx.ndim != 1 or (idx.size and idx.dtype.kind not in "iu"):
            raise InputError(f"indices must be a flat list of example indices (integers), got an array of shape "
                             f"{idx.shape} and dtype {idx.dtype}")
        if idx.size == 0:
            raise InputError("indices is empty: a metric needs at least one example")
        if idx.min() < 0 or idx.max() >= n:
            bad = int(idx[(idx < 0) | (idx >= n)][0])
            raise InputError(f"example index {bad} is outside the {n} evaluation examples (0 to {n - 1})")
        return idx.astype(np.int64, copy=False)


def metric_on(predictions: EvalPredictions, spec_or_metric: TaskSpec | str,
              indices: Sequence[int] | np.ndarray | None = None) -> float:
    """The metric of `spec_or_metric` (a task spec or a metric name) on the examples `indices` (repeats allowed;
    None: all, the run's own value)."""
    if isinstance(spec_or_metric, TaskSpec):
        metric, label_names = spec_or_metric.metric, spec_or_metric.label_names
        if predictions.label_names and label_names and tuple(label_names) != predictions.label_names:
            raise InputError(f"these predictions name their labels {list(predictions.label_names)}, task "
                             f"{spec_or_metric.name!r} names them {list(label_names)}: they belong to another task")
    else:
        metric, label_names = spec_or_metric, predictions.label_names
    get_metric(metric)
    if _METRIC_FORMS[metric] != predictions.form:
        raise InputError(f"metric {metric!r} cannot be computed from {predictions.kind} predictions "
                         f"(they keep {predictions.form}, {metric!r} reads {_METRIC_FORMS[metric]})")
    preds, refs = predictions.metric_inputs(indices)
    return compute_metric(metric, preds, refs, label_names=label_names or None)


# ---- the file ----------------------------------------------------------------------------------------------------

def save_predictions(path: str | os.PathLike, predictions: EvalPredictions, metadata: Mapping[str, Any]) -> Path:
    """Write `predictions` atomically as one safetensors file; `metadata` must name the ``run_id``, ``task`` and
    ``metric`` and may add any JSON provenance (value, model, seed, ...). Returns the path."""
    from safetensors.numpy import save_file

    path = Path(path)
    meta = dict(metadata)
    missing = [k for k in _REQUIRED_METADATA if not meta.get(k)]
    if missing:
        raise InputError(f"predictions metadata must name {', '.join(_REQUIRED_METADATA)}; missing: "
                         f"{', '.join(missing)}")
    header = {"format_version": FORMAT, "kind": predictions.kind,
              "num_examples": predictions.num_examples, "label_names": list(predictions.label_names),
              **{k: meta.pop(k) for k in _REQUIRED_METADATA}, "metadata": meta}
    try:
        text = json.dumps(header, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise InputError(f"predictions metadata must be JSON-serialisable ({exc}): store plain str/int/float/list/"
                         "dict values.") from exc
    tensors = {name: _compact(getattr(predictions, name)) for name in _ARRAYS[predictions.form]}
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata={PREDICTIONS_HEADER_KEY: text})
    return path


def _compact(a: np.ndarray) -> np.ndarray:
    """Integers in the smallest of int16/int32/int64 that holds them; floats as they are."""
    if a.dtype.kind == "f":
        return np.ascontiguousarray(a)
    for dtype in (np.int16, np.int32):
        info = np.iinfo(dtype)
        if a.size == 0 or (a.min() >= info.min and a.max() <= info.max):
            return np.ascontiguousarray(a, dtype=dtype)
    return np.ascontiguousarray(a, dtype=np.int64)


def load_predictions(path: str | os.PathLike) -> EvalPredictions:
    """Load and validate a file written by `save_predictions`; its header's run id, task, metric and provenance
    come back as the predictions' `metadata`."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no predictions file at {path}: predictions are written by a grid run "
                                "(papa probe) since predictions were stored.")
    header, arrays = read_safetensors(path, framework="np", fix="delete it and re-run that run (force)")
    if PREDICTIONS_HEADER_KEY not in header:
        raise CorruptArtifactError(f"{path} is a safetensors file but not papa predictions (no "
                                   f"'{PREDICTIONS_HEADER_KEY}' metadata).")
    try:
        head = json.loads(header[PREDICTIONS_HEADER_KEY])
        version, kind, n = head["format_version"], head["kind"], head["num_examples"]
        label_names = tuple(head["label_names"])
        meta = {**{k: head[k] for k in _REQUIRED_METADATA}, **head["metadata"]}
    except (ValueError, TypeError, KeyError) as exc:
        raise CorruptArtifactError(f"{path}: unreadable predictions metadata ({exc!r}): delete it and re-run that "
                                   "run.") from exc
    check_format(version, path, "predictions file")
    if kind not in _FORMS:
        raise CorruptArtifactError(f"{path}: unknown task kind {kind!r} (known: {', '.join(_FORMS)}).")
    wanted = _ARRAYS[_FORMS[kind]]
    if set(arrays) != set(wanted):
        raise CorruptArtifactError(f"{path}: {kind} predictions hold the arrays {', '.join(wanted)}, this file holds "
                                   f"{', '.join(sorted(arrays)) or 'none'}.")
    try:
        predictions = EvalPredictions(kind, label_names=label_names, metadata=meta,
                                      **{k: _widen(v) for k, v in arrays.items()})
    except InputError as exc:
        raise CorruptArtifactError(f"{path}: {exc}; delete it and re-run that run.") from exc
    if predictions.num_examples != n:
        raise CorruptArtifactError(f"{path}: the header says {n} examples but the arrays hold "
                                   f"{predictions.num_examples}; the file does not match its own metadata.")
    _check_task(predictions, meta, path)
    return predictions


def _widen(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64 if a.dtype.kind == "f" else np.int64)


def _check_task(p: EvalPredictions, meta: dict, path: Path) -> None:
    """The header's metric must read this kind of predictions, and a registered task must be that task."""
    metric, task = meta["metric"], meta["task"]
    if _METRIC_FORMS.get(metric) != p.form:
        raise CorruptArtifactError(f"{path}: metric {metric!r} does not read {p.kind} predictions.")
    spec = TASKS.get(task)
    if spec is None:
        return
    if (spec.kind, spec.metric) != (p.kind, metric):
        raise CorruptArtifactError(f"{path}: made for task {task!r} as a {p.kind} task scored by {metric!r}, but "
                                   f"{task!r} is a {spec.kind} task scored by {spec.metric!r}: the file does not "
                                   "match the task it names.")
    if tuple(spec.label_names) != p.label_names:
        raise CorruptArtifactError(f"{path}: its labels are named {list(p.label_names)}, task {task!r}'s "
                                   f"{list(spec.label_names)}: the file does not match the task it names.")


# ---- validation --------------------------------------------------------------------------------------------------

def _validate(p: EvalPredictions) -> None:
    """Normalise the arrays (int64 labels and counts, float64 losses, read-only) and check that they agree."""
    check_one_of(p.kind, _FORMS, "task kind", error=InputError)
    if not isinstance(p.metadata, dict):
        raise InputError(f"metadata must be a dict, got {type(p.metadata).__name__}")
    object.__setattr__(p, "label_names", tuple(p.label_names))
    form = _FORMS[p.kind]
    wanted = _ARRAYS[form]
    for name in ("predicted", "reference", "offsets", "loss", "tokens"):
        value = getattr(p, name)
        if (value is None) == (name in wanted):
            raise InputError(f"{p.kind} predictions keep {', '.join(wanted)}; {name} is "
                             f"{'missing' if value is None else 'not one of them'}")
        if value is not None:
            object.__setattr__(p, name, _as_array(name, value, float if name == "loss" else int))
    if form == "losses":
        _check_losses(p.loss, p.tokens)
        return
    if p.predicted.shape != p.reference.shape:
        raise InputError(f"{p.predicted.size} predicted labels but {p.reference.size} reference labels")
    if form == "labels" and p.predicted.size == 0:
        raise InputError("no examples: predictions of an empty evaluation set")
    if form == "sequences":
        _check_offsets(p.offsets, p.predicted.size)
        if not p.label_names:
            raise InputError("token predictions need label_names: seqeval reads tags, not label ids")
    for name in ("predicted", "reference"):
        a = getattr(p, name)
        outside = (a < 0) | (a >= len(p.label_names)) if p.label_names else a < 0
        if outside.any():
            of = f" of the {len(p.label_names)} labels" if p.label_names else ""
            raise InputError(f"{name} label {int(a[outside][0])} is not a label id{of}")


def _as_array(name: str, value: Any, kind: type) -> np.ndarray:
    a = np.array(value, copy=True)
    if a.ndim != 1:
        raise InputError(f"{name} must be a flat array, got shape {a.shape}")
    if a.size and a.dtype.kind not in ("iu" if kind is int else "fiu"):
        raise InputError(f"{name} must hold {'integers' if kind is int else 'numbers'}, got {a.dtype}")
    a = a.astype(np.int64 if kind is int else np.float64)
    a.setflags(write=False)  # shared by every resample: nobody changes a run's outcome by accident
    return a


def _check_offsets(offsets: np.ndarray, total: int) -> None:
    if offsets.size < 2:
        raise InputError("no examples: token predictions need offsets of at least one sentence")
    if offsets[0] != 0 or offsets[-1] != total or (np.diff(offsets) < 0).any():
        raise InputError(f"offsets must rise from 0 to the {total} labels, one span per sentence")


def _check_losses(loss: np.ndarray, tokens: np.ndarray) -> None:
    if loss.shape != tokens.shape:
        raise InputError(f"{loss.size} example losses but {tokens.size} token counts")
    if loss.size == 0:
        raise InputError("no examples: predictions of an empty evaluation set")
    if not np.isfinite(loss).all() or (loss < 0).any():
        raise InputError("example losses must be finite and >= 0 (summed cross-entropies)")
    if (tokens < 0).any():
        raise InputError("token counts must be >= 0")
    if ((tokens == 0) & (loss != 0)).any():
        raise InputError("an example with no scored tokens has a non-zero loss")

"""Exceptions that name what was wrong and what to do about it."""
from __future__ import annotations


class PapaError(Exception):
    """Base class of every error papa raises on purpose."""


class UnsupportedModelError(PapaError, TypeError):
    """The model's architecture has no PAPA hook."""


class IncompatibleArtifactError(PapaError, ValueError):
    """An artifact (constants, ranking) was made for another model, shape, length or layout."""


class CorruptArtifactError(PapaError, ValueError):
    """An artifact file is truncated, unreadable, or its contents contradict its metadata."""


class InputError(PapaError, ValueError):
    """The model input does not fit the attached PAPA state (e.g. longer than the constants)."""


class ModelNotFoundError(PapaError, OSError):
    """A model name is neither a local directory, nor cached, nor reachable on the hub."""


class OutputPathError(PapaError, ValueError):
    """An output path cannot be written (a file where a directory should be, no write permission)."""

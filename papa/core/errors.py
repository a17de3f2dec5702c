"""Exceptions that name what was wrong and what to do about it.

A message names library arguments (``rounding='down'``); each suggestion is an `Arg`, and `cli_message` respells it
as the CLI's flag (``--rounding down``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

_UNSET = object()


@dataclass(frozen=True)
class Arg:
    """A setting an error advises, for either reader: `name` is the library's keyword argument, `flag` the CLI's
    option (default ``--`` + `name` with dashes). Without a `value` it names the setting alone (``data_dir=`` /
    ``--data-dir``); a `value` of None advises leaving it unset (``layout=None`` / "no ``--layout``")."""

    name: str
    value: object = _UNSET
    flag: str | None = None

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    def for_library(self) -> str:
        return f"{self.name}=" if self.value is _UNSET else f"{self.name}={self.value!r}"

    def for_cli(self) -> str:
        if self.value is _UNSET:
            return self.cli_flag
        if self.value is None:
            return f"no {self.cli_flag}"
        if isinstance(self.value, (list, tuple)):
            return " ".join([self.cli_flag, *map(str, self.value)])
        return f"{self.cli_flag} {self.value}"

    def __str__(self) -> str:
        return self.for_library()

    def __format__(self, spec: str) -> str:  # so that f"pass {Arg('rounding', 'down')}" reads as the library's
        return format(self.for_library(), spec)


class PapaError(Exception):
    """Base class of every error papa raises on purpose; `advice` lists the `Arg`s its message suggests."""

    def __init__(self, message: str = "", *, advice: Iterable[Arg] = ()):
        super().__init__(message)
        self.advice = tuple(advice)
        for arg in self.advice:
            if arg.for_library() not in message:
                raise ValueError(f"advice {arg!r} is not in the message {message!r}")  # a bug in papa, caught by tests

    def cli_message(self) -> str:
        """The message with each suggested argument spelled as the CLI's flag."""
        message = str(self.args[0]) if self.args else ""
        # longest first, so that `rounding='down'` is not cut inside a longer suggestion that contains it
        for arg in sorted(self.advice, key=lambda a: -len(a.for_library())):
            message = message.replace(arg.for_library(), arg.for_cli())
        return message


class UnsupportedModelError(PapaError, TypeError):
    """The model's architecture has no PAPA hook."""


class IncompatibleArtifactError(PapaError, ValueError):
    """An artifact (constants, ranking) was made for another model, shape, length or layout."""


class CorruptArtifactError(PapaError, ValueError):
    """An artifact file is truncated, unreadable, or its contents contradict its metadata."""


class InputError(PapaError, ValueError):
    """A value given to papa is not usable (bad input, a setting that does not fit the model or the data)."""


class ModelNotFoundError(PapaError, OSError):
    """A model name is neither a local directory, nor cached, nor reachable on the hub."""


class OutputPathError(PapaError, ValueError):
    """An output path cannot be written (a file where a directory should be, no write permission)."""


def check_one_of(value: object, choices: Iterable, what: str, *, where: str = "",
                 error: type[Exception] = ValueError) -> None:
    """Raise `error` unless `value` is one of `choices`, naming `what` it is (and `where`, e.g. a file)."""
    choices = tuple(choices)
    if value not in choices:
        prefix = f"{where}: " if where else ""
        raise error(f"{prefix}unknown {what} {value!r}; choose one of {', '.join(map(str, choices))}.")

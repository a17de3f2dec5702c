"""Resumable training: a training loop's whole state, saved every so often, so that an interrupted run resumes where
it stopped and ends exactly as an uninterrupted run would.

A checkpoint is one safetensors file: parameters, optimizer state, losses, the epoch's order, the generators' states
and the caller's ``carry.<name>`` tensors; its header (``papa_checkpoint``) records steps, seconds and `identity`,
and a checkpoint of other training is refused.
"""
from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch

from papa.core.artifacts import FORMAT, atomic_path, check_format, read_safetensors
from papa.core.errors import IncompatibleArtifactError, InputError

CHECKPOINT_HEADER_KEY = "papa_checkpoint"


def stack_losses(losses: list[torch.Tensor]) -> torch.Tensor:
    """Step losses [steps] on the last one's device; none: an empty float32 tensor on the CPU."""
    if not losses:
        return torch.zeros(0, dtype=torch.float32, device="cpu")
    at = losses[-1].device
    return torch.stack([loss if loss.device == at else loss.to(at) for loss in losses])


@dataclass
class Resumed:
    """Where a restored checkpoint left the training: steps taken, each step's loss, the order of the epoch it
    stopped in."""

    steps: int
    losses: list[torch.Tensor]
    order: torch.Tensor


@dataclass
class TrainingCheckpoint:
    """Where a training loop saves its state: every `every_steps` steps or `every_seconds`, and after the last.
    `identity` (JSON-able) says what is trained; `carry` returns the caller's tensors to save and `on_restore` gets them
    back."""

    path: Path
    identity: dict
    every_steps: int | None = None
    every_seconds: float | None = 300.0
    carry: Callable[[], dict[str, torch.Tensor]] | None = None
    on_restore: Callable[[dict[str, torch.Tensor]], None] | None = None
    _trained_before: float = field(default=0.0, init=False)
    _started: float = field(default_factory=time.perf_counter, init=False)
    _last_save: float = field(default_factory=time.perf_counter, init=False)
    stop_requested: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        for name in ("every_steps", "every_seconds"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise InputError(f"TrainingCheckpoint({name}={value!r}): give a positive number, or None.")
        try:
            json.dumps(self.identity, sort_keys=True)
        except (TypeError, ValueError) as exc:
            raise InputError(f"a checkpoint's identity must be JSON-able ({exc}).") from exc

    def elapsed(self) -> float:
        """Seconds trained so far, over every process that worked on this training."""
        return self._trained_before + time.perf_counter() - self._started

    @contextmanager
    def stopping_between_steps(self) -> Iterator[None]:
        """While training, an interrupt (Ctrl-C, SIGTERM) sets `stop_requested` (save and stop after this step); a
        second acts at once."""
        if threading.current_thread() is not threading.main_thread():  # signal handlers live in the main thread
            yield
            return
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

        def ask(signum, frame) -> None:
            self.stop_requested = True
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        for sig in previous:
            signal.signal(sig, ask)
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def due(self, steps: int, last: bool) -> bool:
        """Whether to save after `steps` steps (`last`: the training's final step; an interrupt asked to stop)."""
        return (last or self.stop_requested or (self.every_steps is not None and steps % self.every_steps == 0)
                or (self.every_seconds is not None and time.perf_counter() - self._last_save >= self.every_seconds))

    def save(self, steps: int, optimizer: torch.optim.Optimizer, generator: torch.Generator, order: torch.Tensor,
             losses: list[torch.Tensor]) -> None:
        """Write the state after `steps` steps, atomically."""
        tensors = {f"param.{g}.{i}": p.detach().cpu().contiguous()
                   for g, group in enumerate(optimizer.param_groups) for i, p in enumerate(group["params"])}
        for index, state in optimizer.state_dict()["state"].items():
            for name, value in state.items():
                value = torch.as_tensor(value, device="cpu")  # a step count may be a number
                tensors[f"optim.{index}.{name}"] = value.detach().reshape(-1).contiguous()
        tensors["losses"] = stack_losses(losses).detach().cpu().float()
        tensors["order"] = order.cpu().contiguous()
        tensors["generator"] = generator.get_state()
        tensors["torch_rng"] = torch.get_rng_state()
        if self.carry is not None:
            tensors.update({f"carry.{k}": v.detach().cpu().contiguous() for k, v in self.carry().items()})
        header = {"format_version": FORMAT, "steps": int(steps), "seconds": self.elapsed(),
                  "identity": self.identity}
        from safetensors.torch import save_file

        with atomic_path(self.path) as tmp:
            save_file(tensors, str(tmp), metadata={CHECKPOINT_HEADER_KEY: json.dumps(header, sort_keys=True)})
        self._last_save = time.perf_counter()

    def restore(self, optimizer: torch.optim.Optimizer, generator: torch.Generator) -> Resumed | None:
        """Load the saved state into the optimizer's parameters, the optimizer and the generators; None (nothing
        changed) where no checkpoint was saved yet."""
        if not self.path.is_file():
            return None
        fix = f"delete {self.path} to start this training over"
        header, tensors = read_safetensors(self.path, fix=fix)
        try:
            head = json.loads(header[CHECKPOINT_HEADER_KEY])
            version, steps, seconds, identity = (head["format_version"], head["steps"], head["seconds"],
                                                 head["identity"])
        except (KeyError, TypeError, ValueError) as exc:
            raise IncompatibleArtifactError(f"{self.path} is not a papa training checkpoint ({exc!r}): {fix}.") \
                from exc
        check_format(version, self.path, "training checkpoint")
        wanted = json.loads(json.dumps(self.identity, sort_keys=True))  # as it reads back (tuples become lists)
        if identity != wanted:
            differ = sorted(k for k in set(identity) | set(wanted) if identity.get(k) != wanted.get(k))
            said = ", ".join(f"{k}: {identity.get(k)!r} there, {wanted.get(k)!r} now" for k in differ)
            raise IncompatibleArtifactError(f"{self.path} is the checkpoint of other training ({said}): {fix}, "
                                            "or run with the settings it was made with.")
        with torch.no_grad():
            for g, group in enumerate(optimizer.param_groups):
                for i, p in enumerate(group["params"]):
                    saved = tensors.get(f"param.{g}.{i}")
                    if saved is None or saved.shape != p.shape:
                        raise IncompatibleArtifactError(f"{self.path} does not hold parameter {i} of group {g} "
                                                        f"with shape {tuple(p.shape)}: {fix}.")
                    p.copy_(saved.to(p.device, p.dtype))
        state_dict = optimizer.state_dict()
        params = [p for group in optimizer.param_groups for p in group["params"]]
        restored: dict[int, dict] = {}
        for key, value in tensors.items():
            if key.startswith("optim."):
                _, index, name = key.split(".", 2)
                like = params[int(index)]
                # step is a scalar; the moments have their parameter's shape and device
                value = value.reshape(()) if name == "step" else value.reshape(like.shape).to(like.device)
                restored.setdefault(int(index), {})[name] = value
        state_dict["state"] = restored
        optimizer.load_state_dict(state_dict)
        generator.set_state(tensors["generator"])
        torch.set_rng_state(tensors["torch_rng"])
        if self.on_restore is not None:
            self.on_restore({k.removeprefix("carry."): v for k, v in tensors.items() if k.startswith("carry.")})
        self._trained_before = float(seconds) - (time.perf_counter() - self._started)
        # on the parameters' device, so that the losses of later steps stack with them
        at = params[0].device if params else torch.device("cpu")
        return Resumed(steps=int(steps), losses=list(tensors["losses"].to(at).unbind(0)), order=tensors["order"])

    def remove(self) -> None:
        """Delete the checkpoint (the training it saved has ended and its result is saved)."""
        self.path.unlink(missing_ok=True)
        try:  # the folder of checkpoints goes with its last one
            self.path.parent.rmdir()
        except OSError:
            pass

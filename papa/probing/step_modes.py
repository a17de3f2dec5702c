"""How one optimizer step of a probe's training runs: eagerly, replayed from a CUDA graph, or compiled.

* ``eager``: the reference, bit for bit.
* ``graphed``: forward, loss, backward and a capturable AdamW step captured once for the full batch's shape and
  replayed; other shapes step eagerly with the same optimizer. CUDA only.
* ``compiled``: `torch.compile` of the forward and loss (one graph per batch shape) and of AdamW's update (shared by
  every optimizer of the same shapes).

Graphs need static shapes, so those modes score every position and the loss ignores unlabelled ones: equal to
``eager`` within rounding, not bit for bit. Their autocast runs without the cast cache (stale after an update).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from functools import cache, partial

import torch
from torch import nn
from torch.optim.adam import adam

from papa.core.errors import Arg, InputError
from papa.core.vocabulary import DEFAULT_STEP_MODE, STEP_MODES
from papa.probing.probes import IGNORE_INDEX, probe_loss
from papa.tasks.registry import POSITION_KINDS

#: Eager steps of the captured shape before a graph is captured: AdamW's state and the libraries' lazy set-up
#: (cuBLAS workspaces, autograd's streams) exist before capture, as CUDA graphs require.
WARMUP_STEPS = 2
#: The backend of the ``compiled`` mode (tests pass ``aot_eager``, which generates no code).
DEFAULT_BACKEND = "inductor"
#: The compiler's ``recompile_limit`` while the compiled step runs (default 8): a grid adds a graph per head
#: configuration and batch shape.
COMPILED_GRAPHS = 256
#: CUDA checks only the capturing thread's calls, so that another thread's (a chunk reader's) cannot fail a capture.
CAPTURE_ERROR_MODE = "thread_local"

Batch = tuple[torch.Tensor, ...]
#: What a step computes from a batch's device tensors: (features [B, L+1, n, d], attention mask [B, n], labels).
Features = Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor]]


def check_step_mode(mode: str, device: str | torch.device) -> str:
    """`mode` if it is known and can run on `device`; else an `InputError` saying what to give, before any work."""
    if mode not in STEP_MODES:
        fix = Arg("steps", DEFAULT_STEP_MODE)
        raise InputError(f"unknown step mode {mode!r}: choose one of {', '.join(STEP_MODES)} (give {fix} for the "
                         "reference)", advice=[fix])
    if mode == "graphed" and torch.device(device).type != "cuda":
        eager, compiled, cuda = Arg("steps", "eager"), Arg("steps", "compiled"), Arg("device", "cuda")
        raise InputError(f"step mode 'graphed' replays CUDA graphs, and this run is on {device}: give {eager} or "
                         f"{compiled}, or {cuda}", advice=[eager, compiled, cuda])
    return mode


def loss_kind(kind: str) -> str:
    """The `probe_loss` kind of a task kind (a sentence pair is scored as a sentence)."""
    return "sentence" if kind in ("sentence", "pair") else kind


def step_logits(probe: nn.Module, kind: str, feats: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor, *,
                dense: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits, labels) aligned for the loss: token-level kinds classify only labelled positions, or every position
    with `dense` (a static shape)."""
    if kind in POSITION_KINDS and not dense:
        select = labels != IGNORE_INDEX
        return probe(feats, mask, select=select), labels[select]
    return probe(feats, mask), labels


def _descend(optimizer: torch.optim.Optimizer, loss: torch.Tensor, step: Callable | None = None) -> torch.Tensor:
    """Back-propagate `loss` into unset gradients, take the step (`step`, else `optimizer`'s); the loss, detached."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    (step or optimizer.step)()
    return loss.detach()


def eager_step(probe: nn.Module, optimizer: torch.optim.Optimizer, kind: str, feats: torch.Tensor,
               mask: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """One optimizer step on a batch; its loss, left on the device (a read per step would wait for it)."""
    logits, targets = step_logits(probe, kind, feats, mask, labels)
    return _descend(optimizer, probe_loss(loss_kind(kind), logits, targets))


def new_optimizer(mode: str, groups: Sequence[dict]) -> torch.optim.AdamW:
    """The AdamW (no weight decay, as Table 3's setup) a step of `mode` updates: capturable for ``graphed``."""
    return torch.optim.AdamW(groups, weight_decay=0.0, capturable=mode == "graphed")


def fetcher(source) -> tuple[Callable[[torch.Tensor], Batch], Features]:
    """(`fetch(idx)`, the batch's device tensors; `features(*batch)`, what the step computes from them) of `source`
    (a `FeatureSource`, or a callable of example indices giving (features, mask, labels))."""
    fetch, features = getattr(source, "fetch", None), getattr(source, "from_fetched", None)
    if fetch is None or features is None:
        return source, given_features
    return fetch, features


def given_features(feats: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The `Features` of a batch that is already (features, mask, labels): a source without `fetch`."""
    return feats, mask, labels


def _dense_loss(probe: nn.Module, kind: str, features: Features, *batch: torch.Tensor) -> torch.Tensor:
    """The step's loss from a batch's device tensors, in static shapes (`step_logits` with ``dense``)."""
    feats, mask, labels = features(*batch)
    logits, targets = step_logits(probe, kind, feats, mask, labels, dense=True)
    return probe_loss(loss_kind(kind), logits, targets)


def _uncached_autocast(device: torch.device):
    """The autocast in force on `device`'s type again, without the cast cache; none if off."""
    kind = device.type
    if not torch.is_autocast_enabled(kind):
        return nullcontext()
    return torch.autocast(kind, dtype=torch.get_autocast_dtype(kind), cache_enabled=False)


class EagerStep:
    """The reference step (`eager_step`): features from the batch, then the probe's step."""

    def __init__(self, probe: nn.Module, optimizer: torch.optim.Optimizer, kind: str, features: Features):
        self.probe, self.optimizer, self.kind, self.features = probe, optimizer, kind, features

    def __call__(self, batch: Batch) -> torch.Tensor:
        """One step on `batch`; its loss on the device."""
        return eager_step(self.probe, self.optimizer, self.kind, *self.features(*batch))


def _rows(shape: tuple) -> int:
    """The examples in a batch of `shape` (each tensor's (shape, dtype, device)): its first tensor's leading size."""
    first = shape[0][0] if shape else ()
    return first[0] if first else 0


class GraphedStep:
    """Steps replayed from a CUDA graph captured for the full batch's shape (`batch_size` examples; None: the largest
    seen), after `warmup` eager steps; other shapes step eagerly with the same optimizer."""

    def __init__(self, probe: nn.Module, optimizer: torch.optim.Optimizer, kind: str, features: Features, *,
                 warmup: int = WARMUP_STEPS, batch_size: int | None = None):
        if not all(g.get("capturable") for g in optimizer.param_groups):
            raise ValueError("a graphed step needs a capturable optimizer: make it with new_optimizer('graphed', ...)")
        self.probe, self.optimizer, self.kind, self.features = probe, optimizer, kind, features
        self.warmup, self.warm = warmup, 0
        self.batch_size = batch_size
        self.shape: tuple | None = None           # the batch shape the graph is (to be) captured for
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static: Batch = ()
        self.static_loss: torch.Tensor | None = None
        self.replays = 0

    def __call__(self, batch: Batch) -> torch.Tensor:
        """One step on `batch`; its loss on the device (a copy: the graph's own is overwritten by the next replay)."""
        shape = tuple((tuple(t.shape), t.dtype, t.device) for t in batch)
        if self.graph is None:
            self._choose_shape(shape)
        if shape != self.shape:
            return self._eager(batch)  # a ragged batch: same kernels as the graph's, same optimizer state
        if self.graph is None:
            if self.warm < self.warmup:
                self.warm += 1
                return self._eager(batch, side_stream=True)
            self._capture(batch)
        for buffer, value in zip(self.static, batch):
            buffer.copy_(value)
        self.graph.replay()
        self.replays += 1
        return self.static_loss.clone()

    def _choose_shape(self, shape: tuple) -> None:
        """Before capture: the first full batch's shape, or without a batch size the largest seen (its warm-up
        restarts); never a ragged batch seen first."""
        if self.batch_size is not None:
            if self.shape is None and _rows(shape) == self.batch_size:
                self.shape = shape
        elif self.shape is None or (shape != self.shape and _rows(shape) > _rows(self.shape)):
            self.shape, self.warm = shape, 0

    def _eager(self, batch: Batch, side_stream: bool = False) -> torch.Tensor:
        """The step run eagerly, in the graph's own arithmetic (its loss formulation, the capturable optimizer)."""
        if not side_stream:
            return self._eager_step(batch)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            loss = self._eager_step(batch)
        torch.cuda.current_stream().wait_stream(stream)
        return loss

    def _eager_step(self, batch: Batch) -> torch.Tensor:
        with _uncached_autocast(batch[0].device):
            loss = _dense_loss(self.probe, self.kind, self.features, *batch)
        return _descend(self.optimizer, loss)

    def _capture(self, batch: Batch) -> None:
        """Capture forward, loss, backward and the optimizer's step on static copies of `batch`'s tensors; the first
        replay takes the step."""
        # Gradients unset first: the captured backward writes them rather than adding to them.
        self.static = tuple(t.clone() for t in batch)
        self.optimizer.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode=CAPTURE_ERROR_MODE):
            with _uncached_autocast(batch[0].device):
                loss = _dense_loss(self.probe, self.kind, self.features, *self.static)
            loss.backward()
            self.optimizer.step()
        self.graph, self.static_loss = graph, loss.detach()


def _adamw_update(tensors: tuple[list[torch.Tensor], ...], settings: dict) -> None:
    """AdamW's update of one parameter group, as `torch.optim.AdamW.step` computes it, from its state's tensors and
    `settings` (`adam`'s keywords)."""
    with torch.no_grad():
        adam(*tensors, capturable=False, differentiable=False, fused=None, **settings)


@cache
def compiled_update(backend: str) -> Callable:
    """`_adamw_update` compiled with `backend`, once per backend."""
    # Not each optimizer's own `step`: its guards would hold the optimizer, a graph per optimizer past the limit.
    return torch.compile(_adamw_update, backend=backend, fullgraph=True, dynamic=False)


def compiled_optimizer_step(optimizer: torch.optim.Optimizer, backend: str) -> None:
    """One step of `optimizer` (an AdamW of `new_optimizer`) through `compiled_update`, its state made by the
    optimizer's own `_init_group`."""
    update = compiled_update(backend)
    for group in optimizer.param_groups:
        params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps = [], [], [], [], [], []
        has_complex = optimizer._init_group(group, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps)
        if not params:
            continue
        for k, (p, step) in enumerate(zip(params, steps)):
            if step.device != p.device:  # a fresh or restored state counts its steps on the CPU
                optimizer.state[p]["step"] = steps[k] = step.to(p.device)
        beta1, beta2 = group["betas"]
        settings = dict(amsgrad=group["amsgrad"], beta1=beta1, beta2=beta2, lr=group["lr"],
                        weight_decay=group["weight_decay"], eps=group["eps"], maximize=group["maximize"],
                        decoupled_weight_decay=group.get("decoupled_weight_decay", True), foreach=group["foreach"],
                        has_complex=has_complex)
        with torch._dynamo.config.patch(recompile_limit=COMPILED_GRAPHS):
            update((params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps), settings)


class CompiledStep:
    """Steps whose forward and loss run compiled (one graph per batch shape; ``reduce-overhead`` with inductor), and
    the update too (`compiled_optimizer_step`)."""

    def __init__(self, probe: nn.Module, optimizer: torch.optim.Optimizer, kind: str, features: Features, *,
                 backend: str = DEFAULT_BACKEND):
        options = {"mode": "reduce-overhead"} if backend == "inductor" else {}
        self.loss = torch.compile(partial(_dense_loss, probe, kind, features), backend=backend, fullgraph=True,
                                  dynamic=False, **options)
        self.optimizer, self.probe, self.kind, self.features, self.warmed = optimizer, probe, kind, features, False
        self.optimizer_step = partial(compiled_optimizer_step, optimizer, backend)

    def __call__(self, batch: Batch) -> torch.Tensor:
        """One step on `batch`; its loss on the device (a copy: a CUDA graph's outputs are overwritten later)."""
        device = batch[0].device
        if not self.warmed:
            self._warm(batch)
        if device.type == "cuda":
            torch.compiler.cudagraph_mark_step_begin()  # the last step's graph outputs are no longer read
        with _uncached_autocast(device), torch._dynamo.config.patch(recompile_limit=COMPILED_GRAPHS):
            loss = self.loss(*batch)
        return _descend(self.optimizer, loss, self.optimizer_step).clone()

    def _warm(self, batch: Batch) -> None:
        """One pass of the loss outside the compiler, without a gradient or a draw from the generators."""
        # Libraries set themselves up lazily on a first call (under a lock the compiler cannot trace).
        device = batch[0].device
        with torch.no_grad(), torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            with _uncached_autocast(device):
                _dense_loss(self.probe, self.kind, self.features, *batch)
        self.warmed = True


Step = EagerStep | GraphedStep | CompiledStep


def make_step(mode: str, probe: nn.Module, optimizer: torch.optim.Optimizer, kind: str, features: Features, *,
              backend: str = DEFAULT_BACKEND, batch_size: int | None = None) -> Step:
    """The step of `mode` for one probe and its optimizer (`new_optimizer(mode, ...)`); `features` as `fetcher`
    gives it; `batch_size` is the shape a graphed step captures."""
    if mode == "eager":
        return EagerStep(probe, optimizer, kind, features)
    if mode == "graphed":
        return GraphedStep(probe, optimizer, kind, features, batch_size=batch_size)
    if mode == "compiled":
        return CompiledStep(probe, optimizer, kind, features, backend=backend)
    raise InputError(f"unknown step mode {mode!r}: choose one of {', '.join(STEP_MODES)}")

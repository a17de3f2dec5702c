"""Attach PAPA to a frozen encoder: per head keep, replace (constant matrix) or mix (learned λ), and capture.

`attach(model)` returns a `PapaController`; the model type's adapter hooks each layer's attention.

* keep     the head's own attention A, bit for bit;
* replace  its constant matrix C, masked by what the attention mask allows and renormalised row-wise (paper 3.3); a
           row with no mass left stays 0;
* mix      λ·A + (1 − λ)·C with λ = sigmoid(θ), θ per head, initialised to 0 (paper 3.2);
* capture  independent of the modes: accumulate A into `AttentionStats`.

The model's weights are frozen while attached and never modified; `detach` restores everything.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from papa.core.errors import InputError, PapaError, check_one_of
from papa.core.vocabulary import HEAD_MODES
from papa.method.adapters.base import ModelInfo
from papa.method.architectures import describe_model, model_signature
from papa.method.attention_free import restore_query_key
from papa.method.capture import AttentionStats, query_weights
from papa.method.constant_heads import ConstantHeads, ConstantWorkspace
from papa.method.constants import DATA_FREE_KINDS, ConstantMatrices, row_normalised
from papa.method.head_modes import KEEP, MIX, MODE_NAMES, REPLACE, LayerPlan
from papa.method.layout import SEPARATOR_LAST
from papa.method.masks import Allowed, padding_mask
from papa.method.signature import ModelSignature

__all__ = ["KEEP", "MIX", "MODE_NAMES", "REPLACE", "PapaController", "attach", "attached", "controller_of", "detach"]

_CONTROLLER = "_papa_controller"

#: workspaces (one per batch size, length, dtype and device) a controller keeps for the constant heads
_WORKSPACES = 4

HeadSpec = Iterable[tuple[int, int]] | torch.Tensor | None


class PapaController(nn.Module):
    """The PAPA state of one encoder: head modes, constants, mixing weights θ, and capture. Its parameters are `theta`
    and, with ``trainable_constants=True``, the constants."""

    def __init__(self, model: nn.Module, info: ModelInfo, model_name: str | None = None):
        super().__init__()
        self._model_ref = [model]  # a list keeps the model out of this module's children
        self.info = info
        self.model_name = model_name
        self.theta = nn.Parameter(torch.zeros(info.num_layers, info.num_heads))
        self.register_buffer("modes", torch.full((info.num_layers, info.num_heads), KEEP, dtype=torch.long))
        self._plans: list[LayerPlan] = []   # per layer, from the modes (`plan`)
        self._plan_cache: dict[tuple, LayerPlan] = {}
        self._constant_heads: dict = {}      # (layer, heads, n, dtype, pattern) -> `ConstantHeads`, per configuration
        self._replan()
        self.register_buffer("_constants", None, persistent=False)
        self.constant_set: ConstantMatrices | None = None
        self.stats: AttentionStats | None = None
        self._valid: torch.Tensor | None = None   # [B, n] bool of the forward pass in flight; None: no padding
        self._handles: list[RemovableHandle] = []
        self._attn_impl: str | None = None   # the attention implementation the adapter replaced, if any
        self.forward_id = 0                  # counts forward passes (shared attention modules count their calls)
        self._shared_modules = len({id(m) for m in info.attention_modules}) < len(info.attention_modules)
        self._per_pass: list = []            # (name, tensor, value) made once in the forward pass in flight
        self._workspaces: dict = {}          # (B, n, d′, dtype, device) -> `ConstantWorkspace`, kept across passes
        self._padding_only = True            # the forward pass in flight got a 2D padding mask (or none)
        # the capture's real tokens and query weights for the pass in flight (`_captured_tokens`)
        self._capture_queries: tuple[torch.Tensor, torch.Tensor] | None = None
        self._requires_grad: dict[str, bool] = {}
        self._signature: ModelSignature | None = None
        self.attached = False
        # False: every changed layer materialises its probabilities (the reference the fast paths are tested against)
        self.fast_paths = True

    # ---- identity ---------------------------------------------------------------------------------------------
    @property
    def model(self) -> nn.Module:
        return self._model_ref[0]

    @property
    def signature(self) -> ModelSignature:
        if self._signature is None:
            self._signature = model_signature(self.model, self.model_name)
        return self._signature

    @property
    def num_layers(self) -> int:
        return self.info.num_layers

    @property
    def num_heads(self) -> int:
        return self.info.num_heads

    @property
    def lambdas(self) -> torch.Tensor:
        """λ = sigmoid(θ) per head, [L, H]."""
        return torch.sigmoid(self.theta)

    # ---- constants ----------------------------------------------------------------------------------------------
    def set_constants(self, constants: ConstantMatrices, *, trainable: bool = False, strict: bool = True) -> None:
        """Use `constants` for replaced and mixed heads, after checking they fit this model (`strict=False`: shapes
        only); `trainable=True` makes them a parameter, clamped to ≥ 0 at use."""
        if strict or (constants.num_layers, constants.num_heads) != (self.num_layers, self.num_heads):
            constants.check_compatible(self.signature)  # not strict: only to raise the shape error
        device = self.theta.device
        data = constants.matrices.detach().clone().to(device=device, dtype=torch.float32)
        self._buffers.pop("_constants", None)
        self._parameters.pop("_constants", None)
        if trainable:
            self.register_parameter("_constants", nn.Parameter(data))
        else:
            self.register_buffer("_constants", data, persistent=False)
        self.constant_set = constants
        self._constant_heads.clear()

    @property
    def constants(self) -> torch.Tensor | None:
        """The constants in use, [L, H, N, N] (a parameter when trainable)."""
        return self._constants

    @property
    def max_length(self) -> int | None:
        return None if self._constants is None else self._constants.shape[-1]

    # ---- modes --------------------------------------------------------------------------------------------------
    def _mask(self, heads: HeadSpec) -> torch.Tensor:
        L, H = self.num_layers, self.num_heads
        if heads is None:
            return torch.ones(L, H, dtype=torch.bool)
        if isinstance(heads, torch.Tensor):
            if heads.shape != (L, H):
                raise ValueError(f"a head mask must have shape ({L}, {H}) = (layers, heads), got {tuple(heads.shape)}")
            return heads.to(device="cpu", dtype=torch.bool)
        mask = torch.zeros(L, H, dtype=torch.bool)
        for item in heads:
            try:
                layer, head = (int(x) for x in item)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"heads are (layer, head) pairs; got {item!r}") from exc
            if not (0 <= layer < L and 0 <= head < H):
                raise ValueError(f"head ({layer}, {head}) does not exist: the model has {L} layers x {H} heads "
                                 "(0-based indices)")
            mask[layer, head] = True
        return mask

    def set_modes(self, mode: str, heads: HeadSpec = None) -> None:
        """Set `heads` (pairs, an [L, H] bool mask, or None for all) to 'keep', 'replace' or 'mix'."""
        check_one_of(mode, sorted(MODE_NAMES), "head mode")
        if mode != "keep" and self._constants is None:
            raise PapaError(f"heads cannot be set to {mode!r} before constants are set: call set_constants(...) "
                            "with constants from `papa extract` or papa.method.constants.data_free_constants(...)")
        mask = self._mask(heads).to(self.modes.device)
        self.modes[mask] = MODE_NAMES[mode]
        self._replan()

    def keep_all(self) -> None:
        """Every head back to its original attention."""
        self.modes.fill_(KEEP)
        self._replan()

    def load_modes(self, modes: torch.Tensor) -> None:
        """Set every head's mode from an [L, H] tensor of mode codes (e.g. ``controller.modes.clone()``)."""
        if modes.shape != self.modes.shape:
            raise ValueError(f"modes must have shape {tuple(self.modes.shape)}, got {tuple(modes.shape)}")
        self.modes.copy_(modes)
        self._replan()

    def plan(self, layer: int) -> LayerPlan:
        """`layer`'s `LayerPlan`: its modes as known on the host, so that a forward pass never reads the device."""
        return self._plans[layer]

    def _replan(self) -> None:
        device = self.modes.device
        # One plan object per (modes, device), so that a compiled forward pass guarding on them is not recompiled.
        plans = []
        for row in self.modes.tolist():
            key = (tuple(row), device)
            if key not in self._plan_cache:
                self._plan_cache[key] = LayerPlan.of(row, device)
            plans.append(self._plan_cache[key])
        self._plans = plans
        self._constant_heads.clear()  # which heads are replaced may have changed

    def _apply(self, fn, recurse: bool = True):
        out = super()._apply(fn, recurse)  # .to(device), .cuda(), ...: the index tensors follow the modes
        if "modes" in self._buffers:
            self._replan()  # also drops constants prepared on the old device
            self._workspaces.clear()
        return out

    def replace(self, heads: HeadSpec = None) -> None:
        """Replace `heads` (default: all) with their constant matrices."""
        self.set_modes("replace", heads)

    def mix(self, heads: HeadSpec = None, reset: bool = True) -> None:
        """Mix `heads` (default: all) as λA + (1−λ)C; ``reset`` sets their λ back to 0.5."""
        self.set_modes("mix", heads)
        if reset:
            with torch.no_grad():
                self.theta[self._mask(heads).to(self.theta.device)] = 0.0

    def head_modes(self) -> list[list[str]]:
        """Modes as names, [layer][head]."""
        return [[HEAD_MODES[m] for m in row] for row in self.modes.tolist()]

    # ---- capture ------------------------------------------------------------------------------------------------
    @contextmanager
    def capturing(self, max_length: int) -> Iterator[AttentionStats]:
        """Accumulate attention statistics of every forward pass inside the block at `max_length`."""
        if self.stats is not None:
            raise PapaError("a capture is already running on this model")
        self.stats = AttentionStats(self.num_layers, self.num_heads, max_length, device=self.theta.device)
        try:
            yield self.stats
        finally:
            stats, self.stats = self.stats, None
            stats.sums, stats.counts = stats.sums.cpu(), stats.counts.cpu()

    # ---- the per-forward-pass machinery --------------------------------------------------------------------------
    def _begin_forward(self, module: nn.Module, args: tuple, kwargs: dict) -> None:
        bound = self._forward_signature.bind_partial(*args, **kwargs).arguments
        mask = bound.get("attention_mask")
        ref = bound.get("input_ids")
        if ref is None:
            ref = bound.get("inputs_embeds")
        n = ref.shape[1] if ref is not None else (mask.shape[-1] if mask is not None else None)
        self._valid = padding_mask(mask)
        if self._shared_modules:  # only they read it: a compiled forward pass does not guard on a changing count
            self.forward_id += 1
        self._per_pass.clear()
        for workspace in self._workspaces.values():
            workspace.forget()
        # transformers builds masks from the padding alone, except that without one it may read packed sequences
        # off the position ids: those masks are analysed, not assumed.
        self._padding_only = (mask is not None and mask.dim() == 2) or (mask is None
                                                                        and bound.get("position_ids") is None)
        if self.max_length is not None and n is not None and n > self.max_length and self.any_changed():
            raise InputError(
                f"the input has {n} positions but the constants were made at length {self.max_length}: encode inputs "
                f"at max_length={self.max_length} (papa.method.layout.encode) or extract constants at a larger length."
            )
        meta = self.constant_set.metadata if self.constant_set is not None else None
        if (meta is not None and meta.layout in SEPARATOR_LAST and meta.kind not in DATA_FREE_KINDS and n is not None
                and n != self.max_length and self.any_changed()):
            # In the sep_last and official layouts slot n-1 holds the final separator, so the rows of constants
            # learned at another length belong to other tokens: the numbers would be plausible but wrong.
            raise InputError(
                f"the input has {n} positions but these {meta.kind} constants were made for inputs padded to exactly "
                f"{self.max_length} in the {meta.layout} layout: encode inputs at max_length={self.max_length} "
                "(papa.method.layout.encode), or use constants made at that length."
            )
        self._capture_queries = None  # made by the first layer that captures (`_captured_tokens`), reused
        if self.stats is not None and n is not None:
            valid = self._valid if self._valid is not None else torch.ones(ref.shape[0], n, dtype=torch.bool)
            self.stats.add_counts(valid.to(self.stats.counts.device), causal=self.info.causal)

    def _end_forward(self, *_unused) -> None:
        self._valid = None
        self._per_pass.clear()
        self._capture_queries = None

    def allowed(self, mask: torch.Tensor | None, q: int, k: int, *, causal: bool, windowed: bool = False) -> Allowed:
        """What `mask` (as an attention function received it) allows, once per mask and pass: described from the
        padding, `causal` and `windowed` where transformers built it, else analysed."""

        def describe() -> Allowed:
            if self._padding_only:
                return Allowed.from_padding_mask(mask, q, k, causal=causal, windowed=windowed,
                                                 padded=self._valid is not None)
            return Allowed.from_mask(mask, q, k, causal=causal)

        return self.per_pass(("allowed", q, k, causal, windowed), mask, describe)

    def workspace(self, value: torch.Tensor) -> ConstantWorkspace | None:
        """The buffers `constant_attention` reuses for values shaped as `value` [B, h, n, d′] (the last few shapes);
        None while compiling."""
        if torch.compiler.is_compiling():
            return None
        batch, _, n, dv = value.shape
        key = (batch, n, dv, value.dtype, value.device)
        made = self._workspaces.get(key)
        if made is None:
            if len(self._workspaces) >= _WORKSPACES:  # e.g. a corpus's last, smaller batch, then the next corpus's
                del self._workspaces[next(iter(self._workspaces))]
            made = self._workspaces[key] = ConstantWorkspace(self.num_heads, n, batch, dv, value.dtype, value.device)
        return made

    def valid_mask(self, batch: int, n: int, device: torch.device) -> torch.Tensor | None:
        """The real tokens `[B, n]` of the forward pass in flight on `device`; None where nothing is padded."""
        v = self._valid
        if v is None:
            return None
        if v.shape != (batch, n):
            raise InputError(f"padding mask of shape {tuple(v.shape)} does not match attention over {batch} x {n}")
        return v.to(device)

    def layer_needs(self, layer: int) -> tuple[bool, bool]:
        """(any head not kept, any head mixed) for `layer`, from the host (`plan`)."""
        p = self.plan(layer)
        return p.changed, p.mixed

    def any_changed(self) -> bool:
        """Whether some head of some layer is not kept (from the host)."""
        return any(self.plan(layer).changed for layer in range(self.num_layers))

    def constant_matrices(self, layer: int, n: int, heads: torch.Tensor | slice = slice(None)) -> torch.Tensor:
        """The raw constant matrices of `heads` at length `n`, [h, n, n] (trainable ones clamped to ≥ 0)."""
        c = self._constants[layer, heads, :n, :n]
        return c.clamp_min(0.0) if isinstance(self._constants, nn.Parameter) else c

    def constant_heads(self, layer: int, n: int, dtype: torch.dtype, allowed: Allowed, *,
                       replaced: bool, pattern: tuple = ()) -> ConstantHeads:
        """`layer`'s replaced heads (else every head) at length `n`, masked by `allowed`'s pattern, for
        `constant_attention` in `dtype`; cached per configuration unless the constants train or the mask was
        analysed."""
        plan = self.plan(layer)
        every = not replaced or len(plan.replace) == self.num_heads
        key = (layer, every, n, dtype, pattern)
        cacheable = (not isinstance(self._constants, nn.Parameter)
                     and (allowed.pattern is None or self._padding_only))
        made = self._constant_heads.get(key) if cacheable else None
        if made is None:
            c = self.constant_matrices(layer, n, slice(None) if every else plan.replace_index)
            made = ConstantHeads.of(c if allowed.pattern is None else c * allowed.pattern, dtype)
            if cacheable:
                self._constant_heads[key] = made
        return made

    def mix_weights(self, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        """Each layer's weight of A per head, [1, 1, H, 1] in `dtype`: λ mixed, 1 kept, 0 replaced; once per pass."""
        def make() -> tuple[torch.Tensor, ...]:
            w = torch.where(self.modes == MIX, torch.sigmoid(self.theta), (self.modes == KEEP).to(self.theta.dtype))
            return w.to(dtype).view(self.num_layers, 1, 1, self.num_heads, 1).unbind(0)

        return self.per_pass(("mix_weights", dtype), None, make)

    def constant_probs(self, layer: int, heads: torch.Tensor | slice, valid: torch.Tensor | Allowed | None, n: int,
                       dtype: torch.dtype, rows: slice = slice(None)) -> torch.Tensor:
        """Constant matrices of `heads` (query `rows`) masked by `valid` (an `Allowed`, or a [B, n] real-key mask)
        and renormalised row-wise: [B or 1, h, r, n]."""
        allowed = valid if isinstance(valid, Allowed) else Allowed.from_keys(valid)
        c = self.constant_matrices(layer, n, heads)[:, rows].to(dtype).unsqueeze(0)
        m = allowed.as_bool(rows)
        if m is not None:
            c = c * m.to(dtype)
        return row_normalised(c)

    def _captured_tokens(self, probs: torch.Tensor, valid: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """The capture's real tokens [B, n] and query weights, once per forward pass."""
        if self._capture_queries is None:
            if valid is None:
                valid = torch.ones(probs.shape[0], probs.shape[-1], dtype=torch.bool, device=probs.device)
            self._capture_queries = (valid, query_weights(valid, probs.dtype))
        return self._capture_queries

    def capture(self, layer: int, probs: torch.Tensor, valid: torch.Tensor | None, heads: slice = slice(None),
                rows: slice = slice(None)) -> None:
        """Add probabilities [B, h, r, n] of `heads` and query `rows` to the running capture, if any."""
        if self.stats is not None:
            real, queries = self._captured_tokens(probs, valid)
            self.stats.add(layer, probs.detach() if probs.requires_grad else probs, real, heads, rows,
                           queries=queries)

    def per_pass(self, name: tuple, tensor: torch.Tensor | None, make: Callable[[], object]) -> object:
        """`make()`, computed once per forward pass for `tensor` (by identity) and `name`."""
        for seen_name, seen, made in self._per_pass:
            if seen is tensor and seen_name == name:
                return made
        made = make()
        self._per_pass.append((name, tensor, made))
        return made

    def transform_probs(self, layer: int, probs: torch.Tensor, valid: torch.Tensor | None,
                        heads: slice = slice(None), rows: slice = slice(None), *,
                        allowed: Allowed | None = None) -> torch.Tensor:
        """Capture probabilities [B, h, r, n] of `heads` and query `rows`, then apply the layer's head modes;
        constants are masked by `allowed` (default: the real keys in `valid`)."""
        self.capture(layer, probs, valid, heads, rows)
        plan = self.plan(layer)
        kept = range(self.num_heads)[heads]
        if all(h in plan.keep for h in kept):
            return probs
        modes = self.modes[layer, heads]
        c = self.constant_probs(layer, heads, allowed if allowed is not None else valid, probs.shape[-1],
                                probs.dtype, rows)
        w = (modes == KEEP).to(probs.dtype)
        if plan.mixed and any(h not in plan.keep and h not in plan.replace for h in kept):
            # λ joins the graph only where it is used
            w = torch.where(modes == MIX, torch.sigmoid(self.theta[layer, heads]).to(probs.dtype), w)
        w = w[None, :, None, None]
        return w * probs + (1 - w) * c

    # ---- attach / detach ----------------------------------------------------------------------------------------
    def add_hook(self, handle: RemovableHandle) -> None:
        """Take a hook handle to remove on `detach` (before the adapter's `remove` runs)."""
        self._handles.append(handle)

    def remember_attn_implementation(self, name: str) -> None:
        """Note the model's attention implementation before an adapter replaces it."""
        self._attn_impl = name

    def restore_attn_implementation(self) -> None:
        """Put back the implementation `remember_attn_implementation` noted, if any, and forget it."""
        if self._attn_impl is not None:
            self.model.set_attn_implementation(self._attn_impl)
            self._attn_impl = None

    def _install(self) -> None:
        model, info = self.model, self.info
        self._forward_signature = inspect.signature(info.base.forward)
        self.add_hook(info.base.register_forward_pre_hook(
            lambda m, a, k: self._begin_forward(m, a, k), with_kwargs=True))
        self.add_hook(info.base.register_forward_hook(self._end_forward))
        info.adapter.install(self)
        for name, p in model.named_parameters():
            self._requires_grad[name] = p.requires_grad
            p.requires_grad_(False)
        model.__dict__[_CONTROLLER] = self
        self.attached = True

    def detach(self) -> None:
        """Remove every hook, restore the attention implementation and the parameters' ``requires_grad``."""
        if not self.attached:
            return
        model, info = self.model, self.info
        restore_query_key(self)  # papa.method.attention_free.drop_query_key swapped projections
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._workspaces.clear()
        info.adapter.remove(self)
        for name, p in model.named_parameters():
            if name in self._requires_grad:
                p.requires_grad_(self._requires_grad[name])
        model.__dict__.pop(_CONTROLLER, None)
        self.attached = False


def attach(model: nn.Module, constants: ConstantMatrices | None = None, *, model_name: str | None = None,
           trainable_constants: bool = False) -> PapaController:
    """Attach PAPA to a model (encoder or causal LM); all heads start as 'keep'. Raises `UnsupportedModelError` where
    the attention cannot be intercepted and `PapaError` if already attached."""
    if _CONTROLLER in model.__dict__:
        raise PapaError("papa is already attached to this model: use the controller it returned, or papa.detach(model)")
    info = describe_model(model)
    controller = PapaController(model, info, model_name=model_name)
    param = next(model.parameters(), None)
    if param is not None:
        controller.to(param.device)
    if constants is not None:
        controller.set_constants(constants, trainable=trainable_constants)
    controller._install()
    return controller


def detach(model: nn.Module) -> None:
    """Undo `attach` on `model` (no-op if papa is not attached)."""
    controller = model.__dict__.get(_CONTROLLER)
    if controller is not None:
        controller.detach()


def controller_of(model: nn.Module) -> PapaController | None:
    """The controller attached to `model`, if any."""
    return model.__dict__.get(_CONTROLLER)


@contextmanager
def attached(model: nn.Module, *, model_name: str | None = None) -> Iterator[PapaController]:
    """The model's controller for the block: the one attached to it, else one attached for the block and detached
    after it (the model as it was)."""
    existing = controller_of(model)
    controller = existing or attach(model, model_name=model_name)
    try:
        yield controller
    finally:
        if existing is None:
            controller.detach()

"""Attach PAPA to a frozen encoder: per head keep, replace (constant matrix) or mix (learned λ), and capture.

One entry point, `attach(model)`, returns a `PapaController`. It hooks each layer's self-attention in the way the
architecture allows (see `papa.method.architectures`) and reads the padding mask of every forward pass from a pre-hook on
the encoder, so all architectures share one mechanism for masks, modes and statistics:

* keep     the head's own attention A (the original computation is called, bit for bit);
* replace  the head's constant matrix C, masked to the current input's real keys and renormalised row-wise
           (paper 3.3, footnote 8); a row with no mass left (the zeros kind) stays 0, pruning the head;
* mix      B = λ·A + (1 − λ)·C with λ = sigmoid(θ), one trainable θ per head, initialised to 0 so λ = 0.5 (paper 3.2);
* capture  independent of the modes: accumulate A (masked to real queries and keys) into `AttentionStats`.

The model's weights are frozen (``requires_grad=False``) while attached and never modified; `detach` restores
the attention implementation, the hooks and the ``requires_grad`` flags exactly.
"""
from __future__ import annotations

import inspect
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn
from transformers import AttentionInterface
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from papa.method.architectures import EncoderInfo, ModelSignature, describe_encoder, model_signature
from papa.method.attention_free import QK_HEADS, RESTORE, constant_attention
from papa.method.capture import AttentionStats
from papa.method.constants import DATA_FREE_KINDS, ConstantMatrices
from papa.core.errors import InputError, PapaError
from papa.method.layout import SEPARATOR_LAST
from papa.core.vocabulary import HEAD_MODES

# A head mode's integer code is its position in the vocabulary's HEAD_MODES.
MODE_NAMES = {name: code for code, name in enumerate(HEAD_MODES)}
KEEP, REPLACE, MIX = MODE_NAMES["keep"], MODE_NAMES["replace"], MODE_NAMES["mix"]

_SITE = "_papa_site"          # per-attention-module entry in __dict__ (bypasses nn.Module attribute registration)
_CONTROLLER = "_papa_controller"
_PREFIX = "papa_"             # registered attention implementations are named papa_<original>
CAPTURE_BLOCK_BYTES = 1 << 20  # probabilities materialised at once by capture on a CPU (see _attention_in_blocks)
# On an accelerator the cost is kernel launches, not cache misses: 1 MiB blocks ran capture at 0.03-0.15x the plain
# forward on an H100, so there a block is a whole layer unless that exceeds this many bytes.
CAPTURE_BLOCK_BYTES_ACCELERATOR = 1 << 30

HeadSpec = Iterable[tuple[int, int]] | torch.Tensor | None


@dataclass
class _Site:
    controller: "PapaController"
    layer: int
    fallback: Callable | None  # the original attention function (attention_function hook only)


class PapaController(nn.Module):
    """The PAPA state of one encoder: head modes, constants, mixing weights θ, and capture.

    Trainable parameters are `theta` (always) and the constants when ``trainable_constants=True``; pass
    ``controller.parameters()`` (plus the probe's) to an optimiser.
    """

    def __init__(self, model: nn.Module, info: EncoderInfo, model_name: str | None = None):
        super().__init__()
        self._model_ref = [model]  # a list keeps the model out of this module's children
        self.info = info
        self.model_name = model_name
        self.theta = nn.Parameter(torch.zeros(info.num_layers, info.num_heads))
        self.register_buffer("modes", torch.full((info.num_layers, info.num_heads), KEEP, dtype=torch.long))
        self.register_buffer("_constants", None, persistent=False)
        self.constant_set: ConstantMatrices | None = None
        self.stats: AttentionStats | None = None
        self._valid: torch.Tensor | None = None   # [B, n] bool of the forward pass in flight; None: no padding
        self._n: int | None = None
        self._handles: list = []
        self._attn_impl: str | None = None
        self._requires_grad: dict[str, bool] = {}
        self._signature: ModelSignature | None = None
        self.attached = False
        # False: every changed layer materialises [B, H, n, n] probabilities (the reference the fast paths of
        # papa.method.attention_free are tested against).
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
        """Use `constants` for replaced and mixed heads, after checking they were made for this model.

        ``trainable=True`` makes them a parameter (Table 1's "labeled data" rows); they are kept non-negative at use.
        ``strict=False`` skips the model-identity check (shapes are always checked).
        """
        if strict:
            constants.check_compatible(self.signature)
        elif (constants.num_layers, constants.num_heads) != (self.num_layers, self.num_heads):
            constants.check_compatible(self.signature)  # raises the shape error
        device = self.theta.device
        data = constants.matrices.detach().clone().to(device=device, dtype=torch.float32)
        self._buffers.pop("_constants", None)
        self._parameters.pop("_constants", None)
        if trainable:
            self.register_parameter("_constants", nn.Parameter(data))
        else:
            self.register_buffer("_constants", data, persistent=False)
        self.constant_set = constants

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
        if mode not in MODE_NAMES:
            raise ValueError(f"unknown head mode {mode!r}; choose one of {sorted(MODE_NAMES)}")
        if mode != "keep" and self._constants is None:
            raise PapaError(f"heads cannot be set to {mode!r} before constants are set: call set_constants(...) "
                            "with constants from `papa extract` or papa.method.constants.data_free_constants(...)")
        mask = self._mask(heads).to(self.modes.device)
        self.modes[mask] = MODE_NAMES[mode]

    def keep_all(self) -> None:
        """Every head back to its original attention."""
        self.modes.fill_(KEEP)

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
        names = {v: k for k, v in MODE_NAMES.items()}
        return [[names[int(m)] for m in row] for row in self.modes.tolist()]

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
        self._n = n
        self._valid = _padding_mask(mask)
        if self.max_length is not None and n is not None and n > self.max_length and bool((self.modes != KEEP).any()):
            raise InputError(
                f"the input has {n} positions but the constants were made at length {self.max_length}: encode inputs "
                f"at max_length={self.max_length} (papa.method.layout.encode) or extract constants at a larger length."
            )
        meta = self.constant_set.metadata if self.constant_set is not None else None
        if (meta is not None and meta.layout in SEPARATOR_LAST and meta.kind not in DATA_FREE_KINDS and n is not None
                and n != self.max_length and bool((self.modes != KEEP).any())):
            # In the sep_last and official layouts slot n-1 holds the final separator, so the rows of constants
            # learned at another length belong to other tokens: the numbers would be plausible but wrong.
            raise InputError(
                f"the input has {n} positions but these {meta.kind} constants were made for inputs padded to exactly "
                f"{self.max_length} in the {meta.layout} layout: encode inputs at max_length={self.max_length} "
                "(papa.method.layout.encode), or use constants made at that length."
            )
        if self.stats is not None and n is not None:
            valid = self._valid if self._valid is not None else torch.ones(ref.shape[0], n, dtype=torch.bool)
            self.stats.add_counts(valid.to(self.stats.counts.device))

    def _end_forward(self, *_unused) -> None:
        self._valid, self._n = None, None

    def _valid_for(self, batch: int, n: int, device: torch.device) -> torch.Tensor | None:
        v = self._valid
        if v is None:
            return None
        if v.shape != (batch, n):
            raise InputError(f"padding mask of shape {tuple(v.shape)} does not match attention over {batch} x {n}")
        return v.to(device)

    def _layer_needs(self, layer: int) -> tuple[bool, bool]:
        """(any head not kept, any head mixed) for `layer`."""
        modes = self.modes[layer]
        return bool((modes != KEEP).any()), bool((modes == MIX).any())

    def constant_matrices(self, layer: int, n: int, heads: torch.Tensor | slice = slice(None)) -> torch.Tensor:
        """The raw constant matrices of `heads` at length `n`, [h, n, n] (trainable ones clamped to ≥ 0)."""
        c = self._constants[layer, heads, :n, :n]
        return c.clamp_min(0.0) if isinstance(self._constants, nn.Parameter) else c

    def constant_probs(self, layer: int, heads: torch.Tensor | slice, valid: torch.Tensor | None, n: int,
                       dtype: torch.dtype) -> torch.Tensor:
        """Constant matrices of `heads` masked to real keys and renormalised row-wise: [B or 1, h, n, n]."""
        c = self.constant_matrices(layer, n, heads).to(dtype).unsqueeze(0)
        if valid is not None:
            c = c * valid[:, None, None, :].to(dtype)
        s = c.sum(-1, keepdim=True)
        return torch.where(s > 0, c / s.clamp_min(torch.finfo(dtype).tiny), torch.zeros_like(c))

    def transform_probs(self, layer: int, probs: torch.Tensor, valid: torch.Tensor | None,
                        heads: slice = slice(None), rows: slice = slice(None)) -> torch.Tensor:
        """Apply the layer's head modes to attention probabilities [B, h, r, n] of `heads` and query `rows` (all by
        default), capturing them first."""
        if self.stats is not None:
            v = valid if valid is not None else torch.ones(probs.shape[0], probs.shape[-1], dtype=torch.bool,
                                                           device=probs.device)
            self.stats.add(layer, probs.detach(), v, heads, rows)
        modes = self.modes[layer, heads]
        if not bool((modes != KEEP).any()):
            return probs
        c = self.constant_probs(layer, heads, valid, probs.shape[-1], probs.dtype)[:, :, rows]
        w = (modes == KEEP).to(probs.dtype)
        if bool((modes == MIX).any()):  # λ joins the graph only where it is used
            w = torch.where(modes == MIX, torch.sigmoid(self.theta[layer, heads]).to(probs.dtype), w)
        w = w[None, :, None, None]
        return w * probs + (1 - w) * c

    def _attention_in_blocks(self, layer: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                             attention_mask: torch.Tensor | None, scaling: float | None,
                             valid: torch.Tensor | None) -> torch.Tensor:
        """Materialised attention (capture, modes) one block of heads and query rows at a time, output [B, n, H, d].

        On the CPU a block holds about `CAPTURE_BLOCK_BYTES` of probabilities, so it stays in cache and reuses freed
        memory; one [B, H, n, n] tensor per layer is several times slower there at n = 512. On an accelerator blocks
        are as large as `CAPTURE_BLOCK_BYTES_ACCELERATOR` allows, since each block costs kernel launches. Every entry
        is still reduced over the whole batch at once, so the statistics do not depend on the blocking.
        """
        batch, heads, n, d = value.shape
        budget = CAPTURE_BLOCK_BYTES if value.device.type == "cpu" else CAPTURE_BLOCK_BYTES_ACCELERATOR
        per_head = batch * n * n * value.element_size()
        head_block = max(1, budget // per_head)
        row_block = n if per_head <= budget else max(1, budget * n // per_head)
        out = value.new_empty(batch, n, heads, d)
        for h in range(0, heads, head_block):
            hs = slice(h, min(h + head_block, heads))
            for r in range(0, n, row_block):
                rs = slice(r, min(r + row_block, n))
                mask = attention_mask
                if mask is not None and mask.dim() == 4:  # [B, 1 or H, 1 or n, n]: the block's heads and rows
                    mask = mask[:, hs if mask.shape[1] > 1 else slice(None), rs if mask.shape[2] > 1 else slice(None)]
                probs = _attention_probs(query[:, hs, rs], key[:, hs], mask, scaling)
                probs = self.transform_probs(layer, probs, valid, hs, rs)
                out[:, rs, hs] = torch.matmul(probs, value[:, hs]).transpose(1, 2)
        return out

    def attention_forward(self, site: _Site, module: nn.Module, query: torch.Tensor, key: torch.Tensor,
                          value: torch.Tensor, attention_mask: torch.Tensor | None, scaling: float | None = None,
                          dropout: float = 0.0, **kwargs):
        """The registered attention function's body (BERT, RoBERTa, ELECTRA)."""
        layer = site.layer
        any_changed, any_mixed = self._layer_needs(layer)
        qk_heads = module.__dict__.get(QK_HEADS)  # set by papa.method.attention_free.drop_query_key
        if not any_changed and self.stats is None and qk_heads is None:
            return site.fallback(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
        batch, heads, n, _ = value.shape
        valid = self._valid_for(batch, n, value.device)
        modes = self.modes[layer]
        keep = (modes == KEEP).nonzero().squeeze(1)
        if qk_heads is not None and (any_mixed or self.stats is not None or not torch.equal(qk_heads, keep.cpu())):
            raise PapaError("the query/key projections were dropped for another head configuration (or for no "
                            "capture): call papa.method.attention_free.restore_query_key(controller) first")
        # Dropout on B cannot be moved past the matmul with V, so training with attention dropout stays exact.
        fast = self.fast_paths and (dropout == 0.0 or not module.training)
        if any_mixed and fast and self.stats is None:
            # B·V = w·(A·V) + (1 − w)·(C·V) per head: no [B, H, n, n] tensor, and A·V comes from the original
            # (fused) attention function.
            out_a, _ = site.fallback(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                                     **kwargs)
            out_c = constant_attention(self.constant_matrices(layer, n), value, valid)
            w = torch.where(modes == MIX, torch.sigmoid(self.theta[layer]), (modes == KEEP).to(self.theta.dtype))
            w = w.to(out_a.dtype)[None, None, :, None]
            return w * out_a + (1 - w) * out_c.to(out_a.dtype), None
        if self.stats is not None and fast:
            return self._attention_in_blocks(layer, query, key, value, attention_mask, scaling, valid), None
        if any_mixed or self.stats is not None:
            probs = self.transform_probs(layer, _attention_probs(query, key, attention_mask, scaling), valid)
            probs = nn.functional.dropout(probs, p=dropout, training=module.training)
            return torch.matmul(probs, value).transpose(1, 2).contiguous(), probs
        # Only keep and replace: the kept heads run the original function on their slice, replaced heads skip Q·Kᵀ.
        repl = (modes == REPLACE).nonzero().squeeze(1)
        if fast:
            every = repl.numel() == heads  # no gather of V when the whole layer is constant
            out_repl = constant_attention(self.constant_matrices(layer, n, slice(None) if every else repl),
                                          value if every else value[:, repl], valid)
        else:
            c = self.constant_probs(layer, repl, valid, n, value.dtype)
            c = nn.functional.dropout(c, p=dropout, training=module.training)
            out_repl = torch.matmul(c, value[:, repl]).transpose(1, 2)
        if keep.numel() == 0:
            return out_repl.contiguous(), None
        q, k = (query, key) if qk_heads is not None else (query[:, keep], key[:, keep])
        out_keep, _ = site.fallback(module, q, k, value[:, keep], attention_mask, scaling=scaling, dropout=dropout,
                                    **kwargs)
        out = value.new_empty(batch, n, heads, value.shape[-1])
        out[:, :, keep] = out_keep
        out[:, :, repl] = out_repl.to(out.dtype)
        return out, None

    def dropout_pre_hook(self, layer: int, probs: torch.Tensor) -> torch.Tensor:
        """Transform DeBERTa's probabilities just before its attention dropout."""
        batch, _, n, _ = probs.shape
        return self.transform_probs(layer, probs, self._valid_for(batch, n, probs.device))

    # ---- attach / detach ----------------------------------------------------------------------------------------
    def _install(self) -> None:
        model, info = self.model, self.info
        self._forward_signature = inspect.signature(info.base.forward)
        self._handles.append(info.base.register_forward_pre_hook(
            lambda m, a, k: self._begin_forward(m, a, k), with_kwargs=True))
        self._handles.append(info.base.register_forward_hook(self._end_forward))
        if info.hook == "attention_function":
            original = model.config._attn_implementation
            fallback = _original_attention_function(original, info.attention_modules[0])
            name = _register_papa_implementation(original)
            for layer, module in enumerate(info.attention_modules):
                module.__dict__[_SITE] = _Site(self, layer, fallback)
            self._attn_impl = original
            model.set_attn_implementation(name)
        else:
            for layer, module in enumerate(info.attention_modules):
                hook = (lambda layer: lambda m, args: (self.dropout_pre_hook(layer, args[0]), *args[1:]))(layer)
                self._handles.append(module.dropout.register_forward_pre_hook(hook))
                module.__dict__[_SITE] = _Site(self, layer, None)
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
        for module in info.attention_modules:  # papa.method.attention_free.drop_query_key swapped projections
            undo = module.__dict__.get(RESTORE)
            if undo is not None:
                undo()
        for h in self._handles:
            h.remove()
        self._handles.clear()
        for module in info.attention_modules:
            module.__dict__.pop(_SITE, None)
        if self._attn_impl is not None:
            model.set_attn_implementation(self._attn_impl)
            self._attn_impl = None
        for name, p in model.named_parameters():
            if name in self._requires_grad:
                p.requires_grad_(self._requires_grad[name])
        model.__dict__.pop(_CONTROLLER, None)
        self.attached = False


def _padding_mask(mask: torch.Tensor | None) -> torch.Tensor | None:
    """[B, n] bool of real tokens from a 2D mask, or from a 4D bool/additive mask (a key is real if any query may
    attend to it; additive masks use 0 for allowed and large negatives for masked entries)."""
    if mask is None:
        return None
    if mask.dim() == 2:
        return mask.bool()
    if mask.dim() == 4:
        allowed = mask.bool() if mask.dtype == torch.bool else mask > -1.0
        return allowed.any(dim=1).any(dim=1)
    raise InputError(f"attention_mask must be 2D [batch, n] or 4D [batch, 1, n, n]; got shape {tuple(mask.shape)}")


def _attention_probs(query: torch.Tensor, key: torch.Tensor, mask: torch.Tensor | None,
                     scaling: float | None) -> torch.Tensor:
    """softmax(Q·Kᵀ·scaling + mask), as the eager implementation computes it."""
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    # In place on the fresh scores tensor: matmul's backward needs Q and K, not its output.
    scores = torch.matmul(query, key.transpose(2, 3)).mul_(scaling)
    if mask is not None:
        if mask.dtype == torch.bool:
            scores.masked_fill_(~mask, torch.finfo(scores.dtype).min)
        else:
            scores.add_(mask)
    return nn.functional.softmax(scores, dim=-1)


def _original_attention_function(name: str, module: nn.Module) -> Callable:
    if name == "eager":
        return sys.modules[type(module).__module__].eager_attention_forward
    if name.startswith(_PREFIX):
        raise PapaError("this model already uses a papa attention implementation: call papa.detach(model) first")
    try:
        return ALL_ATTENTION_FUNCTIONS[name]
    except KeyError as exc:
        raise PapaError(f"unknown attention implementation {name!r} on the model") from exc


def _papa_attention(module: nn.Module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    site: _Site | None = module.__dict__.get(_SITE)
    if site is None:
        raise PapaError(f"{type(module).__name__} runs a papa attention implementation but has no papa state: "
                        "attach with papa.attach(model) rather than setting attn_implementation by hand")
    return site.controller.attention_forward(site, module, query, key, value, attention_mask, scaling=scaling,
                                             dropout=dropout, **kwargs)


def _register_papa_implementation(original: str) -> str:
    name = _PREFIX + original
    AttentionInterface.register(name, _papa_attention)
    # Without a mask function under the same name, masking_utils builds no padding mask at all.
    AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS[original])
    return name


def attach(model: nn.Module, constants: ConstantMatrices | None = None, *, model_name: str | None = None,
           trainable_constants: bool = False) -> PapaController:
    """Attach PAPA to a BERT, RoBERTa, ELECTRA or DeBERTa(-v2/v3) model; all heads start as 'keep'.

    Raises `UnsupportedModelError` for other architectures and `PapaError` if the model is already attached.
    A model holding two encoders (e.g. ELECTRA generator and discriminator) is attached per encoder.
    """
    if _CONTROLLER in model.__dict__:
        raise PapaError("papa is already attached to this model: use the controller it returned, or papa.detach(model)")
    info = describe_encoder(model)
    controller = PapaController(model, info, model_name=model_name)
    try:
        param = next(model.parameters())
        controller.to(param.device)
    except StopIteration:
        pass
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

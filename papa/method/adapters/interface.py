"""The adapter for every model whose attention goes through transformers' `AttentionInterface`.

papa registers an implementation ``papa_<original>`` that routes each call (q [B, H, n, d], k/v [B, H_kv, n, d])
through the controller, and a mask function under the same name (without one, masking_utils builds no mask). The
modules are put in layer order by one 3-token forward pass. Per head:

* keep      the original function runs on the kept heads' slice (bit for bit the model's own attention);
* replace   the head's constant matrix, masked by what the mask the function received allows (padding, causal,
            sliding window; `papa.method.masks.Allowed`) and renormalised row-wise; no Q·Kᵀ;
* mix       λ·A + (1 − λ)·C, as B·V = λ·(A·V) + (1 − λ)·(C·V) when the mask factors (no [B, H, n, n] tensor);
* capture   probabilities materialised block by block and handed to the controller's statistics.
"""
from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NamedTuple

import torch
from torch import nn

from papa.core.errors import PapaError
from papa.method import capture as capture_module
from papa.method.adapters.base import (SITE, Adapter, AdapterContext, AttentionSites, ModelInfo, layers_by_module,
                                       unsupported)
from papa.method.attention_free import QK_HEADS, RESTORE, QueryKeyHeads, permuted_columns, sliced_linear
from papa.method.constant_heads import ConstantWorkspace, constant_attention
from papa.method.head_modes import LayerPlan
from papa.method.masks import Allowed, attention_probs

PREFIX = "papa_"   # registered attention implementations are named papa_<original>
CAPTURE_BLOCK_BYTES = 1 << 20  # probabilities materialised at once by capture on a CPU (stays in cache)
# On an accelerator kernel launches, not cache misses, cost: a block is a whole layer up to this many bytes.
CAPTURE_BLOCK_BYTES_ACCELERATOR = 1 << 30
# Attention-function arguments whose arithmetic papa's materialised probabilities do not reproduce.
_UNSUPPORTED_KWARGS = ("softcap", "s_aux")
_USES_INTERFACE: dict[type, bool] = {}


def calls_interface(module: nn.Module) -> bool:
    """Whether `module`'s forward looks its attention function up in transformers' AttentionInterface."""
    cls = type(module)
    if cls not in _USES_INTERFACE:
        try:
            source = inspect.getsource(cls.forward)
        except (OSError, TypeError):
            source = ""
        _USES_INTERFACE[cls] = "ALL_ATTENTION_FUNCTIONS" in source
    return _USES_INTERFACE[cls]


def original_attention_function(name: str, module: nn.Module) -> Callable:
    if name.startswith(PREFIX):
        raise PapaError("this model already uses a papa attention implementation: call papa.detach(model) first")
    if name == "eager":
        fn = getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)
        if fn is None:
            raise PapaError(f"{type(module).__name__}'s module defines no eager_attention_forward: load the model "
                            "with attn_implementation='sdpa'")
        return fn
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS  # imported where used: it takes seconds

    try:
        return ALL_ATTENTION_FUNCTIONS[name]
    except KeyError as exc:
        raise PapaError(f"unknown attention implementation {name!r} on the model") from exc


def _papa_attention(module: nn.Module, query, key, value, attention_mask, **kwargs):
    site = module.__dict__.get(SITE)
    if site is None:
        raise PapaError(f"{type(module).__name__} runs a papa attention implementation but has no papa state: "
                        "attach with papa.attach(model) rather than setting attn_implementation by hand")
    return site.forward(module, query, key, value, attention_mask, **kwargs)


def register_papa_implementation(original: str) -> str:
    # Imported where attaching needs them: transformers' model-loading modules cost seconds to import.
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    name = PREFIX + original
    AttentionInterface.register(name, _papa_attention)
    AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS[original])
    return name


class _Recorder:
    """Stands in for the controller during discovery: notes each call's module and shapes, runs the original."""

    def __init__(self, fallback: Callable):
        self.fallback = fallback
        self.calls: list[tuple[nn.Module, int, int, int]] = []

    def forward(self, module, query, key, value, attention_mask, **kwargs):
        self.calls.append((module, query.shape[1], key.shape[1], query.shape[-1]))
        return self.fallback(module, query, key, value, attention_mask, **kwargs)


class _Site:
    """One attention module's link to the controller; a module shared by layers counts its calls per forward."""

    def __init__(self, controller: AdapterContext, layers: list[int], fallback: Callable):
        self.controller = controller
        self.layers = layers
        self.fallback = fallback
        self._forward_id = -1
        self._calls = 0

    def layer(self) -> int:
        if len(self.layers) == 1:
            return self.layers[0]
        if self._forward_id != self.controller.forward_id:
            self._forward_id, self._calls = self.controller.forward_id, 0
        layer = self.layers[self._calls % len(self.layers)]
        self._calls += 1
        return layer

    def forward(self, module, query, key, value, attention_mask, **kwargs):
        return attention_forward(self, module, query, key, value, attention_mask, **kwargs)


def _per_query_head(t: torch.Tensor, groups: int) -> torch.Tensor:
    """Key/value heads [B, H_kv, n, d] repeated for their query heads [B, H, n, d] (transformers' repeat_kv)."""
    return t if groups == 1 else t.repeat_interleave(groups, dim=1)


@contextmanager
def _ungrouped(module: nn.Module) -> Iterator[None]:
    """Let the original function take key/value heads already repeated per query head."""
    groups = getattr(module, "num_key_value_groups", None)
    if groups is None:
        yield
        return
    module.num_key_value_groups = 1
    try:
        yield
    finally:
        module.num_key_value_groups = groups


def _kept_by(controller: AdapterContext, layers: list[int]) -> tuple[int, ...]:
    """The heads that any of `layers` keeps (what drop_query_key sliced a module's projections to), from the host."""
    return tuple(sorted({h for layer in layers for h in controller.plan(layer).keep}))


def _additive(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """`mask` (bool: True = may attend; or additive) as additive terms in `dtype`: 0 where allowed, the dtype's most
    negative value where not, as the eager implementations mask scores."""
    if mask is None or mask.dtype != torch.bool:
        return mask
    return torch.where(mask, 0.0, torch.finfo(dtype).min).to(dtype)


def _blocks(shape: tuple[int, int, int], element_size: int, device: torch.device) -> Iterator[tuple[slice, slice]]:
    """(heads, query rows) blocks of [B, H, n, n] probabilities, each about the capture budget of `device`."""
    batch, heads, n = shape
    budget = CAPTURE_BLOCK_BYTES if device.type == "cpu" else CAPTURE_BLOCK_BYTES_ACCELERATOR
    per_head = batch * n * n * element_size
    head_block = max(1, budget // per_head)
    row_block = n if per_head <= budget else max(1, budget * n // per_head)
    for h in range(0, heads, head_block):
        for r in range(0, n, row_block):
            yield slice(h, min(h + head_block, heads)), slice(r, min(r + row_block, n))


def _block_mask(additive: torch.Tensor | None, heads: slice, rows: slice) -> torch.Tensor | None:
    """The part of an additive mask [B or 1, 1 or H, 1 or n, n] that a block of `heads` and query `rows` reads."""
    if additive is None:
        return None
    return additive[:, heads if additive.shape[1] > 1 else slice(None), rows if additive.shape[2] > 1 else slice(None)]


def attention_in_blocks(controller: AdapterContext, layer: int, query: torch.Tensor, key: torch.Tensor,
                        value: torch.Tensor | None, mask: torch.Tensor | None, scaling: float | None,
                        valid: torch.Tensor | None, allowed: Allowed) -> torch.Tensor | None:
    """Materialised attention one block of heads and query rows at a time (`_blocks`): each block's probabilities go
    through the controller (capture, head modes) and, with `value`, make the output [B, n, H, d] (else None).

    Each entry is reduced over the whole batch at once, so the statistics do not depend on the blocking.
    """
    batch, heads, n, d = query.shape
    scale = d ** -0.5 if scaling is None else scaling
    padding_only = allowed.factored and allowed.pattern is None
    additive = None
    if not padding_only:  # once per layer, not per block: the mask as additive terms (one add per block)
        additive = _additive(mask[..., :n] if mask is not None and mask.dim() == 4 else allowed.as_bool(),
                             query.dtype)
    blocks = list(_blocks((batch, heads, n), query.element_size(), query.device))
    single = len(blocks) == 1  # the output is then the product's own, no copy into a preallocated one
    out = None if value is None or single else value.new_empty(batch, n, heads, value.shape[-1])
    for hs, rs in blocks:
        h, r = hs.stop - hs.start, rs.stop - rs.start
        whole = h == heads  # no slicing op where a block holds every head (or every row)
        q = query if whole and r == n else query[:, hs, rs]
        k = key if whole else key[:, hs]
        if padding_only:
            bias = _key_bias(controller, allowed.keys, batch, h, n, query.dtype)
            q3, k3 = q.reshape(batch * h, r, d), k.reshape(batch * h, n, d).transpose(1, 2)
            scores = (torch.bmm(q3, k3).mul_(scale) if bias is None else
                      torch.baddbmm(bias, q3, k3, alpha=scale))
            flat = torch.softmax(scores, dim=-1, dtype=scores.dtype)
            probs = flat.view(batch, h, r, n)
        else:
            probs = attention_probs(q, k, _block_mask(additive, hs, rs), scaling)
        changed = controller.transform_probs(layer, probs, valid, hs, rs, allowed=allowed)
        if value is None:
            continue
        v = value if whole else value[:, hs]
        if padding_only and changed is probs:  # one batched product, no broadcast: [B·h, r, n] @ [B·h, n, d]
            block = torch.bmm(flat, v.reshape(batch * h, n, v.shape[-1])).view(batch, h, r, -1).transpose(1, 2)
        else:
            block = torch.matmul(changed, v).transpose(1, 2)
        if single:
            return block  # [B, n, H, d] as a view: the caller's reshape makes it contiguous
        out[:, rs, hs] = block
    return out


def _key_bias(controller: AdapterContext, keys: torch.Tensor | None, batch: int, heads: int, n: int,
              dtype: torch.dtype) -> torch.Tensor | None:
    """The real keys [B, n] as additive scores [B·heads, 1, n] (0 real, the dtype's most negative value padded, as
    the eager implementations mask), made once per forward pass."""
    if keys is None:
        return None

    def make() -> torch.Tensor:  # `where` lays out the expanded keys afresh, so the result is a view of it
        bias = torch.where(keys.view(-1, 1, n).expand(batch, heads, n), 0.0, torch.finfo(dtype).min)
        return bias.to(dtype).view(batch * heads, 1, n)

    return controller.per_pass(("key_bias", heads, dtype), keys, make)


class _Call(NamedTuple):
    """One call of the attention function as the module made it (q [B, H, n, d], k/v [B, H_kv, n, d]), with what
    decides its mask's pattern: `causal`, and `windowed` (a sliding window)."""

    module: nn.Module
    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    attention_mask: torch.Tensor | None
    scaling: float | None
    dropout: float
    kwargs: dict
    causal: bool
    windowed: bool


def _original(site: _Site, call: _Call, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor):
    """The model's own attention function on `query`, `key`, `value` (the call's, or some of their heads), with the
    call's mask and keyword arguments."""
    return site.fallback(call.module, query, key, value, call.attention_mask, scaling=call.scaling,
                         dropout=call.dropout, **call.kwargs)


def attention_forward(site: _Site, module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                      attention_mask: torch.Tensor | None, scaling: float | None = None, dropout: float = 0.0,
                      **kwargs):
    """The registered attention function's body: the layer's head modes and capture, else the original."""
    ctrl = site.controller
    layer = site.layer()
    any_changed, any_mixed = ctrl.layer_needs(layer)
    qk_heads = module.__dict__.get(QK_HEADS)  # set by drop_query_key below
    capture = ctrl.stats is not None
    if not any_changed and not capture and qk_heads is None:
        return site.fallback(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    _check_call(module, query, key, kwargs, exact=any_changed or capture)
    q_len, n = query.shape[2], key.shape[2]
    batch, heads = query.shape[0], ctrl.num_heads
    groups = heads // value.shape[1]
    # A sliding window is passed to the attention function (Qwen2, ModernBERT) or held by the module.
    windowed = kwargs.get("sliding_window", getattr(module, "sliding_window", None)) is not None
    causal = bool(getattr(module, "is_causal", False))
    call = _Call(module, query, key, value, attention_mask, scaling, dropout, kwargs, causal, windowed)
    allowed = ctrl.allowed(attention_mask, q_len, n, causal=causal, windowed=windowed)
    valid = ctrl.valid_mask(batch, n, value.device)
    plan = ctrl.plan(layer)
    if qk_heads is not None and (any_mixed or capture or qk_heads.heads != _kept_by(ctrl, site.layers)):
        raise PapaError("the query/key projections were dropped for another head configuration (or for no "
                        "capture): call papa.method.attention_free.restore_query_key(controller) first")
    # Dropout on B cannot be moved past the matmul with V, so training with attention dropout stays exact.
    fast = ctrl.fast_paths and (dropout == 0.0 or not module.training)
    factored = fast and allowed.factored
    value_h = _per_query_head(value, groups)
    workspace = ctrl.workspace(value_h) if factored and not capture else None
    if any_mixed and factored and not capture:
        return _mixed(site, call, layer, value_h, allowed, workspace)
    if capture and fast:
        return _captured(site, call, layer, any_changed, groups, value_h, valid, allowed)
    if any_mixed or capture:  # the paths that materialise scores mask them
        return _materialised(ctrl, call, layer, groups, value_h, valid, allowed)
    return _keep_and_replace(site, call, layer, plan, qk_heads, groups, value_h, allowed, workspace, factored)


def _check_call(module: nn.Module, query: torch.Tensor, key: torch.Tensor, kwargs: dict, *, exact: bool) -> None:
    """Refuse a call papa cannot serve: one with a key/value cache, or (where heads are replaced, mixed or captured:
    `exact`) one passing arguments whose arithmetic papa's materialised probabilities do not reproduce."""
    q_len, n = query.shape[2], key.shape[2]
    if q_len != n:
        raise PapaError(f"PAPA needs each sequence whole in one forward pass, but {q_len} queries met {n} keys (a "
                        "key/value cache is in use): call the model with use_cache=False")
    odd = [k for k in _UNSUPPORTED_KWARGS if kwargs.get(k) is not None]
    if odd and exact:
        raise PapaError(f"{type(module).__name__} passes {', '.join(odd)} to its attention function, which papa's "
                        "replaced, mixed and captured heads do not reproduce")


def _mixed(site: _Site, call: _Call, layer: int, value_h: torch.Tensor, allowed: Allowed,
           workspace: ConstantWorkspace | None):
    """Mixed heads where the mask factors: B·V = λ·(A·V) + (1 − λ)·(C·V), with A·V the original function's output
    (no [B, H, n, n] tensor)."""
    ctrl = site.controller
    out_a, _ = _original(site, call, call.query, call.key, call.value)
    constants = ctrl.constant_heads(layer, call.key.shape[2], value_h.dtype, allowed, replaced=False,
                                    pattern=(call.causal, call.windowed))
    out_c = constant_attention(constants, value_h, allowed.keys, workspace).to(out_a.dtype)
    # λ·A + (1 − λ)·C in one op; lerp gives A exactly where λ = 1 (kept) and C where λ = 0 (replaced)
    return torch.lerp(out_c, out_a, ctrl.mix_weights(out_a.dtype)[layer]), None


def _captured(site: _Site, call: _Call, layer: int, any_changed: bool, groups: int, value_h: torch.Tensor,
              valid: torch.Tensor | None, allowed: Allowed):
    """Capture on the fast path: probabilities materialised block by block (`attention_in_blocks`)."""
    # On an accelerator (launch-bound) an unchanged layer's output comes from its fused function; on a CPU the
    # materialised probabilities give it (one softmax instead of two).
    alone = not any_changed and capture_module.launch_bound(call.value.device)
    out = attention_in_blocks(site.controller, layer, call.query, _per_query_head(call.key, groups),
                              None if alone else value_h, call.attention_mask, call.scaling, valid, allowed)
    if alone:
        out, _ = _original(site, call, call.query, call.key, call.value)
    return out, None


def _materialised(ctrl: AdapterContext, call: _Call, layer: int, groups: int, value_h: torch.Tensor,
                  valid: torch.Tensor | None, allowed: Allowed):
    """Mixed or captured heads where no fast path applies: the layer's masked probabilities [B, H, n, n], through
    the controller, then the call's dropout."""
    mask, n = call.attention_mask, call.key.shape[2]
    score_mask = mask[..., :n] if mask is not None and mask.dim() == 4 else allowed.as_bool()
    probs = attention_probs(call.query, _per_query_head(call.key, groups), score_mask, call.scaling)
    probs = ctrl.transform_probs(layer, probs, valid, allowed=allowed)
    probs = nn.functional.dropout(probs, p=call.dropout, training=call.module.training)
    return torch.matmul(probs, value_h).transpose(1, 2).contiguous(), probs


def _keep_and_replace(site: _Site, call: _Call, layer: int, plan: LayerPlan, qk_heads: QueryKeyHeads | None,
                      groups: int, value_h: torch.Tensor, allowed: Allowed, workspace: ConstantWorkspace | None,
                      factored: bool):
    """Only kept and replaced heads: kept heads run the original function on their slice, replaced heads skip
    Q·Kᵀ."""
    ctrl, query, key, value = site.controller, call.query, call.key, call.value
    batch, n, heads, d = query.shape[0], key.shape[2], ctrl.num_heads, value.shape[-1]
    repl = plan.replace_index
    every = len(plan.replace) == heads  # no gather of V when the whole layer is constant
    first = qk_heads is not None and qk_heads.kept_first
    if first:  # V's rows were permuted kept heads first (drop_query_key): views, not gathers
        v_keep, v_repl = value_h.split((len(plan.keep), len(plan.replace)), dim=1)
    else:
        v_repl = value_h if every else value_h[:, repl]
    if factored:
        constants = ctrl.constant_heads(layer, n, value.dtype, allowed, replaced=True,
                                        pattern=(call.causal, call.windowed))
        out_repl = constant_attention(constants, v_repl, allowed.keys, workspace)
    else:
        c = ctrl.constant_probs(layer, repl, allowed, n, value.dtype)
        c = nn.functional.dropout(c, p=call.dropout, training=call.module.training)
        out_repl = torch.matmul(c, v_repl).transpose(1, 2)
    if not plan.keep:
        return out_repl, None
    if first:  # the output projection's columns were permuted alike: the heads stay in this order
        out_keep, _ = _original(site, call, query, key, v_keep)
        return torch.cat((out_keep, out_repl.to(out_keep.dtype)), dim=2), None
    keep = plan.keep_index
    out_keep = _kept_heads(site, call, plan, qk_heads, groups)
    out = value.new_empty(batch, n, heads, d)
    out[:, :, keep] = out_keep
    out[:, :, repl] = out_repl.to(out.dtype)
    return out, None


def _kept_heads(site: _Site, call: _Call, plan: LayerPlan, qk_heads: QueryKeyHeads | None,
                groups: int) -> torch.Tensor:
    """The original attention function on the kept heads only, [B, n, h_keep, d]."""
    query, key, value = call.query, call.key, call.value
    keep = plan.keep_index
    if qk_heads is not None and qk_heads.heads == plan.keep:  # the projections produce exactly the kept heads
        q, k = query, key
    elif qk_heads is not None:  # the projections produce Q (and, without grouping, K) of qk_heads only
        where = qk_heads.positions(plan.keep, keep.device)
        q, k = query[:, where], key[:, where] if groups == 1 else key
    else:
        q, k = query[:, keep], key
    if groups == 1:
        k = k if qk_heads is not None else k[:, keep]
        out, _ = _original(site, call, q, k, value[:, keep])
        return out
    # Grouped query heads: each kept head gets its own copy of its key/value head, and the function is told so.
    kv = keep // groups
    with _ungrouped(call.module):
        out, _ = _original(site, call, q, k[:, kv], value[:, kv])
    return out


class InterfaceAdapter(Adapter):
    """Attention through transformers' AttentionInterface (BERT, RoBERTa, ModernBERT, Llama, ... in 5.x)."""

    hook = "attention_function"

    def find(self, model: nn.Module, base: nn.Module) -> AttentionSites:
        modules = [m for m in base.modules() if calls_interface(m)]
        if not modules:
            raise unsupported(model, "none of its modules computes attention through transformers' "
                                     "AttentionInterface", SUPPORTED_HINT)
        original = model.config._attn_implementation
        recorder = _Recorder(original_attention_function(original, modules[0]))
        training = [(m, m.training) for m in base.modules()]
        for m in modules:
            m.__dict__[SITE] = recorder
        model.set_attn_implementation(register_papa_implementation(original))
        try:
            base.eval()  # no dropout: discovery must not draw from the random generator
            param = next(base.parameters())
            vocab = getattr(model.config, "vocab_size", 4) or 4
            ids = (torch.arange(1, 4, device=param.device) % vocab)[None]
            with torch.no_grad():
                base(input_ids=ids)
        except Exception as exc:  # noqa: BLE001 -- any failure means papa cannot find the layers this way
            raise unsupported(model, f"a 3-token forward pass to find its attention layers failed "
                                     f"({type(exc).__name__}: {exc})", SUPPORTED_HINT) from exc
        finally:
            for m in modules:
                m.__dict__.pop(SITE, None)
            model.set_attn_implementation(original)
            for m, flag in training:
                m.training = flag
        if not recorder.calls:
            raise unsupported(model, "its attention modules did not run in a forward pass", SUPPORTED_HINT)
        shapes = {c[1:] for c in recorder.calls}
        if len(shapes) != 1:
            raise unsupported(model, f"its layers differ in heads or head size ({sorted(shapes)}); PAPA's constants "
                                     "need one geometry", SUPPORTED_HINT)
        heads, kv_heads, head_dim = shapes.pop()
        if heads % kv_heads:
            raise unsupported(model, f"{heads} query heads do not share {kv_heads} key/value heads evenly",
                              SUPPORTED_HINT)
        return AttentionSites(base=base, layer_modules=[c[0] for c in recorder.calls], num_heads=heads,
                              num_kv_heads=kv_heads, head_dim=head_dim)

    def install(self, controller: AdapterContext) -> None:
        model, info = controller.model, controller.info
        original = model.config._attn_implementation
        fallback = original_attention_function(original, info.attention_modules[0])
        name = register_papa_implementation(original)
        for module, layers in layers_by_module(info.attention_modules):
            module.__dict__[SITE] = _Site(controller, layers, fallback)
        controller.remember_attn_implementation(original)
        model.set_attn_implementation(name)

    def remove(self, controller: AdapterContext) -> None:
        for module in controller.info.attention_modules:
            module.__dict__.pop(SITE, None)
        controller.restore_attn_implementation()

    def can_drop_query_key(self, info: ModelInfo) -> bool:
        return info.architecture.query_key is not None

    def drop_query_key(self, controller: AdapterContext, layers: list[int], module: nn.Module) -> None:
        """Slice the query (and, without grouping, key) projection to the heads these layers keep; where possible
        also permute V's rows and the output's columns kept heads first (`_kept_first`)."""
        info = controller.info
        names = info.architecture.query_key
        if not self.can_drop_query_key(info):
            raise PapaError(f"{info.model_type} computes queries, keys and values in one fused projection: its "
                            "query/key work cannot be dropped (replaced heads already skip Q·Kᵀ)")
        kept = _kept_by(controller, layers)  # a shared module keeps what any of its layers keeps
        if len(kept) == controller.num_heads:
            return
        keep = torch.tensor(kept, dtype=torch.long)
        query_name, key_name = names
        originals = {(module, name): getattr(module, name) for name in names}
        setattr(module, query_name, sliced_linear(originals[module, query_name], keep, info.head_dim))
        if info.num_kv_heads == info.num_heads:  # grouped keys serve several query heads: kept whole
            setattr(module, key_name, sliced_linear(originals[module, key_name], keep, info.head_dim))
        order = _kept_first(controller, layers)
        if order is not None:
            value_name, output_path = info.architecture.value_output
            owner, output_name = output_owner(info.base, module, output_path)
            order_index = torch.tensor(order, dtype=torch.long)
            for where, name in ((module, value_name), (owner, output_name)):
                originals[where, name] = getattr(where, name)
            setattr(module, value_name, sliced_linear(originals[module, value_name], order_index, info.head_dim))
            setattr(owner, output_name, permuted_columns(originals[owner, output_name], order_index, info.head_dim))
        heads = module.__dict__[QK_HEADS] = QueryKeyHeads(kept, kept_first=order is not None)
        for layer in layers:  # made now, not in a forward pass (where a compiled graph would recompile for them)
            plan = controller.plan(layer)
            heads.positions(plan.keep, plan.keep_index.device)

        def restore() -> None:
            for (where, name), linear in originals.items():
                setattr(where, name, linear)

        module.__dict__[RESTORE] = restore


def _kept_first(controller: AdapterContext, layers: list[int]) -> tuple[int, ...] | None:
    """Kept heads then replaced ones, the order that makes each head group a view of V and the output; None where
    the module's layers differ in plan, one group is empty, or keys are grouped."""
    info = controller.info
    plans = {(controller.plan(layer).keep, controller.plan(layer).replace) for layer in layers}
    if info.architecture.value_output is None or info.num_kv_heads != info.num_heads or len(plans) != 1:
        return None
    keep, replace = plans.pop()
    return keep + replace if keep and replace else None


def output_owner(base: nn.Module, module: nn.Module, path: str) -> tuple[nn.Module, str]:
    """The module holding the output projection at `path` from the attention `module` ("../": from its parent),
    and the projection's attribute name there."""
    if path.startswith("../"):
        name = next(n for n, m in base.named_modules() if m is module)
        start, path = base.get_submodule(name.rpartition(".")[0]), path[3:]
    else:
        start = module
    owner, _, attribute = path.rpartition(".")
    return (start.get_submodule(owner) if owner else start), attribute


SUPPORTED_HINT = ("papa supports models whose attention goes through transformers' AttentionInterface (most "
                  "model types in transformers 5.x) and DeBERTa; papa.method.architectures.ARCHITECTURES lists "
                  "the verified ones.")

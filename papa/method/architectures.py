"""The registry of architectures: each model type papa has verified, with its attention adapter and what the PAPA
layout must know about it.

Most types go through transformers' ``AttentionInterface`` (`InterfaceAdapter`; an unlisted type whose attention
does is attached with a warning); DeBERTa computes its own softmax (`DebertaAdapter`).
"""
from __future__ import annotations

import hashlib
import json
import warnings

import torch
from torch import nn

from papa.core.errors import UnsupportedModelError
from papa.method.adapters.base import Architecture, ModelInfo
from papa.method.adapters.deberta import DebertaAdapter
from papa.method.adapters.interface import SUPPORTED_HINT, InterfaceAdapter, calls_interface
from papa.method.signature import ModelSignature

INTERFACE, DEBERTA = InterfaceAdapter(), DebertaAdapter()
_PROJ = {"query_key": ("q_proj", "k_proj"), "value_output": ("v_proj", "o_proj")}  # Llama-style projection names

ARCHITECTURES: dict[str, Architecture] = {
    "bert": Architecture(INTERFACE),
    "roberta": Architecture(INTERFACE, positions="from_padding", prefix_space=True),
    "xlm-roberta": Architecture(INTERFACE, positions="from_padding"),
    "electra": Architecture(INTERFACE),
    "albert": Architecture(INTERFACE, value_output=("value", "dense")),  # one attention module for every layer
    "distilbert": Architecture(INTERFACE, query_key=("q_lin", "k_lin"), value_output=("v_lin", "out_lin")),
    "modernbert": Architecture(INTERFACE, query_key=None),  # fused Wqkv; global and sliding-window layers
    "llama": Architecture(INTERFACE, causal=True, **_PROJ),  # rotary, grouped-query
    "qwen2": Architecture(INTERFACE, causal=True, **_PROJ),  # biased Q/K/V, sliding window
    "gpt2": Architecture(INTERFACE, query_key=None, causal=True),  # fused c_attn (Conv1D); learned positions
    "deberta": Architecture(DEBERTA, query_key=None, prefix_space=True),
    "deberta-v2": Architecture(DEBERTA, query_key=None),
}
#: model type -> how its attention is intercepted
SUPPORTED_MODEL_TYPES: dict[str, str] = {name: arch.hook for name, arch in ARCHITECTURES.items()}
_UNVERIFIED = Architecture(INTERFACE, query_key=None, verified=False)


def architecture(model_type: str | None) -> Architecture:
    """The registry entry of `model_type`, else the AttentionInterface adapter without Q/K dropping (unverified)."""
    return ARCHITECTURES.get(model_type or "", _UNVERIFIED)


def is_causal(model_or_config) -> bool:
    """Whether a model, a config or a model type is a causal LM: the registry for a verified type, else the
    modules' ``is_causal`` (a model) or the config's ``is_decoder`` / ``*ForCausalLM`` class (a config)."""
    if isinstance(model_or_config, nn.Module):
        return describe_model(model_or_config).causal
    if model_or_config is None or isinstance(model_or_config, str):
        return architecture(model_or_config).causal
    config = model_or_config
    arch = ARCHITECTURES.get(getattr(config, "model_type", "") or "")
    if arch is not None:
        return arch.causal
    names = getattr(config, "architectures", None) or []
    return bool(getattr(config, "is_decoder", False)) or any(n.endswith(("ForCausalLM", "LMHeadModel")) for n in names)


def check_config(config) -> None:
    """Refuse, before any weights are read, a model type whose attention papa cannot intercept."""
    if config.model_type in ARCHITECTURES:
        return
    from transformers import AutoModel

    with torch.device("meta"):  # the modules without memory: enough to read which attention they run
        try:
            skeleton = AutoModel.from_config(config)
        except Exception as exc:  # noqa: BLE001 -- whatever the reason, papa cannot build it
            raise UnsupportedModelError(f"model_type {config.model_type!r} cannot be built by AutoModel ({exc}). "
                                        f"{SUPPORTED_HINT}") from exc
    if not any(calls_interface(m) for m in skeleton.modules()):
        raise UnsupportedModelError(
            f"model_type {config.model_type!r} computes attention in its own code, not through transformers' "
            f"AttentionInterface, so papa cannot replace it. {SUPPORTED_HINT} Supported model types: "
            f"{', '.join(sorted(ARCHITECTURES))}, and any other whose attention goes through the interface.")


# Config fields that decide the shapes and the arithmetic of attention.
_FINGERPRINT_FIELDS = (
    "model_type", "num_hidden_layers", "num_attention_heads", "hidden_size", "intermediate_size", "vocab_size",
    "max_position_embeddings", "type_vocab_size", "relative_attention", "pos_att_type", "position_buckets",
    "max_relative_positions", "position_biased_input", "embedding_size",
)
# Fields only some architectures have: recorded where the config has one (absent is not the same as a value).
_FINGERPRINT_IF_PRESENT = (
    "num_key_value_heads", "head_dim", "sliding_window", "local_attention", "global_attn_every_n_layers",
    "num_hidden_groups", "inner_group_num", "n_layers", "n_heads", "dim", "n_layer", "n_head", "n_embd",
    "n_positions",
)


_INFO = "_papa_encoder_info"  # model.__dict__ entry: discovery runs a forward pass, so it is done once per model
_WARNED: set[str] = set()


def describe_model(model: nn.Module) -> ModelInfo:
    """Find the backbone of an encoder or a causal LM and its attention modules (once per model), or raise
    `UnsupportedModelError`."""
    info = model.__dict__.get(_INFO)
    if info is not None:
        return info
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    if config is None:
        raise UnsupportedModelError(f"papa cannot attach to {type(model).__name__}: it has no transformers config. "
                                    f"{SUPPORTED_HINT}")
    arch = architecture(model_type)
    base = getattr(model, "base_model", model)
    sites = arch.adapter.find(model, base)
    if not arch.verified and model_type not in _WARNED:
        _WARNED.add(model_type)
        warnings.warn(f"model_type {model_type!r} is not among papa's verified architectures "
                      f"({', '.join(sorted(ARCHITECTURES))}); it is attached through transformers' AttentionInterface "
                      "and its query/key projections are not dropped. Check the invariants (papa's tests) on it.",
                      stacklevel=2)
    info = ModelInfo(model_type=model_type, base=base, attention_modules=sites.layer_modules,
                       num_layers=len(sites.layer_modules), num_heads=sites.num_heads, head_dim=sites.head_dim,
                       num_kv_heads=sites.num_kv_heads, architecture=arch,
                       causal=arch.causal if arch.verified else
                       any(bool(getattr(m, "is_causal", False)) for m in sites.layer_modules))
    model.__dict__[_INFO] = info
    return info


def backbone(model: nn.Module) -> nn.Module:
    """The module that computes the hidden states (a causal LM's without its vocabulary-sized head)."""
    return describe_model(model).base


def config_fingerprint(config) -> str:
    """sha256 (first 16 hex digits) of the config fields that shape attention."""
    d = config.to_dict()
    picked = {k: d.get(k) for k in _FINGERPRINT_FIELDS}
    picked.update({k: d[k] for k in _FINGERPRINT_IF_PRESENT if k in d})
    return hashlib.sha256(json.dumps(picked, sort_keys=True, default=str).encode()).hexdigest()[:16]


@torch.no_grad()
def weights_fingerprint(model: nn.Module) -> str:
    """sha256 (first 16 hex digits) of a few weight slices: tells one checkpoint from another cheaply."""
    info = describe_model(model)
    h = hashlib.sha256()
    params = [p for _, p in info.base.named_parameters()]
    picks = [params[0], *[p for m in (info.attention_modules[0], info.attention_modules[-1]) for p in m.parameters()]]
    for p in picks:
        # Rounded to bfloat16 so that a float32 checkpoint and its bfloat16 copy share one fingerprint.
        flat = p.detach().reshape(-1)[:4096].to(device="cpu", dtype=torch.bfloat16).to(torch.float32)
        h.update(flat.numpy().tobytes())
    return h.hexdigest()[:16]


def model_signature(model: nn.Module, model_name: str | None = None) -> ModelSignature:
    """The identity an artifact records; `model_name` defaults to the config's `_name_or_path`."""
    info = describe_model(model)
    name = model_name or getattr(model.config, "_name_or_path", "") or type(model).__name__
    return ModelSignature(
        model_name=str(name),
        model_type=info.model_type,
        num_layers=info.num_layers,
        num_heads=info.num_heads,
        config_fingerprint=config_fingerprint(model.config),
        weights_fingerprint=weights_fingerprint(model),
    )

"""Where each supported architecture keeps its self-attention, and how a model is identified.

Two hook kinds cover the five supported families without forking any modeling file:

* ``attention_function`` (BERT, RoBERTa, ELECTRA): the self-attention module looks its attention function up in
  transformers' ``AttentionInterface`` registry by ``config._attn_implementation``; papa registers its own function.
* ``probs_dropout`` (DeBERTa v1, DeBERTa-v2/v3): the module computes the softmax itself (with relative-position
  terms) and applies its ``self.dropout`` exactly once, to the probabilities; papa transforms the probabilities in a
  forward pre-hook on that dropout module.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Literal

import torch
from torch import nn

from papa.core.errors import UnsupportedModelError

HookKind = Literal["attention_function", "probs_dropout"]

SUPPORTED_MODEL_TYPES: dict[str, HookKind] = {
    "bert": "attention_function",
    "roberta": "attention_function",
    "electra": "attention_function",
    "deberta": "probs_dropout",
    "deberta-v2": "probs_dropout",
}

# Config fields that decide the shapes and the arithmetic of attention; two configs that agree on these can share
# data-free constants, and a changed value means the constants belong to another model.
_FINGERPRINT_FIELDS = (
    "model_type", "num_hidden_layers", "num_attention_heads", "hidden_size", "intermediate_size", "vocab_size",
    "max_position_embeddings", "type_vocab_size", "relative_attention", "pos_att_type", "position_buckets",
    "max_relative_positions", "position_biased_input", "embedding_size",
)


@dataclass(frozen=True)
class ModelSignature:
    """What an artifact records about the model it was made for."""

    model_name: str
    model_type: str
    num_layers: int
    num_heads: int
    config_fingerprint: str
    weights_fingerprint: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class EncoderInfo:
    """The encoder inside a (possibly task-headed) model and its per-layer self-attention modules."""

    model_type: str
    hook: HookKind
    base: nn.Module
    attention_modules: list[nn.Module]
    num_layers: int
    num_heads: int
    head_dim: int


def _unsupported(model: nn.Module, why: str) -> UnsupportedModelError:
    names = ", ".join(sorted(SUPPORTED_MODEL_TYPES))
    return UnsupportedModelError(
        f"papa cannot attach to {type(model).__name__}: {why}. Supported model types: {names} "
        "(load them with transformers' AutoModel* classes)."
    )


def describe_encoder(model: nn.Module) -> EncoderInfo:
    """Find the encoder and its self-attention modules, or raise `UnsupportedModelError`."""
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise _unsupported(model, f"model_type {model_type!r} is not supported")
    base = getattr(model, "base_model", model)
    try:
        layers = base.encoder.layer
        modules = [layer.attention.self for layer in layers]
    except AttributeError as exc:
        raise _unsupported(model, f"no encoder.layer[i].attention.self found ({exc})") from exc
    first = modules[0]
    num_heads = first.num_attention_heads
    return EncoderInfo(
        model_type=model_type,
        hook=SUPPORTED_MODEL_TYPES[model_type],
        base=base,
        attention_modules=modules,
        num_layers=len(modules),
        num_heads=num_heads,
        head_dim=first.attention_head_size,
    )


def config_fingerprint(config) -> str:
    """sha256 (first 16 hex digits) of the config fields that shape attention."""
    d = config.to_dict()
    picked = {k: d.get(k) for k in _FINGERPRINT_FIELDS}
    return hashlib.sha256(json.dumps(picked, sort_keys=True, default=str).encode()).hexdigest()[:16]


@torch.no_grad()
def weights_fingerprint(model: nn.Module) -> str:
    """sha256 (first 16 hex digits) of a few weight slices: tells one checkpoint from another cheaply."""
    info = describe_encoder(model)
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
    info = describe_encoder(model)
    name = model_name or getattr(model.config, "_name_or_path", "") or type(model).__name__
    return ModelSignature(
        model_name=str(name),
        model_type=info.model_type,
        num_layers=info.num_layers,
        num_heads=info.num_heads,
        config_fingerprint=config_fingerprint(model.config),
        weights_fingerprint=weights_fingerprint(model),
    )

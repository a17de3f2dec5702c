"""papa: Probing Analysis for PLMs' Attention (Hassid et al., Findings of EMNLP 2022).

Replace the input-dependent attention of a frozen pretrained encoder or causal LM with constant matrices, for all
heads or a chosen subset, and probe what is left. Start with `attach`, `extract_constants` and `papa.method.layout.encode`.

Names are imported lazily, so ``import papa`` (and ``papa --help``) does not pay for torch and transformers.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "method.architectures": ["SUPPORTED_MODEL_TYPES", "model_signature"],
    "method.signature": ["ModelSignature"],
    "method.controller": ["PapaController", "attach", "controller_of", "detach"],
    "method.capture": ["AttentionStats"],
    "method.constants": ["ConstantMatrices", "ConstantsMetadata", "data_free_constants", "load_constants"],
    "core.errors": ["CorruptArtifactError", "IncompatibleArtifactError", "InputError", "ModelNotFoundError", "PapaError",
               "UnsupportedModelError"],
    "method.extract": ["extract_constants"],
    "method.layout": ["LayoutBatch", "encode"],
    "method.models": ["DEFAULT_DECODER", "DEFAULT_MODEL", "load_model"],
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = [*_WHERE, "__version__"]


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'papa' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)

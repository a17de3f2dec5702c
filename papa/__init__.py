"""papa: Probing Analysis for PLMs' Attention (Hassid et al., Findings of EMNLP 2022).

Replace the input-dependent attention of a frozen pretrained encoder with constant matrices, for all heads or a
chosen subset, and probe what is left. Start with `attach`, `extract_constants` and `papa.layout.encode`.
"""
from .architectures import SUPPORTED_MODEL_TYPES, ModelSignature, model_signature
from .attach import PapaController, attach, controller_of, detach
from .capture import AttentionStats
from .constants import ConstantMatrices, ConstantsMetadata, data_free_constants, load_constants
from .errors import CorruptArtifactError, IncompatibleArtifactError, InputError, PapaError, UnsupportedModelError
from .extract import extract_constants
from .layout import LayoutBatch, encode
from .models import DEFAULT_MODEL, load_model

__version__ = "0.1.0"

__all__ = [
    "SUPPORTED_MODEL_TYPES", "ModelSignature", "model_signature", "PapaController", "attach", "controller_of",
    "detach", "AttentionStats", "ConstantMatrices", "ConstantsMetadata", "data_free_constants", "load_constants",
    "CorruptArtifactError", "IncompatibleArtifactError", "InputError", "PapaError", "UnsupportedModelError",
    "extract_constants", "LayoutBatch", "encode", "DEFAULT_MODEL", "load_model", "__version__",
]

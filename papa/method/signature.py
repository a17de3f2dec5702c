"""What an artifact records about the model it was made for (`ModelSignature`)."""
from __future__ import annotations

from dataclasses import asdict, dataclass


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

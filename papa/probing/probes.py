"""Probing classifiers on top of a frozen encoder (paper Sec. 3.3).

Every probe reads ``features`` [batch, L+1, n, d]:

* `SentenceProbe`: per layer a learned weighting over positions pools the n vectors; the L+1 pooled vectors feed a
  2-layer MLP.
* `TokenProbe` (NER, POS; vocabulary-sized for MLM and the LM probe): each token's L+1 vectors feed a 2-layer MLP.
* `LMHeadProbe`: a causal LM's own frozen head on the last hidden state (nothing trained).

As the official probe: MLP width d, tanh. Unlike it, position weights are a softmax over real tokens (the official
raw weights make the pooled scale vary with length), and the MLM probe uses tanh too (``activation="gelu"`` to
match).
"""
from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from papa.core.errors import check_one_of
from papa.tasks.registry import POSITION_KINDS

__all__ = ["LMHeadProbe", "SentenceProbe", "TokenProbe", "mlm_probe", "probe_loss", "IGNORE_INDEX"]

#: Label of positions without a target (token tasks, MLM); the default of ``F.cross_entropy``.
IGNORE_INDEX = -100

_ACTIVATIONS = {"tanh": nn.Tanh, "gelu": nn.GELU}


def _mlp(in_features: int, hidden: int, out_features: int, dropout: float, activation: str) -> nn.Sequential:
    """Linear -> activation -> dropout -> Linear."""
    check_one_of(activation, sorted(_ACTIVATIONS), "activation")
    return nn.Sequential(
        nn.Linear(in_features, hidden),
        _ACTIVATIONS[activation](),
        nn.Dropout(dropout),
        nn.Linear(hidden, out_features),
    )


class _Standardizable(nn.Module):
    """A probe over L+1 hidden states of width d ending in the 2-layer MLP, whose inputs may be standardised per
    (layer, dimension)."""

    input_mean: torch.Tensor | None
    input_std: torch.Tensor | None

    def __init__(self, num_layers: int, hidden_size: int, num_labels: int, mlp_hidden: int | None = None,
                 dropout: float = 0.0, activation: Literal["tanh", "gelu"] = "tanh") -> None:
        super().__init__()
        self.num_layers = num_layers
        self.hidden_size = hidden_size
        self.num_labels = num_labels
        self.mlp = _mlp(num_layers * hidden_size, mlp_hidden or hidden_size, num_labels, dropout, activation)
        self.register_buffer("input_mean", None)
        self.register_buffer("input_std", None)

    @property
    def standardized(self) -> bool:
        """Whether the inputs are standardised (`set_input_statistics` was called)."""
        return self.input_mean is not None

    def set_input_statistics(self, statistics) -> None:
        """Standardise every (layer, dimension) of the inputs with `statistics` (`InputStatistics`) from now on."""
        shape = (self.num_layers, self.hidden_size)
        if tuple(statistics.mean.shape) != shape:
            raise ValueError(f"statistics of shape {tuple(statistics.mean.shape)} do not fit this probe's {shape}")
        device = next(self.parameters()).device
        self.input_mean = statistics.mean.to(device)
        self.input_std = statistics.std.to(device)

    def _standardize(self, x: torch.Tensor) -> torch.Tensor:
        """`x` [..., L+1, d] standardised, or as it is without statistics."""
        if self.input_mean is None:
            return x
        return (x - self.input_mean.to(x.dtype)) / self.input_std.to(x.dtype)


def _check_features(features: torch.Tensor, num_layers: int, hidden_size: int) -> None:
    if features.dim() != 4:
        raise ValueError(f"features must be [batch, L+1, n, d], got shape {tuple(features.shape)}")
    if features.shape[1] != num_layers or features.shape[3] != hidden_size:
        raise ValueError(
            f"features shape {tuple(features.shape)} does not match num_layers={num_layers}, "
            f"hidden_size={hidden_size}"
        )


class SentenceProbe(_Standardizable):
    """Per-layer learned position pooling (`max_length` weights per layer), concatenation across the `num_layers`
    (L+1) layers, 2-layer MLP of width `mlp_hidden` (None: `hidden_size`)."""

    def __init__(
        self,
        num_layers: int,
        hidden_size: int,
        max_length: int,
        num_labels: int,
        mlp_hidden: int | None = None,
        dropout: float = 0.0,
        activation: Literal["tanh", "gelu"] = "tanh",
    ) -> None:
        super().__init__(num_layers, hidden_size, num_labels, mlp_hidden, dropout, activation)
        self.max_length = max_length
        # zeros: the probe starts as mean pooling over the real tokens
        self.position_logits = nn.Parameter(torch.zeros(num_layers, max_length))

    def pooling_weights(self, attention_mask: torch.Tensor) -> torch.Tensor:
        """Position weights [batch, L+1, n]: softmax over real tokens, exactly 0 on pads (all 0 without any)."""
        n = attention_mask.shape[-1]
        if n > self.max_length:
            raise ValueError(f"input length {n} exceeds the probe's max_length {self.max_length}")
        real = attention_mask.bool()[:, None, :]  # [batch, 1, n]
        logits = self.position_logits[:, :n].unsqueeze(0)  # [1, L+1, n]
        # -inf gives exactly zero weight on pads; the where() turns the NaN of all-pad rows into 0.
        weights = torch.softmax(logits.masked_fill(~real, float("-inf")), dim=-1)
        return torch.where(real, weights, torch.zeros((), dtype=weights.dtype, device=weights.device))

    def pool(self, features: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Concatenated per-layer pooled vectors, [batch, (L+1)*d]."""
        _check_features(features, self.num_layers, self.hidden_size)
        if attention_mask.shape != (features.shape[0], features.shape[2]):
            raise ValueError(
                f"attention_mask shape {tuple(attention_mask.shape)} != (batch, n) = "
                f"{(features.shape[0], features.shape[2])}"
            )
        weights = self.pooling_weights(attention_mask)
        # Zero the pad slots too, so that even inf/NaN there cannot leak in through 0 * x.
        real = attention_mask.bool()[:, None, :, None]
        zero = torch.zeros((), dtype=weights.dtype, device=weights.device)
        features = torch.where(real, features.to(weights.dtype), zero)
        # Standardising the pooled vector equals standardising every real token first: the weights sum to 1.
        pooled = self._standardize(torch.einsum("bln,blnd->bld", weights, features))
        return pooled.reshape(features.shape[0], self.num_layers * self.hidden_size)

    def forward(self, features: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Logits [batch, num_labels] from ``features`` [batch, L+1, n, d]."""
        return self.mlp(self.pool(features, attention_mask))


class TokenProbe(_Standardizable):
    """Per-token concatenation across layers, 2-layer MLP (NER, POS; MLM via `mlm_probe`)."""

    def token_inputs(self, features: torch.Tensor, select: torch.Tensor | None = None) -> torch.Tensor:
        """The MLP's input per token, [batch, n, (L+1)*d] (or [num_selected, (L+1)*d] with `select`), layer-major."""
        _check_features(features, self.num_layers, self.hidden_size)
        batch, _, n, _ = features.shape
        per_token = features.permute(0, 2, 1, 3)  # [batch, L+1, n, d] -> [batch, n, L+1, d]
        if select is not None:
            if select.shape != (batch, n):
                raise ValueError(f"select shape {tuple(select.shape)} != (batch, n) = {(batch, n)}")
            per_token = per_token[select.bool()]  # [k, L+1, d]
        per_token = self._standardize(per_token.to(self.mlp[0].weight.dtype))
        return per_token.reshape(*per_token.shape[:-2], self.num_layers * self.hidden_size)

    def forward(
        self,
        features: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        select: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits [batch, n, num_labels] of `features` [batch, L+1, n, d], or [num_selected, num_labels] of the
        positions bool `select` [batch, n] marks (row-major, as ``labels[select]``); `attention_mask` is unused."""
        return self.mlp(self.token_inputs(features, select))


def mlm_probe(
    num_layers: int,
    hidden_size: int,
    vocab_size: int,
    mlp_hidden: int | None = None,
    dropout: float = 0.0,
    activation: Literal["tanh", "gelu"] = "tanh",
) -> TokenProbe:
    """The MLM probe: a `TokenProbe` with a vocabulary-sized output layer, trained from scratch (the model's own MLM
    head is not used)."""
    return TokenProbe(num_layers, hidden_size, vocab_size, mlp_hidden, dropout, activation)


class LMHeadProbe(nn.Module):
    """A causal LM's own frozen output head over the last hidden state: next-token logits, no trainable parameter
    (logit soft-capping after the head is not reproduced)."""

    def __init__(self, head: nn.Module) -> None:
        super().__init__()
        self._head = [head]  # a list keeps the model's head out of this module's parameters and state

    def forward(self, features: torch.Tensor, attention_mask: torch.Tensor | None = None,
                select: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [batch, n, vocab] from features [batch, layers, n, d] (the last layer is read), or
        [num_selected, vocab] at the positions `select` [batch, n] marks."""
        if features.dim() != 4:
            raise ValueError(f"features must be [batch, layers, n, d], got shape {tuple(features.shape)}")
        last = features[:, -1]
        if select is not None:
            last = last[select.bool()]
        head = self._head[0]
        return head(last.to(head.weight.dtype))


def probe_loss(
    task_kind: Literal["sentence", "token", "mlm", "lm", "next_token"],
    logits: torch.Tensor,
    labels: torch.Tensor,
) -> torch.Tensor:
    """Cross-entropy for a probe's logits: [batch, C] against [batch] for ``"sentence"``; for `POSITION_KINDS`
    [..., C] against [...], the mean over positions not labelled -100 (0 when there are none)."""
    if task_kind == "sentence":
        return F.cross_entropy(logits, labels)
    if task_kind in POSITION_KINDS:
        flat_logits = logits.reshape(-1, logits.shape[-1])
        flat_labels = labels.reshape(-1)
        total = F.cross_entropy(flat_logits, flat_labels, ignore_index=IGNORE_INDEX, reduction="sum")
        return total / (flat_labels != IGNORE_INDEX).sum().clamp(min=1)
    raise ValueError(f"task_kind must be 'sentence' or one of {', '.join(map(repr, POSITION_KINDS))}, got "
                     f"{task_kind!r}")

"""Probing classifiers on top of a frozen encoder (paper Sec. 3.3).

Both probes read ``features`` of shape [batch, L+1, n, d]: the stacked ``hidden_states`` of the
backbone (embedding output + every layer), with ``attention_mask`` [batch, n] (1 = real token,
0 = pad). Inputs use a fixed-length layout (every example padded to ``max_length`` with the
final [SEP] in the last slot), so a token position means the same thing in every example.

* :class:`SentenceProbe` (CoLA, SST-2, MRPC, MNLI): per layer, a learned weighting over token
  positions (not attention: it does not depend on the input) pools the n vectors into one;
  the L+1 pooled vectors are concatenated and fed to a 2-layer MLP.
* :class:`TokenProbe` (NER, POS, MLM, LM probe): each token's L+1 vectors are concatenated and fed to a
  2-layer MLP. For MLM the output layer is vocabulary-sized (:func:`mlm_probe`), so the probe
  is the decoder and the model's own MLM head (if any) is not used; a causal LM's next-token probe
  (task ``lm_probe``) is the same probe, trained on next-token labels.
* :class:`LMHeadProbe` (LM, decoders only): not a probe at all but the causal LM's own output head, frozen,
  applied to the last hidden state: nothing is trained, the pretraining objective is scored as it is.

Sentence and token probes can standardise their inputs per (layer, dimension) with training statistics
(`set_input_statistics`, `papa.probing.standardize`): off by default, as in the paper; the function class is the
same either way (an affine map the first linear layer absorbs).

Defaults follow the official probe (schwartz-lab-NLP/papa, ``FreezeExtractPoller*``): the MLP's
hidden width is d (the backbone's hidden size) and its activation tanh. Two deliberate
differences from that code: the position weights go through a softmax restricted to real tokens
(the official weights are raw, initialised to 1/max_length and merely multiplied by the mask, so
the pooled scale varies with sentence length); and the MLM probe's activation is tanh like every other
probe's, where the official code used the backbone's ``hidden_act`` (GELU): pass ``activation="gelu"`` to
match. An optional dropout before the output layer is off by default, as in the official probe.
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
    """A probe over L+1 hidden states of width d ending in the 2-layer MLP (`_mlp`), whose inputs may be
    standardised per (layer, dimension): `papa.probing.standardize`. The probes' shared arguments are
    `SentenceProbe`'s."""

    input_mean: torch.Tensor | None
    input_std: torch.Tensor | None

    def __init__(self, num_layers: int, hidden_size: int, num_labels: int, mlp_hidden: int | None,
                 dropout: float, activation: Literal["tanh", "gelu"]) -> None:
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
        """Standardise every (layer, dimension) of the inputs with `statistics` (`papa.probing.standardize.
        InputStatistics` of the training features) from now on."""
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
    """Per-layer learned position pooling, concatenation across layers, 2-layer MLP.

    Args:
        num_layers: number of hidden-state tensors, L+1 (embeddings + L layers).
        hidden_size: d, the backbone's hidden size.
        max_length: number of learned position weights per layer (the padded input length).
        num_labels: number of classes.
        mlp_hidden: hidden width of the MLP; ``None`` means ``hidden_size`` (as the official probe).
        dropout: dropout before the output layer (active in ``train()`` mode only).
        activation: ``"tanh"`` (default: every probe's) or ``"gelu"`` (the released code's MLM probe).
    """

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
        # Logits of the position weights; zeros = uniform pooling over the real tokens at start,
        # i.e. the probe starts as mean pooling and learns which positions matter.
        self.position_logits = nn.Parameter(torch.zeros(num_layers, max_length))

    def pooling_weights(self, attention_mask: torch.Tensor) -> torch.Tensor:
        """Position weights [batch, L+1, n]: softmax over real tokens, exactly 0 on pads.

        A row with no real token at all gets all-zero weights (a zero pooled vector), not NaN.
        """
        n = attention_mask.shape[-1]
        if n > self.max_length:
            raise ValueError(f"input length {n} exceeds the probe's max_length {self.max_length}")
        real = attention_mask.bool()[:, None, :]  # [batch, 1, n]
        # Shorter inputs use the first n weights; with the fixed-length layout inputs are exactly
        # max_length long, so every slot (incl. the final [SEP]) keeps its own weight.
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
    """Per-token concatenation across layers, 2-layer MLP (NER, POS; MLM via :func:`mlm_probe`).

    Args:
        num_layers: number of hidden-state tensors, L+1.
        hidden_size: d.
        num_labels: number of classes (vocabulary size for MLM).
        mlp_hidden: hidden width of the MLP; ``None`` means ``hidden_size``.
        dropout: dropout before the output layer.
        activation: ``"tanh"`` (default) or ``"gelu"``.
    """

    def __init__(
        self,
        num_layers: int,
        hidden_size: int,
        num_labels: int,
        mlp_hidden: int | None = None,
        dropout: float = 0.0,
        activation: Literal["tanh", "gelu"] = "tanh",
    ) -> None:
        super().__init__(num_layers, hidden_size, num_labels, mlp_hidden, dropout, activation)

    def token_inputs(self, features: torch.Tensor, select: torch.Tensor | None = None) -> torch.Tensor:
        """The MLP's input per token, [batch, n, (L+1)*d] (or [num_selected, (L+1)*d] with `select`): each token's
        L+1 vectors, standardised if the probe has statistics, concatenated layer-major like the official probe."""
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
        """Logits per token.

        Args:
            features: [batch, L+1, n, d].
            attention_mask: accepted for symmetry with :class:`SentenceProbe`; unused, because
                each token is classified on its own representations only (pad positions get
                logits, which the loss ignores through label -100).
            select: optional bool [batch, n]; if given, only those positions are classified and
                the result is [num_selected, num_labels] in row-major order (``labels[select]``
                lines up with it). For MLM this skips the vocabulary-sized decoder on the ~85%
                of positions that have no target.

        Returns:
            [batch, n, num_labels], or [num_selected, num_labels] with ``select``.
        """
        return self.mlp(self.token_inputs(features, select))


def mlm_probe(
    num_layers: int,
    hidden_size: int,
    vocab_size: int,
    mlp_hidden: int | None = None,
    dropout: float = 0.0,
    activation: Literal["tanh", "gelu"] = "tanh",
) -> TokenProbe:
    """The MLM probe: a :class:`TokenProbe` whose output layer is a vocabulary-sized decoder.

    It is trained from scratch on the frozen features (the model's own MLM head, if any, is not
    used), so models without an MLM head are probed the same way. The official code used GELU
    here (``activation="gelu"``).
    """
    return TokenProbe(num_layers, hidden_size, vocab_size, mlp_hidden, dropout, activation)


class LMHeadProbe(nn.Module):
    """A causal LM's own output head over the last hidden state: next-token logits, no trainable parameter.

    The head stays the model's (frozen, outside this module's parameters). Models that scale or soft-cap their
    logits after the head (e.g. Gemma's final soft-capping) are not reproduced: the tests compare these logits with
    the model's own on every registered decoder.
    """

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
    """Cross-entropy for a probe's logits.

    ``"sentence"``: logits [batch, C], labels [batch]. The kinds labelled slot by slot (`POSITION_KINDS`: ``"token"``,
    ``"mlm"``, ``"lm"``, ``"next_token"``): logits [..., C] and labels [...] of matching leading shape (e.g.
    [batch, n], or [k] after ``select``); positions labelled -100 are ignored, and the mean is over labelled
    positions (0, not NaN, when a batch has none, which can happen with MLM masking of short inputs).
    """
    if task_kind == "sentence":
        return F.cross_entropy(logits, labels)
    if task_kind in POSITION_KINDS:
        flat_logits = logits.reshape(-1, logits.shape[-1])
        flat_labels = labels.reshape(-1)
        total = F.cross_entropy(flat_logits, flat_labels, ignore_index=IGNORE_INDEX, reduction="sum")
        return total / (flat_labels != IGNORE_INDEX).sum().clamp(min=1)
    raise ValueError(f"task_kind must be 'sentence' or one of {', '.join(map(repr, POSITION_KINDS))}, got "
                     f"{task_kind!r}")

"""The adapter for DeBERTa (v1 and v2/v3), whose attention module computes its softmax itself.

`DisentangledSelfAttention.forward` adds the c2p/p2c relative-position terms to the scores, softmaxes, and applies its
``self.dropout`` exactly once, to the probabilities [B, H, n, n]. papa transforms the probabilities in a forward
pre-hook on that dropout module. Its mask is the outer product of the padding, so pad *query* rows come out uniform:
statistics mask both queries and keys (the controller's padding from the backbone's ``attention_mask``).
"""
from __future__ import annotations

import torch
from torch import nn

from papa.core.errors import PapaError
from papa.method.adapters.base import Adapter, AdapterContext, AttentionSites, unsupported
from papa.method.attention_free import QK_HEADS, RESTORE, QueryKeyHeads
from papa.method.constant_heads import constant_attention
from papa.method.masks import Allowed


def _value_states(module: nn.Module, hidden_states: torch.Tensor) -> torch.Tensor:
    """DeBERTa's value states [B, h, n, d′] (v1 interleaves q, k, v per head in one `in_proj`)."""
    batch, n, _ = hidden_states.shape
    heads, head_dim = module.num_attention_heads, module.attention_head_size
    if hasattr(module, "value_proj"):
        v = module.value_proj(hidden_states)
    else:
        w = module.in_proj.weight.view(heads, 3, head_dim, -1)[:, 2].reshape(heads * head_dim, -1)
        v = nn.functional.linear(hidden_states, w.to(hidden_states.dtype)) + module.v_bias.to(hidden_states.dtype)
    return v.view(batch, n, heads, head_dim).transpose(1, 2)


class DebertaAdapter(Adapter):
    """Probabilities transformed just before DeBERTa's attention dropout."""

    hook = "probs_dropout"

    def find(self, model: nn.Module, base: nn.Module) -> AttentionSites:
        try:
            modules = [layer.attention.self for layer in base.encoder.layer]
        except AttributeError as exc:
            raise unsupported(model, f"no encoder.layer[i].attention.self found ({exc})",
                              "DeBERTa models load with transformers' AutoModel* classes.") from exc
        first = modules[0]
        heads = first.num_attention_heads
        return AttentionSites(base=base, layer_modules=modules, num_heads=heads, num_kv_heads=heads,
                              head_dim=first.attention_head_size)

    def install(self, controller: AdapterContext) -> None:
        for layer, module in enumerate(controller.info.attention_modules):
            hook = (lambda layer: lambda m, args: (self._transform(controller, layer, args[0]), *args[1:]))(layer)
            controller.add_hook(module.dropout.register_forward_pre_hook(hook))

    def remove(self, controller: AdapterContext) -> None:
        pass  # the dropout pre-hooks are among the controller's handles

    @staticmethod
    def _transform(controller: AdapterContext, layer: int, probs: torch.Tensor) -> torch.Tensor:
        batch, _, n, _ = probs.shape
        return controller.transform_probs(layer, probs, controller.valid_mask(batch, n, probs.device))

    def drop_query_key(self, controller: AdapterContext, layers: list[int], module: nn.Module) -> None:
        """Fully replaced layers run value projection + constants alone; other layers need every head's scores."""
        (layer,) = layers
        if controller.plan(layer).keep:
            return  # scores of kept heads need Q, K and the relative terms: the layer runs unchanged
        if getattr(module, "head_weights_proj", None) is not None:
            raise PapaError("DeBERTa with talking heads mixes probabilities across heads: attention-free layers are "
                            "not supported for it")

        def forward(hidden_states, attention_mask=None, output_attentions=False, *args, **kwargs):
            value = _value_states(module, hidden_states)
            batch, _, n, _ = value.shape
            valid = controller.valid_mask(batch, n, value.device)
            constants = controller.constant_heads(layer, n, value.dtype, Allowed(), replaced=False)
            out = constant_attention(constants, value, valid, controller.workspace(value))
            return out.reshape(batch, n, -1), None

        module.forward = forward  # an instance attribute shadows the class's forward; deleting it restores it
        module.__dict__[QK_HEADS] = QueryKeyHeads(())

        module.__dict__[RESTORE] = lambda: module.__dict__.pop("forward", None)

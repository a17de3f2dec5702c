"""Run options of a grid's backbone (papa.method.precision): checked before any work, undone after."""
from __future__ import annotations

import pytest
import torch

from conftest import tiny_model, tiny_tokenizer
from papa.core.errors import InputError
from papa.method.architectures import backbone
from papa.method.layout import encode
from papa.method.precision import backbone_autocast, check_precision, compiled_backbone, matmul_precision


def test_precisions_are_checked_against_the_device():
    assert check_precision("bf16", "cpu") == "bf16" and check_precision("tf32", "cuda") == "tf32"
    with pytest.raises(InputError, match="unknown precision 'fp8'"):
        check_precision("fp8", "cpu")
    with pytest.raises(InputError, match="'tf32' is a mode of CUDA matmuls"):
        check_precision("tf32", "cpu")


def test_tf32_is_set_inside_and_restored_after():
    before = torch.backends.cuda.matmul.allow_tf32
    with matmul_precision("tf32"):
        assert torch.backends.cuda.matmul.allow_tf32
    assert torch.backends.cuda.matmul.allow_tf32 == before


def test_bf16_runs_the_backbone_in_bfloat16_only_inside():
    model, tok = tiny_model("bert"), tiny_tokenizer("bert")
    inputs = encode(tok, ["the cat sat", "a dog"], max_length=8, model_type="bert").inputs
    with torch.no_grad():
        plain = backbone(model)(**inputs).last_hidden_state
        with backbone_autocast("bf16", "cpu"):
            half = backbone(model)(**inputs).last_hidden_state
        again = backbone(model)(**inputs).last_hidden_state
    assert not torch.equal(half.float(), plain)  # its matmuls ran in bfloat16 (layer norms return float32)
    torch.testing.assert_close(half.float(), plain, rtol=0.05, atol=0.05)
    assert torch.equal(again, plain)


def test_a_compiled_backbone_is_eager_again_after():
    model, tok = tiny_model("bert"), tiny_tokenizer("bert")
    inputs = encode(tok, ["the cat sat", "a dog"], max_length=8, model_type="bert").inputs
    with torch.no_grad():
        plain = backbone(model)(**inputs).last_hidden_state
        try:
            with compiled_backbone(model, True, backend="aot_eager"):
                assert backbone(model)._compiled_call_impl is not None
                compiled = backbone(model)(**inputs).last_hidden_state
        finally:
            torch._dynamo.reset()
    assert backbone(model)._compiled_call_impl is None
    torch.testing.assert_close(compiled, plain, rtol=1e-5, atol=1e-6)

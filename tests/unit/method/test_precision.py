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


@pytest.mark.parametrize("precision", ["bf16", "bf16_with_store"])
def test_a_trained_parameter_is_read_as_updated_at_every_step_under_autocast(precision):
    """Autocast's cast cache would keep the bf16 copy of a parameter that trains inside the context (trained
    constants, λ's θ, a probe), so the second step's forward would read the first step's values."""
    layer = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4)
    with backbone_autocast(precision, "cpu"):
        before = layer(x)
        with torch.no_grad():
            layer.weight.add_(1.0)  # what an optimizer's step does, in place
        after = layer(x)
    assert before.dtype == torch.bfloat16
    assert not torch.equal(before, after)
    assert torch.equal(after, torch.nn.functional.linear(x.bfloat16(), layer.weight.bfloat16(), layer.bias.bfloat16()))


def test_the_store_dtype_follows_the_precision():
    from papa.method.precision import feature_dtype

    assert [feature_dtype(p) for p in ("float32", "bf16", "bf16_store", "bf16_with_store")] == [
        "float32", "float32", "bfloat16", "bfloat16"]
    with backbone_autocast("bf16_store", "cpu"):  # the backbone in float32
        assert torch.nn.Linear(2, 2)(torch.ones(1, 2)).dtype == torch.float32

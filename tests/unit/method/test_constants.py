"""Constant kinds, the safetensors artifact, and every validation error."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from safetensors.torch import save_file

import papa
from conftest import REPO, tiny_model, tiny_tokenizer
from papa.method.constants import (ConstantMatrices, data_free_constants, load_constants, toeplitz_matrix,
                                   with_matrices, write_constants_index)
from papa.runs.constants_cache import record_dtype

N = 12


@pytest.fixture
def bert():
    return tiny_model("bert"), tiny_tokenizer("bert")


@pytest.fixture
def average(bert):
    model, tok = bert
    return papa.extract_constants(model, tok, ["the cat sat", "a dog ran", "it was good"], max_length=N,
                                  layout="sep_last", progress=False, model_name="tiny-bert")


def test_toeplitz_is_harmonic():
    t = toeplitz_matrix(5)
    assert torch.allclose(t.sum(-1), torch.ones(5))
    row = t[2] / t[2, 2]
    assert torch.allclose(row, torch.tensor([1 / 3, 1 / 2, 1, 1 / 2, 1 / 3]))
    assert torch.allclose(t[0, 1:] / t[0, 0], torch.tensor([1 / 2, 1 / 3, 1 / 4, 1 / 5]))


@pytest.mark.parametrize("kind", ["identity", "toeplitz", "zeros"])
def test_data_free_kinds(bert, kind):
    model, _ = bert
    sig = papa.model_signature(model)
    c = data_free_constants(kind, sig, N)
    assert c.matrices.shape == (2, 4, N, N) and c.metadata.kind == kind
    assert torch.equal(c.matrices[1, 3], {"identity": torch.eye(N), "toeplitz": toeplitz_matrix(N),
                                          "zeros": torch.zeros(N, N)}[kind])
    with pytest.raises(ValueError, match="unknown data-free"):
        data_free_constants("gaussian", sig, N)


def test_round_trip(tmp_path, average):
    path = average.save(tmp_path / "sub" / "c.safetensors")
    loaded = load_constants(path)
    assert torch.equal(loaded.matrices, average.matrices)
    assert torch.equal(loaded.counts, average.counts)
    assert loaded.metadata == average.metadata
    assert [p.name for p in path.parent.iterdir()] == ["c.safetensors"]  # no temporary file left


def test_attach_validates_model_identity(bert, average):
    model, tok = bert
    ctrl = papa.attach(model)
    ctrl.set_constants(average)  # same model: fine
    other = tiny_model("bert", seed=1)  # same config, other weights
    other_ctrl = papa.attach(other)
    with pytest.raises(papa.IncompatibleArtifactError, match="weights_fingerprint"):
        other_ctrl.set_constants(average)
    other_ctrl.set_constants(average, strict=False)  # explicitly allowed
    three_layers = tiny_model("bert", layers=3)
    with pytest.raises(papa.IncompatibleArtifactError, match="2 layers x 4 heads .* 3 x 4"):
        papa.attach(three_layers).set_constants(average)
    with pytest.raises(papa.IncompatibleArtifactError, match="2 layers x 4 heads .* 2 x 8"):
        papa.attach(tiny_model("bert", heads=8)).set_constants(average, strict=False)
    # Data-free constants only need the shape to fit.
    papa.attach(tiny_model("bert", seed=2)).set_constants(data_free_constants("toeplitz", ctrl.signature, N))


def test_check_compatible_length_and_layout(bert, average):
    sig = papa.model_signature(bert[0], "tiny-bert")
    average.check_compatible(sig, max_length=N, layout="sep_last")
    with pytest.raises(papa.IncompatibleArtifactError, match="sequence length 12, not 64"):
        average.check_compatible(sig, max_length=64)
    with pytest.raises(papa.IncompatibleArtifactError, match="layout 'sep_last', not 'standard'"):
        average.check_compatible(sig, layout="standard")


def test_truncated_and_garbled_files(tmp_path, average):
    path = average.save(tmp_path / "c.safetensors")
    data = path.read_bytes()
    (tmp_path / "t.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(papa.CorruptArtifactError, match="truncated"):
        load_constants(tmp_path / "t.safetensors")
    (tmp_path / "g.safetensors").write_bytes(b"\x00" * 64)
    with pytest.raises(papa.CorruptArtifactError, match="not a readable safetensors"):
        load_constants(tmp_path / "g.safetensors")
    with pytest.raises(FileNotFoundError, match="papa extract"):
        load_constants(tmp_path / "missing.safetensors")
    save_file({"x": torch.zeros(2)}, str(tmp_path / "foreign.safetensors"))
    with pytest.raises(papa.CorruptArtifactError, match="not a papa constants file"):
        load_constants(tmp_path / "foreign.safetensors")


def _write_raw(path, matrices, meta_json, counts=None):
    tensors = {"matrices": matrices}
    if counts is not None:
        tensors["counts"] = counts
    save_file(tensors, str(path), metadata={"papa": meta_json})


def test_bad_contents_are_named(tmp_path, average):
    meta = average.metadata.to_json()
    nan = average.matrices.clone()
    nan[1, 2, 3, 4] = float("nan")
    _write_raw(tmp_path / "nan.safetensors", nan, meta)
    with pytest.raises(papa.CorruptArtifactError, match="NaN.*layer 1, head 2"):
        load_constants(tmp_path / "nan.safetensors")
    neg = average.matrices.clone()
    neg[0, 1, 0, 0] = -0.5
    _write_raw(tmp_path / "neg.safetensors", neg, meta)
    with pytest.raises(papa.CorruptArtifactError, match="negative entry.*layer 0, head 1"):
        load_constants(tmp_path / "neg.safetensors")
    _write_raw(tmp_path / "shape.safetensors", average.matrices[:, :3].contiguous(), meta)
    with pytest.raises(papa.CorruptArtifactError, match="does not match its own metadata"):
        load_constants(tmp_path / "shape.safetensors")
    d = json.loads(meta)
    d["max_length"] = 64
    _write_raw(tmp_path / "len.safetensors", average.matrices, json.dumps(d))
    with pytest.raises(papa.CorruptArtifactError, match="metadata says"):
        load_constants(tmp_path / "len.safetensors")
    _write_raw(tmp_path / "json.safetensors", average.matrices, "{not json")
    with pytest.raises(papa.CorruptArtifactError, match="unreadable papa metadata"):
        load_constants(tmp_path / "json.safetensors")
    _write_raw(tmp_path / "counts.safetensors", average.matrices, meta, counts=torch.zeros(3, 3, dtype=torch.float64))
    with pytest.raises(papa.CorruptArtifactError, match="counts have shape"):
        load_constants(tmp_path / "counts.safetensors")


def test_a_file_with_the_dtype_only_in_its_free_text_is_refused(tmp_path, average):
    """An older papa wrote the model's dtype at the end of the ``preprocessing`` record, with no ``dtype``
    field; the format check refuses such a file and says what to do, and a current file loads with its field."""
    current = record_dtype(average, "bfloat16")
    path = current.save(tmp_path / "current.safetensors")
    loaded = load_constants(path)
    assert loaded.metadata == current.metadata and loaded.metadata.dtype == "bfloat16"
    old = json.loads(average.metadata.to_json())
    del old["dtype"]
    old["preprocessing"] += "; dtype=float32"
    _write_raw(tmp_path / "old.safetensors", average.matrices, json.dumps(old), counts=average.counts)
    with pytest.raises(papa.IncompatibleArtifactError, match=r"constants file of an older papa: its metadata has no "
                       r"'dtype' field .*truncated=0/3; dtype=float32.*extract the constants again"):
        load_constants(tmp_path / "old.safetensors")
    # a data-free kind records that no model ran (null), which is the current format too
    free = data_free_constants("identity", average.metadata.model, N)
    assert load_constants(free.save(tmp_path / "free.safetensors")).metadata.dtype is None


@pytest.mark.parametrize("path", sorted((REPO / "artifacts").glob("*/constants/*.safetensors")), ids=lambda p: p.name)
def test_the_committed_constants_load(path):
    """The committed constants were rewritten once with the dtype in its field, their tensors unchanged."""
    constants = load_constants(path)
    assert constants.metadata.dtype == "float32" and "dtype" not in constants.metadata.preprocessing


def test_in_memory_validation(average):
    with pytest.raises(papa.CorruptArtifactError, match="NaN"):
        ConstantMatrices(matrices=torch.full_like(average.matrices, float("nan")), metadata=average.metadata)
    with pytest.raises(papa.CorruptArtifactError, match="unknown input layout"):
        ConstantMatrices(matrices=average.matrices, metadata=replace(average.metadata, layout="left"))


def test_trained_constants_keep_provenance(tmp_path, average):
    trained = with_matrices(average, average.matrices - 0.01, "trained:average")
    assert trained.metadata.kind == "trained:average" and (trained.matrices >= 0).all()
    assert load_constants(trained.save(tmp_path / "t.safetensors")).metadata.kind == "trained:average"


def test_constants_index(tmp_path, average):
    average.save(tmp_path / "a.safetensors")
    average.save(tmp_path / "b.safetensors")
    index = json.loads(write_constants_index(tmp_path).read_text())
    assert [e["file"] for e in index] == ["a.safetensors", "b.safetensors"]
    assert index[0]["metadata"] == json.loads(average.metadata.to_json())
    assert index[0]["bytes"] == (tmp_path / "a.safetensors").stat().st_size
    assert index[0]["matrices_sha256"] == index[1]["matrices_sha256"] and len(index[0]["matrices_sha256"]) == 64
    (tmp_path / "b.safetensors").write_bytes(b"not safetensors")  # every file is validated on the way
    with pytest.raises(papa.CorruptArtifactError):
        write_constants_index(tmp_path)


def test_an_index_keeps_the_files_described_before_and_absent_now(tmp_path, average):
    """The tensors are not shipped: a clone that rebuilt only some constants keeps the others' entries."""
    average.save(tmp_path / "a.safetensors")
    average.save(tmp_path / "b.safetensors")
    before = json.loads(write_constants_index(tmp_path).read_text())
    (tmp_path / "a.safetensors").unlink()
    with_matrices(average, average.matrices * 0.5, "trained:average").save(tmp_path / "c.safetensors")
    after = json.loads(write_constants_index(tmp_path).read_text())
    assert [e["file"] for e in after] == ["a.safetensors", "b.safetensors", "c.safetensors"]
    assert after[0] == before[0]
    (tmp_path / "index.json").write_text("{not json")
    with pytest.raises(papa.CorruptArtifactError, match="not a constants index"):
        write_constants_index(tmp_path)

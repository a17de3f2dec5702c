"""Artifact file names: named after the model, not after where it lies."""
from __future__ import annotations

import pytest

import papa
from conftest import tiny_model, tiny_tokenizer
from papa.core.run_folder import RunFolder
from papa.core.settings import Resources
from papa.method.architectures import model_signature
from papa.runs.constants_cache import ConstantsSource, cached_average_constants
from papa.runs.names import RankingName, constants_filename, model_file_name


@pytest.mark.parametrize("name, expected", [
    ("sentence-transformers/all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"),  # a hub id as it is
    ("SmolLM2-135M-Instruct-Q4_1", "SmolLM2-135M-Instruct-Q4_1"),                          # a packaged alias
    ("/home/someone/models/my-bert", "my-bert"),                                            # a folder by its name
    ("/home/someone/models/my-bert/", "my-bert"),
    ("./checkpoints/my-bert", "my-bert"),
    ("~/models/my-bert", "my-bert"),
    ("/mirror/microsoft--deberta-base", "microsoft/deberta-base"),                          # a mirror's hub id
    ("/cache/hub/models--roberta-base/snapshots/0123abcd", "roberta-base"),                 # the HF cache
    ("/cache/hub/models--FacebookAI--roberta-large/snapshots/0123abcd", "FacebookAI/roberta-large"),
])
def test_model_file_name(name, expected):
    assert model_file_name(name) == expected


def test_file_names_do_not_hold_the_folder_path():
    where = "/home/someone/private/models/my-bert"
    constants = constants_filename(where, "sst2-train", 64, "official")
    ranking = RankingName(where, "sst2", "average", "task", 64, "cpu", "official").filename
    assert constants == "my-bert__sst2-train__average-official-n64.safetensors"
    assert ranking == "my-bert__sst2__lambda-average-task-official-n64-cpu.safetensors"
    # moving the folder keeps the name
    assert constants_filename("/elsewhere/my-bert", "sst2-train", 64, "official") == constants


def test_constants_saved_under_a_path_name_are_not_read(tmp_path, monkeypatch):
    """Only the model's name names its constants: a file named by the model's whole path is not taken for them (the
    cache extracts them instead); a file under the name is read, not extracted again."""
    import papa.runs.constants_cache as cache

    def extract(*args, **kwargs):
        raise RuntimeError("extracts")

    model, tok = tiny_model("bert"), tiny_tokenizer("bert")
    where = str(tmp_path / "models" / "tiny-bert")
    signature = model_signature(model, where)
    made = papa.extract_constants(model, tok, ["the cat sat", "a dog ran"], max_length=16, layout="official",
                                  model_name=where, progress=False)
    corpus = "sst2:train[:2]"
    path_named = constants_filename("tiny-bert", corpus, 16, "official").replace(
        "tiny-bert", where.strip("/").replace("/", "-"), 1)
    made.save(tmp_path / "out" / "constants" / path_named)
    source = ConstantsSource("sst2", limit=2, max_length=16, layout="official")
    monkeypatch.setattr(cache, "extract_constants", extract)
    monkeypatch.setattr(ConstantsSource, "load", lambda self, data_dir: ["the cat sat"])  # no data needed here
    with pytest.raises(RuntimeError, match="extracts"):
        cached_average_constants(model, tok, signature, source, folder=RunFolder.at(tmp_path / "out"),
                                 resources=Resources(progress=False))
    made.save(tmp_path / "out" / "constants" / constants_filename(where, corpus, 16, "official"))
    loaded = cached_average_constants(model, tok, signature, source, folder=RunFolder.at(tmp_path / "out"),
                                      resources=Resources(progress=False))
    assert (loaded.matrices == made.matrices).all()


def test_a_ranking_of_another_seed_is_named_by_it_and_seed_0_keeps_its_name():
    def name(**kw):
        return RankingName("my-bert", "sst2", "average", "task", 64, "cpu", "official", **kw).filename

    grid = name()
    assert name(seed=0) == grid
    assert name(seed=1) == "my-bert__sst2__lambda-average-task-official-n64-cpu-seed1.safetensors"
    assert name(dtype="bfloat16", seed=2) == \
        "my-bert__sst2__lambda-average-task-official-n64-cpu-bfloat16-seed2.safetensors"
    assert name(probe_inputs="standardized") == \
        "my-bert__sst2__lambda-average-task-official-n64-cpu-standardized.safetensors"
    with pytest.raises(ValueError, match="seed must be an integer"):
        name(seed="1")
    # A disjoint training part is named before the seed; part 0 (the grid's subset) keeps the grid's name.
    assert name(part=0) == grid
    assert name(part=2, seed=1) == "my-bert__sst2__lambda-average-task-official-n64-cpu-part2-seed1.safetensors"

"""Artifact file names: named after the model, not after where it lies; files named by an older version still read."""
from __future__ import annotations

import pytest

import papa
from conftest import tiny_model, tiny_tokenizer
from papa.method.architectures import model_signature
from papa.runs.constants_cache import ConstantsSource, cached_average_constants
from papa.runs.names import (constants_filename, constants_filenames, existing_file, model_file_name,
                             ranking_filename, ranking_filenames)


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
    ranking = ranking_filename(where, "sst2", "average", "task", 64, "cpu", "official")
    assert constants == "my-bert__sst2-train__average-official-n64.safetensors"
    assert ranking == "my-bert__sst2__lambda-average-task-official-n64-cpu.safetensors"
    # moving the folder keeps the name
    assert constants_filename("/elsewhere/my-bert", "sst2-train", 64, "official") == constants
    # a hub id's names are those older versions gave (nothing to migrate)
    assert constants_filenames("bert-base-uncased", "sst2-train", 64, "official") == \
        ["bert-base-uncased__sst2-train__average-official-n64.safetensors"]


def test_existing_file_prefers_the_current_name_and_reads_an_older_one(tmp_path):
    where = "/data/models/my-bert"
    current, legacy = ranking_filenames(where, "sst2", "average", "task", 64, "cpu", "official")
    assert legacy == "data-models-my-bert__sst2__lambda-average-task-official-n64-cpu.safetensors"
    assert existing_file(tmp_path, [current, legacy]) == tmp_path / current  # neither there: where to write
    (tmp_path / legacy).write_bytes(b"")
    assert existing_file(tmp_path, [current, legacy]) == tmp_path / legacy
    (tmp_path / current).write_bytes(b"")
    assert existing_file(tmp_path, [current, legacy]) == tmp_path / current


def test_constants_saved_under_an_older_name_are_read_not_extracted_again(tmp_path):
    """The cache finds a file an older version named by the model's whole path: no corpus is read (there is no
    data directory and no hub here, so extracting again would fail)."""
    model, tok = tiny_model("bert"), tiny_tokenizer("bert")
    where = str(tmp_path / "models" / "tiny-bert")
    signature = model_signature(model, where)
    made = papa.extract_constants(model, tok, ["the cat sat", "a dog ran"], max_length=16, layout="official",
                                  model_name=where, progress=False)
    corpus = "sst2:train[:2]"
    legacy = constants_filenames(where, corpus, 16, "official")[1]
    made.save(tmp_path / "out" / "constants" / legacy)
    loaded = cached_average_constants(model, tok, signature, ConstantsSource("sst2", limit=2, max_length=16,
                                                                             layout="official"),
                                      out_dir=tmp_path / "out", data_dir=None, progress=False)
    assert loaded.metadata.num_examples == 2
    assert (loaded.matrices == made.matrices).all()


def test_a_ranking_of_another_seed_is_named_by_it_and_seed_0_keeps_its_name():
    grid = ranking_filename("my-bert", "sst2", "average", "task", 64, "cpu", "official")
    assert ranking_filename("my-bert", "sst2", "average", "task", 64, "cpu", "official", seed=0) == grid
    assert ranking_filename("my-bert", "sst2", "average", "task", 64, "cpu", "official", seed=1) == \
        "my-bert__sst2__lambda-average-task-official-n64-cpu-seed1.safetensors"
    assert ranking_filename("my-bert", "sst2", "average", "task", 64, "cpu", "official", "bfloat16", seed=2) == \
        "my-bert__sst2__lambda-average-task-official-n64-cpu-bfloat16-seed2.safetensors"
    assert all(name.endswith("-seed1.safetensors")
               for name in ranking_filenames("/data/my-bert", "sst2", "average", "task", 64, "cpu", "official",
                                             seed=1))
    with pytest.raises(ValueError, match="seed must be an integer"):
        ranking_filename("my-bert", "sst2", "average", "task", 64, "cpu", "official", seed="1")
    # A disjoint training part is named before the seed; part 0 (the grid's subset) keeps the grid's name.
    assert ranking_filename("my-bert", "sst2", "average", "task", 64, "cpu", "official", part=0) == grid
    assert ranking_filename("my-bert", "sst2", "average", "task", 64, "cpu", "official", part=2, seed=1) == \
        "my-bert__sst2__lambda-average-task-official-n64-cpu-part2-seed1.safetensors"

"""Head replacement orders (paper 3.2, 5.4), fractions of input-dependent heads, and the saved head ranking."""
from __future__ import annotations

import json
import random
import re
from fractions import Fraction

import pytest
import torch
from safetensors.torch import save_file

from papa.core.artifacts import FORMAT
from papa.core.errors import CorruptArtifactError, IncompatibleArtifactError, InputError
from papa.method.rankings import HeadRanking, load_ranking
from papa.method.selection import (SELECTION_METHODS, Selection, check_order, fraction_label, heads_to_replace,
                                   num_input_dependent, parse_fraction, parse_selection, replacement_order)

# A 2-layer x 3-head toy with distinct λ: sorted ascending they are (1,1) .1, (0,2) .2, (1,0) .3, (0,0) .4,
# (1,2) .5, (0,1) .6.
TOY_LAMBDAS = torch.tensor([[0.4, 0.6, 0.2],
                            [0.3, 0.1, 0.5]])


# ---- orders ----------------------------------------------------------------------------------------------------

def test_layer_orders_on_toy():
    assert replacement_order("first_to_last", 2, 3) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    # From the last layer, but the heads keep their internal order within a layer (paper 5.4).
    assert replacement_order("last_to_first", 2, 3) == [(1, 0), (1, 1), (1, 2), (0, 0), (0, 1), (0, 2)]


def test_lambda_orders_on_toy():
    expected = [(1, 1), (0, 2), (1, 0), (0, 0), (1, 2), (0, 1)]
    assert replacement_order("lambda", 2, 3, lambdas=TOY_LAMBDAS) == expected
    assert replacement_order("reversed_lambda", 2, 3, lambdas=TOY_LAMBDAS) == expected[::-1]


def test_reversed_is_reverse_of_lambda_without_ties():
    lam = torch.rand(12, 12, generator=torch.Generator().manual_seed(3)) * 0.98 + 0.01
    assert len(set(lam.flatten().tolist())) == 144
    fwd = replacement_order("lambda", 12, 12, lambdas=lam)
    assert replacement_order("reversed_lambda", 12, 12, lambdas=lam) == fwd[::-1]
    values = [lam[layer, head].item() for layer, head in fwd]
    assert values == sorted(values)


def test_lambda_ties_broken_by_layer_then_head():
    lam = torch.tensor([[0.5, 0.2, 0.5],
                        [0.2, 0.5, 0.2]])
    assert replacement_order("lambda", 2, 3, lambdas=lam) == [(0, 1), (1, 0), (1, 2), (0, 0), (0, 2), (1, 1)]
    # Ties keep (layer, head) order in the reversed method too, so it is not simply the reverse here.
    assert replacement_order("reversed_lambda", 2, 3, lambdas=lam) == [(0, 0), (0, 2), (1, 1), (0, 1), (1, 0), (1, 2)]


def test_random_order_is_seeded_permutation_independent_of_global_rng():
    everything = sorted((layer, head) for layer in range(4) for head in range(5))
    torch.manual_seed(0)
    random.seed(0)
    a = replacement_order("random", 4, 5, seed=7)
    torch.manual_seed(123)
    random.seed(123)
    torch.rand(10)
    random.random()
    b = replacement_order("random", 4, 5, seed=7)
    assert a == b
    assert sorted(a) == everything
    c = replacement_order("random", 4, 5, seed=8)
    assert sorted(c) == everything and c != a


@pytest.mark.parametrize("method", SELECTION_METHODS)
def test_every_method_lists_every_head_once(method):
    order = replacement_order(method, 3, 4, lambdas=torch.full((3, 4), 0.5), seed=0)
    assert check_order(order, 3, 4) == order


def test_order_errors():
    with pytest.raises(ValueError, match="unknown head selection method 'best'.*lambda, first_to_last"):
        replacement_order("best", 2, 3)
    with pytest.raises(ValueError, match="needs the learned λ"):
        replacement_order("lambda", 2, 3)
    with pytest.raises(ValueError, match=r"shape \(2, 3\).*got \(3, 2\)"):
        replacement_order("reversed_lambda", 2, 3, lambdas=TOY_LAMBDAS.T)
    with pytest.raises(ValueError, match="non-finite"):
        replacement_order("lambda", 2, 3, lambdas=torch.tensor([[0.1, float("nan"), 0.2], [0.3, 0.4, 0.5]]))
    with pytest.raises(ValueError, match="integer seed"):
        replacement_order("random", 2, 3)
    with pytest.raises(ValueError, match="positive integer"):
        replacement_order("first_to_last", 0, 3)


def test_check_order_errors():
    with pytest.raises(ValueError, match="more than once"):
        check_order([(0, 0), (0, 0), (0, 1), (0, 2), (1, 0), (1, 1)], 2, 3)
    with pytest.raises(ValueError, match="5 of the 6 heads"):
        check_order([(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)], 2, 3)
    with pytest.raises(ValueError, match="outside"):
        check_order([(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0)], 2, 3)


# ---- fractions -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fraction, replaced", [(1, 0), ("1/2", 72), (Fraction(1, 8), 126), (0.0625, 135), (0, 144)])
def test_heads_to_replace_paper_fractions_base_model(fraction, replaced):
    order = replacement_order("first_to_last", 12, 12)
    mask = heads_to_replace(order, fraction, 12, 12)
    assert mask.dtype == torch.bool and mask.shape == (12, 12)
    assert int(mask.sum()) == replaced
    # The replaced heads are exactly the first `replaced` of the order (row-major here).
    assert torch.equal(mask.flatten(), torch.arange(144) < replaced)


def test_heads_to_replace_follows_the_order():
    lam = torch.rand(12, 12, generator=torch.Generator().manual_seed(0)) * 0.9 + 0.05
    order = replacement_order("lambda", 12, 12, lambdas=lam)
    mask = heads_to_replace(order, "1/16", 12, 12)
    assert set(map(tuple, mask.nonzero().tolist())) == set(order[:135])
    kept = lam[~mask]
    assert kept.numel() == 9 and kept.min() > lam[mask].max()  # the 9 largest λ stay input-dependent


def test_num_input_dependent():
    assert [num_input_dependent(f, 144) for f in (1, 0.5, 0.125, 0.0625, 0)] == [144, 72, 18, 9, 0]
    assert num_input_dependent("1/16", 384) == 24  # LARGE: 24 layers x 16 heads
    assert num_input_dependent(0.1, 30) == 3  # float noise in 0.1 * 30 is not an error
    with pytest.raises(ValueError, match=r"4\.5.*rounding='down' \(4 heads\).*rounding='nearest' \(5 heads\)"):
        num_input_dependent("1/16", 72)
    assert num_input_dependent("1/16", 72, rounding="down") == 4
    assert num_input_dependent("1/16", 72, rounding="nearest") == 5
    assert num_input_dependent(0.0625, 72, rounding="down") == 4
    with pytest.raises(ValueError, match="unknown rounding"):
        num_input_dependent(0.5, 72, rounding="up")


@pytest.mark.parametrize("bad", [1.5, -0.25, "3/2", "-1/16", float("nan"), float("inf")])
def test_fraction_out_of_range_raises(bad):
    with pytest.raises(ValueError, match=r"\[0, 1\]|finite"):
        num_input_dependent(bad, 144)


def test_parse_fraction_and_label():
    assert parse_fraction("1") == 1 and parse_fraction("0") == 0
    assert parse_fraction("1/2") == Fraction(1, 2)
    assert parse_fraction(" 1/16 ") == parse_fraction("0.0625") == Fraction(1, 16)
    for bad in ("half", "1/0", ""):
        with pytest.raises(ValueError, match="cannot read"):
            parse_fraction(bad)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        parse_fraction("2")
    assert [fraction_label(f) for f in (1.0, 0.5, 0.125, 0.0625, 0.0)] == ["1", "1/2", "1/8", "1/16", "0"]


# ---- the ranking artifact --------------------------------------------------------------------------------------

def _ranking(layers: int = 2, heads: int = 3) -> HeadRanking:
    lam = TOY_LAMBDAS if (layers, heads) == (2, 3) else torch.full((layers, heads), 0.5)
    sig = {"model_name": "tiny-bert", "model_type": "bert", "num_layers": layers, "num_heads": heads,
           "config_fingerprint": "c0ffee", "weights_fingerprint": "beef"}
    return HeadRanking.from_lambdas(lam, signature=sig, task="sst2", seed=0, max_length=16, layout="sep_last",
                                    constants_fingerprint="abc123", steps=10, epochs=1)


def test_ranking_round_trip(tmp_path):
    r = _ranking()
    assert r.order == replacement_order("lambda", 2, 3, lambdas=TOY_LAMBDAS)
    path = r.save(tmp_path / "ranking.safetensors")
    assert [p.name for p in tmp_path.iterdir()] == ["ranking.safetensors"]  # no temp file left behind
    back = load_ranking(path)
    assert back.order == r.order and back.order[0] == (1, 1)
    assert back.lambdas.dtype == torch.float32 and torch.equal(back.lambdas, TOY_LAMBDAS)
    assert back.metadata == r.metadata
    assert back.metadata["task"] == "sst2" and back.metadata["model"]["weights_fingerprint"] == "beef"
    assert (back.num_layers, back.num_heads, back.model_name) == (2, 3, "tiny-bert")
    assert back.order_for("reversed_lambda") == r.order[::-1]


def test_ranking_without_lambdas_round_trip(tmp_path):
    r = HeadRanking(order=replacement_order("random", 2, 3, seed=1), metadata={"method": "random"})
    back = load_ranking(r.save(tmp_path / "r.safetensors"))
    assert back.lambdas is None and back.order == r.order and (back.num_layers, back.num_heads) == (2, 3)


def test_truncated_ranking_file(tmp_path):
    path = _ranking().save(tmp_path / "r.safetensors")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptArtifactError, match=r"r\.safetensors.*truncated.*papa rank"):
        load_ranking(path)
    path.write_bytes(b"garbage")
    with pytest.raises(CorruptArtifactError, match="not a readable safetensors"):
        load_ranking(path)
    with pytest.raises(FileNotFoundError, match="papa rank"):
        load_ranking(tmp_path / "missing.safetensors")


def _write_raw(path, order, lambdas, num_layers=2, num_heads=3, metadata=None):
    header = {"format_version": FORMAT, "num_layers": num_layers, "num_heads": num_heads,
              "has_lambdas": lambdas is not None, "metadata": metadata or {}}
    tensors = {"order": torch.tensor(order, dtype=torch.int64)}
    if lambdas is not None:
        tensors["lambdas"] = lambdas
    save_file(tensors, str(path), metadata={"papa_ranking": json.dumps(header)})


def test_non_permutation_order_rejected(tmp_path):
    path = tmp_path / "r.safetensors"
    _write_raw(path, [(0, 0), (0, 0), (0, 2), (1, 0), (1, 1), (1, 2)], TOY_LAMBDAS)
    with pytest.raises(CorruptArtifactError, match=r"r\.safetensors.*\(0, 0\) more than once"):
        load_ranking(path)
    with pytest.raises(CorruptArtifactError, match="more than once"):
        HeadRanking(order=[(0, 0), (0, 0), (0, 2), (1, 0), (1, 1), (1, 2)], lambdas=TOY_LAMBDAS)


def test_inconsistent_ranking_files_rejected(tmp_path):
    path = tmp_path / "r.safetensors"
    good = replacement_order("first_to_last", 2, 3)
    _write_raw(path, good, TOY_LAMBDAS, num_layers=3, num_heads=2)  # header shape contradicts the tensors
    with pytest.raises(CorruptArtifactError, match="shape"):
        load_ranking(path)
    _write_raw(path, good, torch.tensor([[0.4, 0.6, 1.0], [0.3, 0.1, 0.5]]))  # λ = 1 is outside (0, 1)
    with pytest.raises(CorruptArtifactError, match=r"layer 0, head 2.*outside \(0, 1\)"):
        load_ranking(path)
    _write_raw(path, good, TOY_LAMBDAS, metadata={"model": {"num_layers": 12, "num_heads": 12}})
    with pytest.raises(CorruptArtifactError, match="num_layers=12"):
        load_ranking(path)
    save_file({"order": torch.tensor(good)}, str(path))
    with pytest.raises(CorruptArtifactError, match="not a papa head ranking"):
        load_ranking(path)


def test_check_compatible():
    r = _ranking()
    r.check_compatible(2, 3)
    r.check_compatible(2, 3, model_name="tiny-bert")
    with pytest.raises(IncompatibleArtifactError, match=r"2 layers x 3 heads.*'bert-base' has 12 x 12"):
        r.check_compatible(12, 12, model_name="bert-base")
    with pytest.raises(IncompatibleArtifactError, match="belongs to model 'tiny-bert', not 'tiny-roberta'"):
        r.check_compatible(2, 3, model_name="tiny-roberta")
    # a model in a folder is named by the folder's name; an older ranking recorded its path: the same model
    r.check_compatible(2, 3, model_name="/models/tiny-bert")


def test_a_selection_names_its_method_and_which_draw_of_its_order():
    assert parse_selection("lambda") == Selection("lambda", "lambda") and not parse_selection("lambda").is_variant
    assert parse_selection("lambda@seed2") == Selection("lambda@seed2", "lambda", seed=2)
    assert parse_selection("reversed_lambda@part1") == Selection("reversed_lambda@part1", "reversed_lambda", part=1)
    assert parse_selection("lambda@full") == Selection("lambda@full", "lambda", profile="full")
    assert parse_selection("random@3") == Selection("random@3", "random", seed=3) and parse_selection("random@3").is_variant
    # another profile's other draws name the profile, then the part or seed, as its ranking's file does
    assert parse_selection("lambda@full-part1") == Selection("lambda@full-part1", "lambda", part=1, profile="full")
    assert parse_selection("reversed_lambda@full-seed1") == Selection("reversed_lambda@full-seed1", "reversed_lambda",
                                                                      seed=1, profile="full")
    assert parse_selection("lambda@my-profile").profile == "my-profile"  # a hyphen inside a profile's name stays
    assert parse_selection("lambda@my-profile-part2") == Selection("lambda@my-profile-part2", "lambda", part=2,
                                                                   profile="my-profile")
    for bad, said in (("lambda@seed0", "seed<k> or part<k>"), ("random@0", "random is random@0"),
                      ("random@x", "permutation's seed"), ("first_to_last@1", "one fixed order"),
                      ("lamda", "unknown head selection method 'lamda'"), ("lambda@", "seed<k> or part<k>"),
                      ("lambda@full-part0", "seed<k> or part<k>"), ("lambda@full-seed1-part1", "seed<k> or part<k>")):
        with pytest.raises(InputError, match=re.escape(said)):
            parse_selection(bad)

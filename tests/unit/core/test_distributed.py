"""papa.core.distributed without a launcher (identity) and its split of batches among processes."""
from __future__ import annotations

import pytest
import torch

from papa.core import distributed


def test_one_process_is_the_identity(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    t = torch.arange(6.0).reshape(3, 2)
    assert not distributed.launched() and distributed.world_size() == 1 and distributed.is_main()
    assert distributed.batch_block(7) == range(7)
    assert distributed.batch_spans(7, 3) == [(0, 3), (3, 6), (6, 7)]
    assert distributed.sum_across(t) is t and distributed.gather_blocks(t) is t
    assert distributed.main_decides([1, 2]) == [1, 2]
    assert distributed.process_device("cpu") == "cpu"


@pytest.mark.parametrize("batches", [0, 1, 2, 3, 9, 10, 64])
@pytest.mark.parametrize("world", [2, 3, 4])
def test_blocks_cover_every_batch_once_in_order(monkeypatch, batches, world):
    blocks = []
    for r in range(world):
        monkeypatch.setattr(distributed, "world_size", lambda: world)
        monkeypatch.setattr(distributed, "rank", lambda r=r: r)
        blocks.append(distributed.batch_block(batches))
    assert [b for block in blocks for b in block] == list(range(batches))
    sizes = [len(b) for b in blocks]
    assert max(sizes) - min(sizes) <= 1  # balanced


@pytest.mark.parametrize("length", [0, 1, 7, 70])
def test_spans_cover_every_item_once(monkeypatch, length):
    spans = []
    for r in range(2):
        monkeypatch.setattr(distributed, "world_size", lambda: 2)
        monkeypatch.setattr(distributed, "rank", lambda r=r: r)
        spans += distributed.batch_spans(length, 8)
    assert [i for start, end in spans for i in range(start, end)] == list(range(length))
    assert all(0 < end - start <= 8 for start, end in spans)

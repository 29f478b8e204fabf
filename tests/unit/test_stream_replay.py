"""An IterableDataset's loader figures: its stream replayed from its start on a deep copy, batch after batch
(perfsuite.probes.stages.Draws), timed and counted exactly as a map-style Dataset's, and never moved on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from test_loadercount import Files, values
from torch.utils.data import DataLoader, IterableDataset

from perfsuite.probes.loadercount import count
from perfsuite.probes.stages import MIN_BATCHES, STREAM_NOTE, replay


class Stream(IterableDataset):
    """The PNG files of test_loadercount's Files as a stream: each item reads, decodes and, where asked, flips."""

    def __init__(self, root: Path, n: int = 6, flip: bool = False) -> None:
        self.files = Files(root, n)
        self.flip = flip
        self.rng = np.random.default_rng(7)  # a generator the Dataset holds: the copy starts where it is

    def __iter__(self) -> Any:
        for i in range(len(self.files)):
            pixels, _ = self.files[i]
            if self.flip:
                pixels = np.flip(pixels, axis=1).copy()
            yield pixels + int(self.rng.integers(0, 2)), i


def test_a_stream_is_counted_exactly_and_the_same_again(tmp_path: Path) -> None:
    loader = DataLoader(Stream(tmp_path), batch_size=2)
    got = values(loader)
    assert got == values(loader)  # counted again: the same stream from its start, the same counts
    assert got["loader_decoded_pixels_per_sample"] == (200, {"__getitem__": 200})
    calls = got["loader_calls_per_sample"][1]
    assert calls["__getitem__: test_stream_replay.Stream.__iter__"] == 1  # its generator, resumed once a sample
    assert calls["collate_fn: torch.utils.data._utils.collate.default_collate"] == 0.5
    c = count(loader, 0)
    assert not isinstance(c, str) and not c.moved  # nothing differed between the two counted passes
    assert c.code["__getitem__"] == "test_stream_replay.Stream.__iter__"


def test_a_change_inside_the_streams_iter_is_counted(tmp_path: Path) -> None:
    plain = values(DataLoader(Stream(tmp_path), batch_size=2))["loader_calls_per_sample"][1]
    flipped = values(DataLoader(Stream(tmp_path, flip=True), batch_size=2))["loader_calls_per_sample"][1]
    added = {k: flipped[k] - plain.get(k, 0) for k in flipped if flipped[k] != plain.get(k, 0)}
    flips = {k: v for k, v in added.items() if k.endswith(".flip")}  # numpy.lib._function_base_impl.flip in NumPy 2
    assert list(flips.values()) == [1], added


def test_a_stream_shorter_than_the_count_is_begun_again_as_an_epoch_is(tmp_path: Path) -> None:
    """2 batches of 2 from a stream of 3: the fourth sample is the stream's first again."""
    got = values(DataLoader(Stream(tmp_path, n=3), batch_size=2))
    assert got["loader_decoded_pixels_per_sample"] == (200, {"__getitem__": 200})


def test_a_stream_is_timed_by_stage_from_its_start_and_left_where_it_was(tmp_path: Path) -> None:
    stream = Stream(tmp_path, n=4)
    before = stream.rng.bit_generator.state
    rep = replay(DataLoader(stream, batch_size=2), 0, batches=6, repeats=2, budget_s=60.0)
    assert not isinstance(rep, str), rep
    assert len(rep.per_batch_ms) == 6 and set(rep.stages) == {"__getitem__", "collate_fn"}
    assert rep.code["__getitem__"] == "test_stream_replay.Stream.__iter__" and rep.sampler == STREAM_NOTE
    assert stream.rng.bit_generator.state == before  # the replay drew from a copy's generator, never the loader's
    short = replay(DataLoader(Stream(tmp_path, n=4), batch_size=2), 0, batches=16, repeats=2, budget_s=0.0)
    assert not isinstance(short, str) and len(short.per_batch_ms) == MIN_BATCHES  # the budget stops it there


class Shared(IterableDataset):
    """A stream over a generator the Dataset holds: no deep copy can be made, and a shallow one would share it."""

    def __init__(self) -> None:
        self.rows = (torch.full((2,), float(i)) for i in range(100))

    def __iter__(self) -> Any:
        return self.rows


def test_a_stream_that_cannot_be_deep_copied_is_not_replayed_and_not_moved_on() -> None:
    dataset = Shared()
    loader = DataLoader(dataset, batch_size=2)
    why = replay(loader, 0)
    assert isinstance(why, str) and "could not be copied" in why and "share the stream" in why
    counted = count(loader, 0)
    assert isinstance(counted, str) and "could not be copied" in counted
    assert next(iter(dataset))[0].item() == 0.0  # the training loader's stream is where it was


@pytest.mark.parametrize("workers", [0, 2])
def test_a_stream_that_shards_by_worker_is_replayed_whole(tmp_path: Path, workers: int) -> None:
    """get_worker_info() is None in the replay, as with num_workers=0, whatever the loader's workers."""

    class Sharded(Stream):
        def __iter__(self) -> Any:
            info = torch.utils.data.get_worker_info()
            assert info is None, "the replay runs in this process"
            return super().__iter__()

    rep = replay(DataLoader(Sharded(tmp_path, n=4), batch_size=2, num_workers=workers), 0, batches=5, repeats=1)
    assert not isinstance(rep, str) and len(rep.per_batch_ms) == 5

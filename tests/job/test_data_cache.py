"""Perfsuite's dataset cache follows the data a workload reads: changed files are noticed."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch.nn.functional as F
from PIL import Image
from torch import nn

from perfsuite.errors import WorkloadError
from perfsuite.jobs.workload import Sample, Scale, Workload
from perfsuite.jobs.workloads.data import ImageFileDataset, dataset_dir, materialize


class FolderWorkload(Workload):
    """A generate() that reads a user's folder of PNGs (the issue's 8 -> 12 images)."""

    name = "folder_test"
    summary = "reads a folder"
    seed_doc = "test"
    target_kind = "label"
    image_format = "png"
    num_classes = 2

    def __init__(self, folder):
        self.folder = folder
        n = len(list(folder.glob("*.png")))
        self.scales = {s: Scale(s, (8, 8), num_samples=n, batch_size=2) for s in ("smoke", "full")}

    def data_sources(self, scale):
        return [self.folder]

    def generate(self, index, rng, scale):
        files = sorted(self.folder.glob("*.png"))
        return Sample(np.array(Image.open(files[index]).convert("RGB")), index % 2)

    def build_model(self, scale):
        return nn.Flatten()

    def loss(self, output, target):
        return F.cross_entropy(output, target)


def _write(folder, n):
    folder.mkdir(exist_ok=True)
    for i in range(n):
        Image.fromarray(np.full((8, 8, 3), i * 10, np.uint8)).save(folder / f"{i:03d}.png")


def test_adding_files_is_noticed(tmp_path):
    src, cache = tmp_path / "src", tmp_path / "cache"
    _write(src, 8)
    w = FolderWorkload(src)
    first = materialize(w, w.scale("smoke"), cache_dir=cache)
    assert len(ImageFileDataset(first, w)) == 8
    _write(src, 12)
    w = FolderWorkload(src)
    second = materialize(w, w.scale("smoke"), cache_dir=cache)
    assert second != first and len(ImageFileDataset(second, w)) == 12


def test_touching_a_file_changes_the_key(tmp_path):
    src = tmp_path / "src"
    _write(src, 2)
    w = FolderWorkload(src)
    before = dataset_dir(w, w.scale("smoke"), 0, tmp_path)
    st = (src / "000.png").stat()
    os.utime(src / "000.png", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert dataset_dir(w, w.scale("smoke"), 0, tmp_path) != before


def test_generate_is_optional_and_says_what_to_write(tmp_path):
    class NoData(FolderWorkload):
        generate = Workload.generate

    w = NoData(tmp_path)
    with pytest.raises(WorkloadError, match="perfsuite.Job"):
        w.generate(0, np.random.default_rng(0), w.scale("smoke"))

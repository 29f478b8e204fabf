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


# A fresh process that materializes a small gray_classifier dataset, logging its pid for each sample it generates
# (slowly, so two processes started together overlap) or, with "refuse", failing if it generates any.
MAKE = """
import os, sys, time
from pathlib import Path
from perfsuite.jobs.registry import get_workload
from perfsuite.jobs.workload import Scale
from perfsuite.jobs.workloads.data import materialize

cache, log, mode = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
workload = get_workload("gray_classifier")
original = type(workload).generate

def generate(self, index, rng, scale):
    if mode == "refuse":
        raise SystemExit("generated a sample: the cache was not hit")
    with open(log, "a") as f:
        f.write(f"{os.getpid()}\\n")
    time.sleep(0.02)
    return original(self, index, rng, scale)

type(workload).generate = generate
print(materialize(workload, Scale("smoke", (16, 16), num_samples=24, batch_size=4), seed=0, cache_dir=cache))
"""


def _start(tmp_path, mode):
    import subprocess
    import sys

    env = {**os.environ, "PERFSUITE_DATA_PROCESSES": "1"}
    args = [sys.executable, "-c", MAKE, str(tmp_path / "cache"), str(tmp_path / "log"), mode]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_two_processes_starting_together_generate_once_and_a_third_hits_the_cache(tmp_path):
    first, second = _start(tmp_path, "make"), _start(tmp_path, "make")
    outs = [p.communicate(timeout=300) for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], outs
    assert outs[0][0] == outs[1][0]  # the same directory
    generated_by = (tmp_path / "log").read_text().split()
    assert len(generated_by) == 24 and len(set(generated_by)) == 1  # one process generated every sample, once
    third = _start(tmp_path, "refuse")
    out, err = third.communicate(timeout=300)
    assert third.returncode == 0 and out == outs[0][0], err


def test_generating_in_several_processes_writes_the_same_bytes(tmp_path, monkeypatch):
    from perfsuite.jobs.registry import get_workload

    files = {}
    for processes in ("1", "3"):
        monkeypatch.setenv("PERFSUITE_DATA_PROCESSES", processes)
        for name in ("face_parsing", "gray_classifier"):
            w = get_workload(name)
            root = materialize(w, Scale("smoke", (32, 32), num_samples=7, batch_size=2), cache_dir=tmp_path / processes)
            files[processes, name] = {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    for name in ("face_parsing", "gray_classifier"):
        assert len(files["1", name]) >= 8 and files["1", name] == files["3", name]


def test_setup_only_stops_after_the_set_up_and_a_second_run_finds_the_dataset(tmp_path, capsys):
    import json

    from perfsuite.cli.main import main

    args = ["run", "gray_classifier", "--setup-only", "--json", "--cache-dir", str(tmp_path)]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["setup_only"] is True and [p["name"] for p in first["phases"]] == ["set-up", "dataset", "model build"]
    (manifest,) = tmp_path.rglob("manifest.json")
    made = manifest.stat().st_mtime_ns
    assert main(args) == 0  # the dataset found, not made again
    assert manifest.stat().st_mtime_ns == made and len(list(tmp_path.rglob("manifest.json"))) == 1
    assert main([*args, "--out", str(tmp_path / "r.json")]) == 2  # no Result to write
    assert "--setup-only runs no step" in capsys.readouterr().err

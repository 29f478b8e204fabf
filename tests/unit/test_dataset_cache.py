"""The dataset cache and baseline saves: damaged caches regenerate or say which file to clear, killed runs'
temporaries are swept, and files are published with the user's umask (a team can share them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from perfsuite.core import tmpfiles
from perfsuite.core.results import Result
from perfsuite.errors import DatasetError
from perfsuite.jobs.workload import Sample, Scale, Workload
from perfsuite.jobs.workloads.data import MANIFEST, ImageFileDataset, materialize
from perfsuite.judge.baselines import BaselineStore

DATA = Path(__file__).resolve().parents[1] / "data" / "results"


class Tiny(Workload):
    name = "cache_tiny"
    summary = "4 grey 8x8 PNGs with labels"
    seed_doc = "test"
    target_kind = "label"
    channels = 1
    image_format = "png"
    num_classes = 2
    scales = {
        "smoke": Scale("smoke", (8, 8), num_samples=4, batch_size=2),
        "full": Scale("full", (8, 8), num_samples=4, batch_size=2),
    }

    def generate(self, index, rng, scale):
        return Sample(image=rng.integers(0, 255, size=scale.image_size, dtype=np.uint8), target=index % 2)

    def build_model(self, scale):
        raise NotImplementedError

    def loss(self, output, target):
        raise NotImplementedError


class TinyMasks(Tiny):
    name = "cache_tiny_masks"
    target_kind = "mask"
    image_format = "jpg"
    channels = 3

    def generate(self, index, rng, scale):
        h, w = scale.image_size
        return Sample(
            image=rng.integers(0, 255, size=(h, w, 3), dtype=np.uint8),
            target=rng.integers(0, 2, size=(h, w), dtype=np.uint8),
        )


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _make(tmp_path: Path, workload: Workload | None = None) -> Path:
    w = workload or Tiny()
    return materialize(w, w.scale("smoke"), seed=0, cache_dir=tmp_path)


def test_a_dataset_directory_without_its_manifest_is_regenerated(tmp_path: Path) -> None:
    root = _make(tmp_path)
    (root / MANIFEST).unlink()  # was: fails forever with Errno 39 Directory not empty
    (root / "images" / "000000.png").write_bytes(b"half a file")
    assert _make(tmp_path) == root
    assert (root / MANIFEST).is_file()
    dataset = ImageFileDataset(root, Tiny())
    assert dataset.load(0)[0].shape == (8, 8)
    assert [p.name for p in root.parent.iterdir()] == [root.name]  # nothing left aside


def test_a_truncated_image_names_the_file_and_how_to_clear_the_cache(tmp_path: Path) -> None:
    root = _make(tmp_path, TinyMasks())
    image = root / "images" / "000001.jpg"
    image.write_bytes(image.read_bytes()[:40])
    dataset = ImageFileDataset(root, TinyMasks())
    with pytest.raises(DatasetError) as info:
        dataset[1]
    assert str(image) in str(info.value) and f"Delete {root}" in str(info.value)


def test_a_truncated_mask_names_the_file(tmp_path: Path) -> None:
    root = _make(tmp_path, TinyMasks())
    mask = root / "masks" / "000002.png"
    mask.write_bytes(mask.read_bytes()[:60])
    with pytest.raises(DatasetError, match=str(mask)):
        ImageFileDataset(root, TinyMasks())[2]


def test_a_truncated_targets_file_names_the_file(tmp_path: Path) -> None:
    root = _make(tmp_path)
    targets = root / "targets.json"
    targets.write_text(targets.read_text()[:3])
    with pytest.raises(DatasetError, match=f"{targets}.*Delete {root}"):
        ImageFileDataset(root, Tiny())


def _dead_pid() -> int:
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    return int(proc.stdout)


def _leftover(directory: Path, stem: str, pid: int, is_dir: bool) -> Path:
    path = directory / f".{stem}.tmp-{tmpfiles._host()}-{pid}-abc123{'' if is_dir else '.tmp'}"
    if is_dir:
        path.mkdir(parents=True)
        (path / "images").mkdir()
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{")
    return path


def test_temporaries_of_killed_runs_are_swept_and_live_ones_kept(tmp_path: Path) -> None:
    w = Tiny()
    parent = tmp_path / w.name
    dead, live = _dead_pid(), os.getpid()
    gone = _leftover(parent, "smoke-seed0-v1", dead, is_dir=True)
    busy = _leftover(parent, "smoke-seed9-v1", live, is_dir=True)
    _make(tmp_path)
    assert not gone.exists() and busy.exists()

    store = BaselineStore(tmp_path / "baselines")
    result = Result.from_json((DATA / "base.json").read_text())
    key_dir = store.path_for(result.fingerprint, "t::a").parent
    stale = _leftover(key_dir, "t-a", dead, is_dir=False)
    store.save(result, "t::a")
    assert not stale.exists()


def test_gitignore_ignores_the_temporaries(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    names = ["baselines/x/.t.py__a-1234.tmp-host-99-abc.tmp", "cache/.smoke-seed0-v1.tmp-host-99-abc/images"]
    proc = subprocess.run(["git", "check-ignore", "--no-index", *names], cwd=repo, capture_output=True, text=True)
    assert proc.stdout.split() == names


def test_files_get_the_users_umask_not_tempfiles_private_mode(tmp_path: Path, umask_022: None) -> None:
    root = _make(tmp_path)
    for path in (root, root / "images", root / "images" / "000000.png", root / MANIFEST):
        assert not tmpfiles.is_dir_mode_private(path), oct(path.stat().st_mode)
    store = BaselineStore(tmp_path / "baselines")
    saved = store.save(Result.from_json((DATA / "base.json").read_text()), "t::a")
    assert saved.stat().st_mode & 0o777 == 0o644
    assert json.loads(saved.read_text())["test_id"] == "t::a"

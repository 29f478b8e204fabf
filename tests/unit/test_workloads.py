"""Reference workloads: real image files on disk, deterministic, and a contract the runner can trust."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from perfsuite.errors import WorkloadError
from perfsuite.jobs.registry import get_workload, register_workload, workload_names
from perfsuite.jobs.workload import SCALES, Scale, Workload
from perfsuite.jobs.workloads.data import ImageFileDataset, materialize
from perfsuite.jobs.workloads.models import count_parameters

NAMES = ["captcha_slider", "face_parsing", "gray_classifier", "super_resolution"]


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name != "manifest.json"):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def test_the_four_seed_workloads_are_registered() -> None:
    assert workload_names() == NAMES
    for name in NAMES:
        w = get_workload(name)
        assert set(w.scales) == set(SCALES)
        assert w.seed_doc in {"000", "002", "003", "004"}


@pytest.mark.parametrize("name", NAMES)
def test_generated_files_are_real_images_pil_opens(name: str, tmp_path: Path) -> None:
    w = get_workload(name)
    scale = w.scale("smoke")
    root = materialize(w, scale, seed=3, cache_dir=tmp_path)
    images = sorted((root / "images").iterdir())
    assert len(images) == scale.num_samples
    with Image.open(images[0]) as img:
        img.verify()
    with Image.open(images[0]) as img:
        assert img.format == ("JPEG" if w.image_format == "jpg" else "PNG")
        assert (img.height, img.width) == scale.image_size
        assert img.mode == ("RGB" if w.channels == 3 else "L")


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_data_other_seed_other_data(name: str, tmp_path: Path) -> None:
    w = get_workload(name)
    smoke = w.scale("smoke")
    scale = Scale("tiny", smoke.image_size, num_samples=6, batch_size=2, model=smoke.model)
    a = materialize(w, scale, seed=1, cache_dir=tmp_path / "a")
    b = materialize(w, scale, seed=1, cache_dir=tmp_path / "b")
    c = materialize(w, scale, seed=2, cache_dir=tmp_path / "c")
    assert _digest(a) == _digest(b)
    assert _digest(a) != _digest(c)


def test_materialize_is_idempotent_and_leaves_no_temp_dirs(tmp_path: Path) -> None:
    w = get_workload("gray_classifier")
    first = materialize(w, w.scale("smoke"), seed=0, cache_dir=tmp_path)
    mtime = (first / "manifest.json").stat().st_mtime_ns
    assert materialize(w, w.scale("smoke"), seed=0, cache_dir=tmp_path) == first
    assert (first / "manifest.json").stat().st_mtime_ns == mtime
    assert [p.name for p in first.parent.iterdir()] == [first.name]


def test_face_masks_are_structured_regions_with_valid_labels(tmp_path: Path) -> None:
    w = get_workload("face_parsing")
    root = materialize(w, w.scale("smoke"), seed=0, cache_dir=tmp_path)
    seen: set[int] = set()
    for path in sorted((root / "masks").iterdir())[:16]:
        mask = np.array(Image.open(path))
        labels = set(np.unique(mask).tolist())
        assert labels <= set(range(19)) | {255}
        seen |= labels
        # Structured, not per-pixel noise: most pixels equal their right-hand neighbour.
        assert (mask[:, 1:] == mask[:, :-1]).mean() > 0.85
    assert {0, 1, 13} <= seen  # background, skin, hair appear
    assert len(seen - {255}) >= 10


def test_dataset_items_are_uint8_images_with_typed_targets(tmp_path: Path) -> None:
    expectations = {
        "face_parsing": ((3, 64, 64), "uint8", (64, 64)),
        "captcha_slider": ((3, 80, 160), "float32", (2, 2)),
        "gray_classifier": ((1, 64, 64), "int64", ()),
        "super_resolution": ((3, 48, 48), "float32", (0,)),
    }
    for name, (image_shape, target_dtype, target_shape) in expectations.items():
        w = get_workload(name)
        ds = ImageFileDataset(materialize(w, w.scale("smoke"), cache_dir=tmp_path), w)
        image, target = ds[0]
        assert tuple(image.shape) == image_shape and str(image.dtype) == "torch.uint8", name
        assert str(target.dtype) == f"torch.{target_dtype}" and tuple(target.shape) == target_shape, name


def test_captcha_keypoints_lie_inside_the_image_and_gap_is_right_of_slider(tmp_path: Path) -> None:
    w = get_workload("captcha_slider")
    root = materialize(w, w.scale("smoke"), cache_dir=tmp_path)
    points = np.array(json.loads((root / "targets.json").read_text()))
    h, wd = w.scale("smoke").image_size
    assert points.shape == (w.scale("smoke").num_samples, 2, 2)
    assert (points[..., 0] > 0).all() and (points[..., 0] < wd).all()
    assert (points[..., 1] > 0).all() and (points[..., 1] < h).all()
    assert (points[:, 0, 0] > points[:, 1, 0]).all()


def test_full_scales_have_the_seeds_sizes() -> None:
    assert get_workload("face_parsing").scale("full").image_size == (512, 512)
    assert get_workload("captcha_slider").scale("full").image_size == (160, 320)
    assert get_workload("gray_classifier").scale("full").image_size == (128, 128)
    w = get_workload("captcha_slider")
    assert 3.0e6 < count_parameters(w.build_model(w.scale("full"))) < 4.0e6  # seed 003: 3.5M parameters
    sr = get_workload("super_resolution").scale("full").model
    assert set(sr) == {"base_channels", "num_blocks"}


def test_unknown_workload_and_scale_say_what_exists() -> None:
    with pytest.raises(WorkloadError, match="unknown workload 'face'; write one of captcha_slider, face_parsing"):
        get_workload("face")
    with pytest.raises(WorkloadError, match="has no scale 'huge'; write one of smoke, full"):
        get_workload("face_parsing").scale("huge")


def test_registering_a_workload_without_both_scales_is_refused() -> None:
    with pytest.raises(WorkloadError, match="must define scales full"):

        @register_workload
        class Half(Workload):
            name = "half"
            summary = "incomplete"
            seed_doc = "none"
            target_kind = "label"
            scales = {"smoke": Scale("smoke", (8, 8), 4, 2)}

            def generate(self, index, rng, scale): ...
            def build_model(self, scale): ...
            def loss(self, output, target): ...

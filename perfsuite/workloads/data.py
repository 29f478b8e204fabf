"""Synthetic datasets as real image files on disk, and the Dataset that decodes them.

The point of perfsuite is to measure the input pipeline users actually have,
so samples are written once as JPEG/PNG files and every ``__getitem__`` opens
and decodes them with PIL (and, for ``aug=cpu``, augments them per sample),
exactly the work seed 000's FaceParsingDataset does in its workers.

Generation is deterministic (one seed per dataset, one child stream per
sample), happens once per (workload, scale, seed) into a cache directory, and
is atomic: files go to a temporary directory that is renamed into place, so an
interrupted run never leaves half a dataset behind.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

if TYPE_CHECKING:
    from perfsuite.workloads.registry import Scale, Workload

DATA_VERSION = 1  # bump when generators change, so old caches are not reused
MANIFEST = "manifest.json"


def default_cache_dir() -> Path:
    """``$PERFSUITE_CACHE``, else ``$XDG_CACHE_HOME/perfsuite``, else ``~/.cache/perfsuite``."""
    if os.environ.get("PERFSUITE_CACHE"):
        return Path(os.environ["PERFSUITE_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "perfsuite"


def show_progress() -> bool:
    """Progress goes to a terminal only: quiet under CI and when piped."""
    return sys.stderr.isatty() and not os.environ.get("CI")


class Progress:
    """A one-line progress counter on stderr, or nothing when not on a terminal."""

    def __init__(self, label: str, total: int, enabled: bool | None = None) -> None:
        self.label, self.total = label, total
        self.enabled = show_progress() if enabled is None else enabled
        self._last = -1

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        pct = int(100 * done / max(self.total, 1))
        if pct != self._last:
            self._last = pct
            sys.stderr.write(f"\r{self.label}: {done}/{self.total} ({pct}%)")
            if done >= self.total:
                sys.stderr.write("\n")
            sys.stderr.flush()


def source_key(workload: Workload, scale: Scale) -> str:
    """A key over the files a workload's generate() reads (``data_sources``): path, size and mtime of each.

    Empty when the workload declares none (its samples are synthetic). Adding,
    removing, resizing or touching a source file changes the key, so the cache
    directory changes and the dataset is generated again: changed data is noticed.
    """
    import hashlib

    sources = [Path(p) for p in workload.data_sources(scale)]
    if not sources:
        return ""
    digest = hashlib.sha256()
    for source in sources:
        files = sorted(f for f in source.rglob("*") if f.is_file()) if source.is_dir() else [source]
        for f in files:
            st = f.stat()
            digest.update(f"{f.resolve()}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def dataset_dir(workload: Workload, scale: Scale, seed: int, cache_dir: Path | None = None) -> Path:
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    key = source_key(workload, scale)
    return root / workload.name / (f"{scale.name}-seed{seed}-v{DATA_VERSION}" + (f"-src{key}" if key else ""))


def materialize(workload: Workload, scale: Scale, seed: int = 0, cache_dir: Path | None = None) -> Path:
    """Write the dataset's files once; return its directory. Safe to call again."""
    target = dataset_dir(workload, scale, seed, cache_dir)
    if (target / MANIFEST).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        _write_samples(workload, scale, seed, tmp)
        try:
            os.replace(tmp, target)
        except OSError:
            # Another process finished first; only complete directories are ever renamed into place.
            if not (target / MANIFEST).is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _write_samples(workload: Workload, scale: Scale, seed: int, out: Path) -> None:
    from PIL import Image

    (out / "images").mkdir()
    if workload.target_kind == "mask":
        (out / "masks").mkdir()
    targets: list[Any] = []
    progress = Progress(f"generating {workload.name}/{scale.name}", scale.num_samples)
    children = np.random.SeedSequence([seed, scale.num_samples]).spawn(scale.num_samples)
    for index, child in enumerate(children):
        sample = workload.generate(index, np.random.default_rng(child), scale)
        image = Image.fromarray(sample.image)
        name = f"{index:06d}"
        if workload.image_format == "jpg":
            image.save(out / "images" / f"{name}.jpg", quality=92)
        else:
            image.save(out / "images" / f"{name}.png")
        if workload.target_kind == "mask":
            Image.fromarray(sample.target.astype(np.uint8), mode="L").save(out / "masks" / f"{name}.png")
        elif workload.target_kind == "keypoints":
            targets.append(np.asarray(sample.target, dtype=np.float32).tolist())
        elif workload.target_kind == "label":
            targets.append(int(sample.target))
        progress.update(index + 1)
    if targets:
        (out / "targets.json").write_text(json.dumps(targets))
    manifest = {"workload": workload.name, "scale": scale.name, "seed": seed, "data_version": DATA_VERSION,
                "num_samples": scale.num_samples, "image_size": list(scale.image_size),
                "target_kind": workload.target_kind, "image_format": workload.image_format}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2))


AugmentFn = Callable[[np.ndarray, Any], tuple[np.ndarray, Any]]


class ImageFileDataset:
    """A map-style Dataset over a materialized directory; decodes with PIL per item.

    ``augment`` is a per-sample callable (the CPU executor) run inside the
    DataLoader workers, or None. Items are (uint8 image CHW, target) with
    target a uint8 HxW mask, a float32 (K, 2) keypoint tensor, an int64 label,
    or an empty tensor for image-only workloads. uint8 batches cost a quarter
    of float32 to pin and copy; the runner converts on the device.
    """

    def __init__(self, root: Path, workload: Workload, augment: AugmentFn | None = None) -> None:
        self.root = Path(root)
        self.workload = workload
        self.augment = augment
        manifest = json.loads((self.root / MANIFEST).read_text())
        self.num_samples = int(manifest["num_samples"])
        self.ext = "jpg" if manifest["image_format"] == "jpg" else "png"
        targets_file = self.root / "targets.json"
        self.targets = json.loads(targets_file.read_text()) if targets_file.is_file() else None

    def __len__(self) -> int:
        return self.num_samples

    def load(self, index: int) -> tuple[np.ndarray, Any]:
        """Decode sample ``index`` from disk: (HxW[xC] uint8 image, numpy target or None)."""
        from PIL import Image

        name = f"{index:06d}"
        mode = "RGB" if self.workload.channels == 3 else "L"
        with Image.open(self.root / "images" / f"{name}.{self.ext}") as img:
            image = np.array(img.convert(mode))  # a writable copy, as torch.from_numpy wants
        kind = self.workload.target_kind
        if kind == "mask":
            with Image.open(self.root / "masks" / f"{name}.png") as m:
                target: Any = np.array(m)
        elif kind == "keypoints":
            target = np.asarray(self.targets[index], dtype=np.float32)
        elif kind == "label":
            target = int(self.targets[index])
        else:
            target = None
        return image, target

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        import torch

        image, target = self.load(index)
        if self.augment is not None:
            geometric_target = target if self.workload.target_kind in ("mask", "keypoints") else None
            image, augmented = self.augment(image, geometric_target)
            if geometric_target is not None:
                target = augmented
        chw = np.ascontiguousarray(image[None] if image.ndim == 2 else image.transpose(2, 0, 1))
        if not chw.flags.writeable:  # PIL-backed arrays are read-only; torch wants to own writable memory
            chw = chw.copy()
        image_t = torch.from_numpy(chw)
        kind = self.workload.target_kind
        if kind == "mask":
            target_t = torch.from_numpy(np.array(target, dtype=np.uint8))
        elif kind == "keypoints":
            target_t = torch.from_numpy(np.ascontiguousarray(target, dtype=np.float32))
        elif kind == "label":
            target_t = torch.tensor(target, dtype=torch.int64)
        else:
            target_t = torch.empty(0)
        return image_t, target_t

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

import contextlib
import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from perfsuite.core import tmpfiles
from perfsuite.errors import DatasetError

if TYPE_CHECKING:
    from perfsuite.jobs.workload import Scale, Workload

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
    """Write the dataset's files once; return its directory. Safe to call again, and from several processes.

    A directory without its manifest (a run killed while an older perfsuite
    replaced it, or a hand-deleted manifest) is regenerated: it is renamed
    aside, then the complete new directory is renamed into place. Temporaries
    left by killed runs in the cache directory are swept first.
    """
    target = dataset_dir(workload, scale, seed, cache_dir)
    try:
        if (target / MANIFEST).is_file():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        tmpfiles.sweep(target.parent)
        tmp = tmpfiles.make_temp_dir(target.parent, target.name)
    except OSError as exc:  # a file where a directory should be, a read-only or full disk: one line, not a traceback
        raise _cache_error(target, exc) from None
    try:
        _write_samples(workload, scale, seed, tmp)
        tmpfiles.publish_tree(tmp)
        _publish(tmp, target)
    except OSError as exc:
        raise _cache_error(target, exc) from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _cache_error(target: Path, exc: OSError) -> DatasetError:
    """What to do when the dataset cache cannot be written: the path, the OS's reason, where to point it instead."""
    where = exc.filename or target
    return DatasetError(
        f"cannot write the dataset cache at {where}: {exc.strerror or exc}; pass --cache-dir a writable directory "
        "(or set $PERFSUITE_CACHE)"
    )


def _publish(tmp: Path, target: Path) -> None:
    """Rename the complete ``tmp`` to ``target``, moving an incomplete ``target`` (no manifest) out of the way."""
    for _ in range(3):
        try:
            os.replace(tmp, target)
            return
        except OSError:
            if (target / MANIFEST).is_file():
                return  # another process finished first; only complete directories are ever renamed into place
            if not target.is_dir():
                raise
        # An incomplete directory is in the way (Errno 39, directory not empty): rename it aside, then retry.
        aside = tmpfiles.make_temp_dir(target.parent, f"{target.name}.incomplete")
        with contextlib.suppress(FileNotFoundError):  # another process moved it already
            os.replace(target, aside / "old")
        shutil.rmtree(aside, ignore_errors=True)
    raise DatasetError(
        f"could not put the dataset in place at {target}: something keeps recreating it without "
        f"its {MANIFEST}; delete {target} and run again"
    )


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
    manifest = {
        "workload": workload.name,
        "scale": scale.name,
        "seed": seed,
        "data_version": DATA_VERSION,
        "num_samples": scale.num_samples,
        "image_size": list(scale.image_size),
        "target_kind": workload.target_kind,
        "image_format": workload.image_format,
    }
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
        manifest_file = self.root / MANIFEST
        try:
            manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
            self.num_samples = int(manifest["num_samples"])
            self.ext = "jpg" if manifest["image_format"] == "jpg" else "png"
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise self._damaged(manifest_file, exc) from None
        targets_file = self.root / "targets.json"
        self.targets: list[Any] | None = None
        if targets_file.is_file():
            try:
                self.targets = json.loads(targets_file.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise self._damaged(targets_file, exc) from None
            if not isinstance(self.targets, list) or len(self.targets) != self.num_samples:
                raise self._damaged(targets_file, ValueError(f"expected {self.num_samples} targets"))

    def _targets(self) -> list[Any]:
        if self.targets is None:
            raise self._damaged(self.root / "targets.json", FileNotFoundError("missing"))
        return self.targets

    def _damaged(self, path: Path, exc: BaseException) -> DatasetError:
        """The error for a cache file that cannot be read: which file, and how to clear the cache."""
        return DatasetError(
            f"dataset file {path} cannot be read ({type(exc).__name__}: {exc}); the dataset cache is damaged "
            f"(a truncated or hand-edited file). Delete {self.root} (or the whole cache, {self.root.parent.parent}; "
            "$PERFSUITE_CACHE sets where it is) and run again: it is regenerated, byte-identical"
        )

    def __len__(self) -> int:
        return self.num_samples

    def load(self, index: int) -> tuple[np.ndarray, Any]:
        """Decode sample ``index`` from disk: (HxW[xC] uint8 image, numpy target or None)."""
        from PIL import Image

        name = f"{index:06d}"
        mode = "RGB" if self.workload.channels == 3 else "L"
        image_file = self.root / "images" / f"{name}.{self.ext}"
        try:
            with Image.open(image_file) as img:
                image = np.array(img.convert(mode))  # a writable copy, as torch.from_numpy wants
        except (OSError, SyntaxError, ValueError) as exc:  # PIL: truncated, unidentified or missing file
            raise self._damaged(image_file, exc) from None
        kind = self.workload.target_kind
        if kind == "mask":
            mask_file = self.root / "masks" / f"{name}.png"
            try:
                with Image.open(mask_file) as m:
                    m.load()
                    target: Any = np.array(m)
            except (OSError, SyntaxError, ValueError) as exc:
                raise self._damaged(mask_file, exc) from None
        elif kind == "keypoints":
            target = np.asarray(self._targets()[index], dtype=np.float32)
        elif kind == "label":
            target = int(self._targets()[index])
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

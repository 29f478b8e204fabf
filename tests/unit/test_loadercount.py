"""The loader's exact counters: equal when counted again (in this process and in fresh ones), exact on
small Datasets whose work is known, leaving the process as they found it; library versions that differ make
a comparison inconclusive, in `perfsuite compare` and against the committed exact file."""

from __future__ import annotations

import gc
import json
import random
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fixed_fingerprint import FP
from torch.utils.data import DataLoader

from perfsuite.core.results import Metric, Result
from perfsuite.judge.engine import compare_results
from perfsuite.judge.exact import ExactBaselines, check_exact, exact_breakdown, exact_values
from perfsuite.judge.verdict import Outcome
from perfsuite.probes.loadercount import METRICS, count, library_versions, to_metrics

ROOT = Path(__file__).resolve().parents[2]


class Files:
    """Each item reads one file whole and decodes a 20x10 PNG (and loads it again: no second decode)."""

    def __init__(self, root: Path, n: int = 4, sleep_s: float = 0.0) -> None:
        from PIL import Image

        self.png = root / "x.png"
        Image.fromarray(np.zeros((10, 20), dtype=np.uint8)).save(self.png)
        self.blob = root / "blob.bin"
        self.blob.write_bytes(b"x" * 1000)
        self.n, self.sleep_s = n, sleep_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> Any:
        from PIL import Image

        with open(self.blob, "rb") as f:
            f.read()
        with Image.open(self.png) as img:
            img.load()
            img.load()
            pixels = np.array(img)
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return pixels, index


def values(loader: Any) -> dict[str, Any]:
    c = count(loader, 0)
    assert not isinstance(c, str), c
    return {m.name: (m.value, m.detail.get("by")) for m in to_metrics(c, library_versions()) if _exact(m.name)}


def _exact(name: str) -> bool:
    from perfsuite.core import metrics

    return metrics.get(name).exact


def test_known_work_is_counted_exactly_per_sample_and_by_stage(tmp_path: Path) -> None:
    loader = DataLoader(Files(tmp_path, sleep_s=0.001), batch_size=2)
    got = values(loader)
    assert got["loader_decoded_pixels_per_sample"] == (200, {"__getitem__": 200})
    # the blob's 1000 bytes plus the PNG file's, each read once; the counter's own reads of /proc left out
    png = tmp_path.joinpath("x.png").stat().st_size
    assert got["loader_read_bytes_per_sample"] == (1000 + png, {"__getitem__": 1000 + png})
    # and by site: the blob's f.read() line holds its 1000 bytes, the PNG's read at the lines that open and load it
    c = count(loader, 0)
    assert not isinstance(c, str)
    by_site = {m.name: m for m in to_metrics(c, library_versions())}["loader_read_bytes_per_sample"].detail["sites"]
    blob = [e for e in by_site if e["code"] == "f.read()"]
    assert [(e["op"], e["per_sample"]) for e in blob] == [("_io.BufferedReader.read", 1000)]
    assert sum(e["per_sample"] for e in by_site) == 1000 + png
    assert got["loader_blocking_calls_per_sample"][1]["__getitem__: time.sleep"] == 1
    calls = got["loader_calls_per_sample"][1]
    assert calls["__getitem__: test_loadercount.Files.__getitem__"] == 1
    assert calls["__getitem__: PIL.ImageFile.ImageFile.load"] == 3  # twice here, once more in np.array(img)
    assert calls["collate_fn: torch.utils.data._utils.collate.default_collate"] == 0.5  # one per batch of 2
    assert got["loader_output_format"][0] == (
        "__getitem__ -> tuple(ndarray uint8 10x20, int); collate_fn -> list(Tensor uint8 2x10x20, Tensor int64 2)"
    )
    assert got["loader_output_bytes_per_sample"][1] == {"__getitem__": 200, "collate_fn": 208}


def test_counting_again_in_this_process_gives_the_same_counts(tmp_path: Path) -> None:
    loader = DataLoader(Files(tmp_path), batch_size=2)
    assert values(loader) == values(loader)


def test_the_count_leaves_generators_gc_profiler_and_tracemalloc_as_they_were(tmp_path: Path) -> None:
    random.seed(5)
    state = random.getstate()
    count(DataLoader(Files(tmp_path), batch_size=2), 0)
    assert random.getstate() == state
    assert gc.isenabled() and sys.getprofile() is None and not tracemalloc.is_tracing()


def test_a_loader_that_cannot_be_replayed_says_why() -> None:
    assert "not a torch DataLoader" in str(count([1, 2, 3], 1))


FRESH = """
import json, sys
sys.path.insert(0, {root!r})
from perfsuite.core.knobs import Knobs
from perfsuite.harness.pipeline import build_pipeline
from perfsuite.jobs.registry import get_workload
from perfsuite.probes.loadercount import count, library_versions, to_metrics
w = get_workload("face_parsing")
p = build_pipeline(w, w.scale("smoke"), Knobs.from_flat(aug="cpu", num_workers=0, device="cpu"), seed=0)
ms = to_metrics(count(p.loader, 0), library_versions())
print(json.dumps({{m.name: [m.value, m.detail.get("by")] for m in ms if m.name in {names!r}}}, sort_keys=True))
"""


@pytest.mark.slow
def test_fresh_processes_count_the_same() -> None:
    """face_parsing's loader with its CPU augmentation (seeded random transforms), in 3 fresh interpreters."""
    from perfsuite.core import metrics

    names = [n for n in METRICS if metrics.get(n).exact]
    script = FRESH.format(root=str(ROOT), names=names)
    outs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True) for _ in "abc"]
    parsed = [json.loads(o.stdout.strip().splitlines()[-1]) for o in outs]
    assert parsed[0]["loader_calls_per_sample"][0] > 0
    assert parsed[1] == parsed[0] and parsed[2] == parsed[0]


# --------------------------------------------------------------------------- library versions


def counted(calls: float, libraries: dict[str, Any], by: dict[str, float] | None = None) -> Result:
    detail = {"libraries": libraries, "by": by or {"__getitem__: PIL.Image.Image.resize": calls}}
    metrics = {"loader_calls_per_sample": Metric("loader_calls_per_sample", calls, "calls/sample", detail=detail)}
    return Result("w", "smoke", {}, metrics, {}, FP, 8, 1, 0)


LIBS = {"python": "3.11", "Pillow": "13.0.0", "numpy": "2.4.6", "torch": "2.13.0", "torchvision": None}


def test_compare_names_the_stage_and_callable_that_changed() -> None:
    (verdict,) = compare_results(counted(1, LIBS), counted(2, LIBS), "t")
    assert verdict.outcome is Outcome.REGRESSED
    assert "__getitem__: PIL.Image.Image.resize 1 -> 2 calls/sample (x2)" in verdict.message


def test_other_library_versions_make_compare_inconclusive_never_a_regression() -> None:
    (verdict,) = compare_results(counted(1, LIBS), counted(2, {**LIBS, "Pillow": "12.0.0"}), "t")
    assert verdict.outcome is Outcome.INCONCLUSIVE
    assert "Pillow 13.0.0 -> 12.0.0" in verdict.message


def test_the_exact_file_is_headed_by_the_library_versions_and_a_mismatch_is_inconclusive(tmp_path: Path) -> None:
    store = ExactBaselines(tmp_path, "cpu__torch-2.13")
    base = counted(1, library_versions())
    store.record("t", exact_values(base), exact_breakdown(base))
    store.save()
    again = ExactBaselines.open(tmp_path, "cpu__torch-2.13")
    assert again.libraries == library_versions()
    head = counted(2, library_versions())
    (same,) = check_exact(
        again.expected("t"), head, "t", "f.json", breakdown=again.expected_breakdown("t"), libraries=again.libraries
    )
    assert same.outcome is Outcome.REGRESSED and "__getitem__: PIL.Image.Image.resize 1 -> 2" in same.message
    other = {**library_versions(), "numpy": "1.0.0"}
    (moved,) = check_exact(again.expected("t"), counted(2, other), "t", "f.json", libraries=again.libraries)
    assert moved.outcome is Outcome.INCONCLUSIVE and "numpy" in moved.message and "1.0.0" in moved.message


def test_a_marker_bounds_a_loader_counter() -> None:
    from perfsuite.judge.thresholds import check_thresholds, parse_thresholds

    m = Metric("loader_decoded_pixels_per_sample", 16384, "pixels/sample", detail={"by": {"__getitem__": 16384}})
    result = Result("w", "smoke", {}, {m.name: m}, {}, FP, 8, 1, 0)
    (over,) = check_thresholds(result, "t", parse_thresholds({"max_loader_decoded_pixels_per_sample": 4096}))
    (within,) = check_thresholds(result, "t", parse_thresholds({"max_loader_decoded_pixels_per_sample": 16384}))
    assert over.failed and not within.failed


def test_the_order_pil_learnt_its_formats_in_does_not_change_the_counts(tmp_path: Path) -> None:
    """Image.open asks the formats in the order their plugins were imported; an H100 image's two sessions
    differed there (0 and 2 BmpImagePlugin._accept calls per sample). Counted in one fixed order, and the
    process's own order is put back afterwards."""
    from PIL import Image

    loader = DataLoader(Files(tmp_path), batch_size=2)
    first = values(loader)
    saved = list(Image.ID)
    try:
        Image.ID[:] = ["PNG"] + [f for f in saved if f != "PNG"]  # PngImagePlugin imported before the others
        png_first = list(Image.ID)
        assert values(loader) == first
        assert Image.ID[: len(png_first)] == png_first  # the process's order, as it was
    finally:
        Image.ID[:] = saved
    assert "PIL.BmpImagePlugin._accept" in " ".join(first["loader_calls_per_sample"][1])

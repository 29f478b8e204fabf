"""Shared pieces of the plugin tests: the tiny workload's source and how inner sessions run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

TINY_WORKLOAD = """
import numpy as np
import torch.nn.functional as F
from torch import nn

from perfsuite.augment.recipe import Recipe
from perfsuite.jobs.workload import Sample, Scale, Workload
from perfsuite.jobs.registry import register_workload


@register_workload
class Tiny(Workload):
    name = "plugin_tiny"
    summary = "16x16 grey, two classes, a linear model (plugin tests)"
    seed_doc = "test"
    target_kind = "label"
    channels = 1
    image_format = "png"
    num_classes = 2
    scales = {
        "smoke": Scale("smoke", (16, 16), num_samples=8, batch_size=4),
        "full": Scale("full", (16, 16), num_samples=8, batch_size=4),
    }

    def generate(self, index, rng, scale):
        return Sample(image=rng.integers(0, 255, size=scale.image_size, dtype=np.uint8), target=index % 2)

    def recipe(self):
        return Recipe().only("flip")

    def build_model(self, scale):
        return nn.Sequential(nn.Flatten(), nn.Linear(16 * 16, 2))

    def loss(self, output, target):
        return F.cross_entropy(output, target)
"""

# Fast defaults for every inner session: few steps, no worker processes.
FAST = ("-p", "perfsuite", "--perfsuite-steps", "5", "--perfsuite-warmup", "1", "-p", "no:cacheprovider")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess(*FAST, *args)


def baseline_files(root: Path) -> list[Path]:
    return sorted((root / "baselines").rglob("*.json"))


def read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def report_results(path: Path) -> list[dict]:
    """The verdicts of a --perfsuite-report-json file (an object: schema_version, status, results)."""
    data = read_json(path)
    assert data["schema_version"] == 1 and data["status"] in ("complete", "partial")
    return data["results"]


def unfolded(result: pytest.RunResult) -> pytest.LineMatcher:
    """The session's output with perfsuite's folded summary lines joined again (the plugin folds each
    ``perfsuite: ...``, ``unavailable: ...`` and ``GPU telemetry: ...`` line to the terminal's width, later parts
    indented by two spaces), to match a line whole."""
    lines: list[str] = []
    heads = ("perfsuite: ", "unavailable:", "GPU telemetry: ")
    for line in result.outlines:
        folded = line.startswith("  ") and not line.startswith("   ") and lines and lines[-1].startswith(heads)
        if folded and not line.lstrip().startswith("metric "):  # a verdict table's header follows its summary line
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
    return pytest.LineMatcher(lines)

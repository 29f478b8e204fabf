"""Causes in the seeds' terms, read from the metric and the run's knobs (no pytest session needed)."""

from __future__ import annotations

import pytest

from perfsuite.core.results import Fingerprint, Metric, Result
from perfsuite.judge import causes
from perfsuite.judge.thresholds import AtLeast, AtMost, Equals

FP = Fingerprint("cpu", None, 0, None, None, "2.13.0", None, "3.11", "cpu", 2, "linux")


def result(metrics: dict, **knobs) -> Result:
    flat = {
        "aug": "gpu",
        "num_workers": 2,
        "pin_memory": False,
        "persistent_workers": False,
        "amp": None,
        "compile": None,
        "log_interval": 0,
        "eval_interval": 0,
        "device": "cpu",
        **knobs,
    }
    ms = {name: value if isinstance(value, Metric) else Metric(name, value) for name, value in metrics.items()}
    return Result("w", "smoke", flat, ms, {}, FP, 8, 5, 1)


@pytest.mark.parametrize(
    ("threshold", "metrics", "knobs", "expected"),
    [
        (
            AtMost("data_wait_frac", 0.05),
            {"data_wait_frac": 0.62},
            {"aug": "cpu"},
            "data-bound: data_wait_frac 0.62 > 0.05 (augmentation on CPU workers, num_workers=2)",
        ),
        (
            AtMost("data_wait_frac", 0.05),
            {"data_wait_frac": 0.62},
            {"aug": "gpu", "device": "cuda", "num_workers": 0},
            "data-bound: data_wait_frac 0.62 > 0.05 (num_workers=0: batches decode in the training process, "
            "pin_memory=False)",
        ),
        (
            AtLeast("amp_lowp_frac", 0.9),
            {"amp_lowp_frac": 0.0},
            {},
            "AMP not engaged: amp_lowp_frac 0 < 0.9 (amp=None: training runs in FP32",
        ),
        (
            Equals("amp_engaged", True),
            {"amp_engaged": False},
            {"amp": "bf16"},
            "AMP not engaged: amp_engaged False != True (amp='bf16' is set but few ops ran in low precision",
        ),
        (
            AtMost("syncs_per_step", 0),
            {"syncs_per_step": 1},
            {"log_interval": 1},
            "host syncs: syncs_per_step 1 > 0 (loss.item() in the training step, once per step",
        ),
        (
            AtMost("syncs_per_step", 0),
            {
                "syncs_per_step": Metric(
                    "syncs_per_step",
                    5.0,
                    detail={
                        "sites": [
                            {
                                "op": "Tensor.__bool__",
                                "site": "/venv/lib/python3.11/site-packages/kornia/color_jiggle.py:98",
                                "per_step": 4.0,
                            }
                        ]
                    },
                )
            },
            {},
            "host syncs: syncs_per_step 5 > 0 (Tensor.__bool__ at kornia/color_jiggle.py:98, 4 per step)",
        ),
        (
            AtLeast("gpu_util", 0.85),
            {"gpu_util": 0.3, "data_wait_frac": 0.5},
            {"aug": "cpu", "device": "cuda"},
            "GPU underfed: gpu_util 0.3 < 0.85 (augmentation on CPU workers, num_workers=2, pin_memory=False, "
            "amp=None: training runs in FP32",
        ),
        (
            AtMost("graph_breaks", 0),
            {"graph_breaks": Metric("graph_breaks", 2, detail={"reasons": [{"reason": "Tensor.item() call"}]})},
            {"compile": "default"},
            "graph breaks: graph_breaks 2 > 0 (Tensor.item() call)",
        ),
    ],
    ids=[
        "cpu-aug",
        "no-workers-on-cuda",
        "fp32",
        "amp-set-not-engaged",
        "loss-item",
        "probe-sites",
        "underfed",
        "graph-breaks",
    ],
)
def test_failure_lines_name_metric_value_bound_and_cause(threshold, metrics, knobs, expected):
    r = result(metrics, **knobs)
    verdict = threshold.check(r, "t.py::test_x")
    assert verdict.failed
    assert causes.failure_line(verdict, causes.explain(verdict, r)).startswith(expected)


def test_metrics_without_a_known_cause_keep_the_bare_message():
    r = result({"samples_per_s": 1.0})
    verdict = AtLeast("samples_per_s", 10).check(r, "t")
    verdict = verdict.__class__(**{**verdict.__dict__, "metric": "something_new"})
    assert causes.explain(verdict, r) is None
    assert causes.failure_line(verdict, None) == verdict.message

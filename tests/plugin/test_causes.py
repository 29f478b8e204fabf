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


# --------------------------------------------------------------------------- a user's own job, in its own terms

STEP_KNOB_WORDS = ("amp=", "compile=", "log_interval", "eval_interval", "channels_last", "tf32", "fused", "FP32")


def user_result(step_ms, fetch_ms, syncs=0.0, sites=(), **metrics) -> Result:
    """A user's job as perfsuite records it: loader knobs read back, step knobs absent and marked not applied."""
    from perfsuite.jobs.contract import NOT_APPLIED, STEP_KNOBS, USER

    knobs = {"batch_size": 4, "num_workers": 2, "pin_memory": False, "persistent_workers": False, "device": "cpu"}
    sources = {**dict.fromkeys(knobs, USER), **dict.fromkeys(STEP_KNOBS, NOT_APPLIED)}
    ms = {
        "step_ms": Metric("step_ms", sorted(step_ms)[len(step_ms) // 2], "ms"),
        "syncs_per_step": Metric("syncs_per_step", syncs, detail={"sites": list(sites)}),
        "data_wait_frac": Metric("data_wait_frac", sum(fetch_ms) / sum(step_ms)),
        **{name: Metric(name, value) for name, value in metrics.items()},
    }
    samples = {"step_ms": list(step_ms), "fetch_ms": list(fetch_ms)}
    return Result("job", "smoke", knobs, ms, samples, FP, 4, len(step_ms), 1, knob_sources=sources)


def judged(base: Result, head: Result, metric: str) -> str:
    from perfsuite.judge.engine import compare_results

    (verdict,) = [v for v in compare_results(base, head, "t") if v.metric == metric]
    assert verdict.failed, verdict
    return f"{verdict.message} ({verdict.cause})"


def test_a_slowdown_inside_a_users_step_is_placed_there_with_what_was_measured():
    site = {"op": "Tensor.tolist", "site": "train.py:88", "per_step": 0.1, "every": 10}
    base = user_result([20.0, 21, 20, 22, 21, 20, 21, 20], [9.0, 10, 9, 10, 9, 10, 9, 10], syncs=1.0)
    head = user_result([40.0, 41, 40, 42, 41, 40, 41, 40], [9.0, 10, 9, 10, 9, 10, 9, 10], syncs=1.1, sites=[site])
    line = judged(base, head, "step_ms")
    assert "time moved into the step: the step's compute 11 -> 31 ms/step (+20)" in line
    assert "syncs_per_step 1 -> 1.1 (Tensor.tolist at train.py:88 +0.1/step (every 10 steps, new))" in line
    assert not [w for w in STEP_KNOB_WORDS if w in line], line
    assert "augmentation on CPU workers" not in line and "num_workers" not in line  # the loader did not move


def test_a_slowdown_in_a_users_loader_is_placed_in_data_wait_with_its_loader_knobs():
    base = user_result([20.0, 21, 20, 22, 21, 20, 21, 20], [9.0, 10, 9, 10, 9, 10, 9, 10])
    head = user_result([40.0, 41, 40, 42, 41, 40, 41, 40], [29.0, 30, 29, 30, 29, 30, 29, 30])
    line = judged(base, head, "step_ms")
    assert "time moved into data wait: fetch 9.5 -> 29.5 ms/step (+20)" in line
    assert "num_workers=2" in line and not [w for w in STEP_KNOB_WORDS if w in line], line


def test_the_loader_ledger_is_read_by_name_when_a_result_has_it():
    base = user_result([20.0] * 8, [10.0] * 8, loader_cpu_ms_per_sample=2.0)
    head = user_result([40.0] * 7 + [41.0], [30.0] * 7 + [31.0], loader_cpu_ms_per_sample=7.0)
    assert "loader_cpu_ms_per_sample 2 -> 7" in judged(base, head, "step_ms")


@pytest.mark.parametrize(
    ("threshold", "metrics"),
    [
        (AtLeast("amp_lowp_frac", 0.9), {"amp_lowp_frac": 0.0}),
        (Equals("amp_engaged", True), {"amp_engaged": False}),
        (AtMost("graph_breaks", 0), {"graph_breaks": 3}),
        (AtMost("syncs_per_step", 0), {}),
        (AtMost("compile_s", 1), {"compile_s": 30.0}),
        (AtMost("label_violations", 0), {"label_violations": 12}),
    ],
    ids=["amp-frac", "amp-engaged", "graph-breaks", "syncs", "compile-time", "labels"],
)
def test_a_users_failure_line_names_no_knob_perfsuite_did_not_set(threshold, metrics):
    site = {"op": "Tensor.item", "site": "train.py:57", "per_step": 1.0}
    r = user_result([20.0] * 6, [5.0] * 6, syncs=1.0, sites=[site], **metrics)
    verdict = threshold.check(r, "t")
    assert verdict.failed
    line = causes.failure_line(verdict, causes.explain(verdict, r))
    assert not [w for w in STEP_KNOB_WORDS if w in line], line
    assert "aug=" not in line  # the job never declared where its augmentation runs

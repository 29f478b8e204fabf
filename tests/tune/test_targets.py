"""What tune runs: a planted out-of-memory caught as such, bad input refused, a perf test run with its knobs set."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import perfsuite
from perfsuite.core.knobs import Knobs
from perfsuite.tools.tune import InProcessTarget, PytestTarget, TuneError
from perfsuite.tools.tune.targets import is_oom

DATA = TensorDataset(torch.ones(64, 8), torch.zeros(64, dtype=torch.long))


def planted_oom(device: str = "cpu") -> perfsuite.Job:
    """A step that runs out of memory above 8 samples a batch, as CUDA would say it."""

    def step(batch):
        if batch[0].shape[0] > 8:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (planted)")
        return batch[0].sum()

    return perfsuite.Job(step=step, dataset=DATA, loader_kwargs={"batch_size": 4}, name="planted_oom")


def handed_loader(device: str = "cpu") -> perfsuite.Job:
    return perfsuite.Job(step=lambda b: b[0].sum(), loader=DataLoader(DATA, batch_size=4), name="handed")


def target(factory) -> InProcessTarget:
    return InProcessTarget(factory, "job", "smoke", Knobs(), steps=2, warmup=0, sol_steps=0)


def test_a_planted_out_of_memory_is_caught_and_told_apart() -> None:
    t = target(planted_oom)
    fits = t.run({"batch_size": 8, "num_workers": 0}, reference=True)
    assert fits.ok and fits.batch_bytes == 8 * 8 * 4 + 8 * 8  # float32 features, int64 labels
    out = t.run({"batch_size": 16, "num_workers": 0})
    assert not out.ok and out.oom and "OutOfMemoryError" in (out.error or "")
    assert t.run({"batch_size": 8, "num_workers": 0}).ok  # the search goes on after it


def test_a_loader_perfsuite_cannot_rebuild_is_bad_input_saying_what_to_write() -> None:
    with pytest.raises(TuneError, match="does not rebuild a DataLoader it was handed"):
        target(handed_loader).run({"num_workers": 2})


@pytest.mark.parametrize(
    ("exc", "oom"),
    [
        (MemoryError(), True),
        (torch.OutOfMemoryError("x"), True),
        (RuntimeError("DataLoader worker (pid 12) is killed by signal: Killed. "), True),
        (RuntimeError("CUDA error: out of memory"), True),
        (RuntimeError("shape mismatch"), False),
        (ValueError("out of memory"), False),
    ],
    ids=["memoryerror", "torch-oom", "worker-killed", "cuda-text", "other-runtime", "not-runtime"],
)
def test_out_of_memory_is_recognised_by_type_and_by_what_torch_says(exc, oom) -> None:
    assert is_oom(exc) is oom


def test_a_perf_test_runs_in_its_own_pytest_with_the_knobs_set_over_its_own(tmp_path: Path) -> None:
    t = PytestTarget("tests/perf/test_loader.py::test_loader_settings[face_parsing-seed]", "smoke", "cpu")
    cmd = t.command({"num_workers": 2, "prefetch_factor": None, "persistent_workers": True}, tmp_path)
    joined = " ".join(cmd)
    assert cmd[1:4] == ["-m", "pytest", t.nodeid]
    assert "--perfsuite-knob num_workers=2" in joined and "--perfsuite-knob prefetch_factor=none" in joined
    assert "--perfsuite-knob persistent_workers=true" in joined
    assert f"--perfsuite-save --perfsuite-baselines {tmp_path}" in joined
    assert t.test_key == t.nodeid  # its thresholds go under its own id
    assert "--perfsuite-observe-steps 0" in joined  # a trial skips the observed steps
    assert "--perfsuite-observe-steps" not in " ".join(t.command(None, tmp_path, reference=True))

"""The after-window work on spare cores (perfsuite.core.forked): a call in a forked child sends its value back or
says why it could not; the loader count counts the same in a child as in this process, exactly; the replay dealt
to children times the same batches with the same stages; a Dataset that cannot run in a child is done here."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import perfsuite
from perfsuite.core import forked
from perfsuite.core.knobs import Knobs
from perfsuite.harness.runner import RunSpec, run
from perfsuite.probes import stages
from perfsuite.probes.loadercount import Counts, count, library_versions, to_metrics


def _fails() -> None:
    raise ValueError("only in the child")


def test_a_child_sends_its_value_back_or_says_why_not() -> None:
    assert forked.Forked(sum, [1, 2, 3]).result() == 6
    with pytest.raises(forked.ChildFailed, match="ValueError: only in the child"):
        forked.Forked(_fails).result()
    with pytest.raises(forked.ChildFailed, match="without a result"):
        forked.Forked(os._exit, 3).result()
    child = forked.Forked(sum, [4])
    assert child.result() == 4
    child.cancel()  # after the result: nothing to stop
    assert child.result() == 4


def test_a_wait_interrupted_by_a_deadline_stops_the_child_and_reaps_it() -> None:
    """The watchdog raises in the main thread on SIGALRM; a child that hangs must not hang the run after it."""
    import time

    from alarm import raising_after

    child = forked.Forked(time.sleep, 60)
    with pytest.raises(TimeoutError), raising_after(0.2, TimeoutError):
        child.result()
    with pytest.raises(ChildProcessError):
        os.waitpid(child.pid, os.WNOHANG)  # reaped: no such child any more
    with pytest.raises(forked.ChildFailed, match="cancelled"):
        child.result()


def test_the_processes_follow_the_usable_cores_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (forked.ENV, *forked.SHARERS):
        monkeypatch.delenv(name, raising=False)
    assert forked.processes(usable=2) == 1  # a 2-core CI runner: everything stays in the training process
    assert forked.processes(usable=forked.MIN_CORES - 1) == 1
    assert forked.processes(usable=16) == 16  # the H200's host
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")  # two ranks on the node: half the cores each
    assert forked.processes(usable=16) == 8
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "8")  # eight workers of a session: 2 cores each, too few
    assert forked.processes(usable=16) == 1
    monkeypatch.setenv(forked.ENV, "3")
    assert forked.processes(usable=2) == 3
    monkeypatch.setenv(forked.ENV, "many")
    assert forked.processes(usable=16) == 1


def _exact(counts: Any) -> dict[str, Any]:
    from perfsuite.core import metrics

    assert isinstance(counts, Counts), counts
    return {
        m.name: (m.value, m.detail.get("by"), m.detail.get("sites"))
        for m in to_metrics(counts, library_versions())
        if metrics.get(m.name).exact
    }


@pytest.fixture(scope="module")
def face_loader() -> Any:
    """face_parsing at smoke scale with its CPU augmentation: real PNG files, seeded random transforms."""
    from perfsuite.harness.pipeline import build_pipeline
    from perfsuite.jobs.registry import get_workload

    w = get_workload("face_parsing")
    knobs = Knobs.from_flat(aug="cpu", num_workers=0, device="cpu")
    return build_pipeline(w, w.scale("smoke"), knobs, seed=0).loader


def test_a_count_forked_before_the_replay_equals_one_forked_after_it(face_loader: Any) -> None:
    """With cores to spare the count's child starts before the ledger's replay; without, after it: every exact
    counter, its stages and its sites, the same."""
    before = forked.Forked(count, face_loader, 0)
    stages.replay(face_loader, 0, batches=5, repeats=1, budget_s=0.0)
    after = forked.Forked(count, face_loader, 0)
    assert _exact(before.result()) == _exact(after.result())
    assert _exact(after.result())["loader_calls_per_sample"][0] > 0


class Heavy:
    """Images decoded from real PNG files, with a per-sample transform; fails in any process but its maker's
    when ``parent_only``."""

    def __init__(self, root: Path, n: int = 24, parent_only: bool = False) -> None:
        from PIL import Image

        self.paths = []
        for k in range(n):
            path = root / f"{k}.png"
            Image.fromarray(np.full((32, 48), k, dtype=np.uint8)).save(path)
            self.paths.append(path)
        self.maker = os.getpid() if parent_only else None
        self.transform = lambda x: x.flip(-1)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> torch.Tensor:
        from PIL import Image

        if self.maker is not None and os.getpid() != self.maker:
            raise RuntimeError("this Dataset works in the process that made it only")
        with Image.open(self.paths[index]) as img:
            pixels = torch.from_numpy(np.array(img)).float()
        return self.transform(pixels)


def test_the_replay_dealt_to_children_times_the_same_batches_and_stages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loader = DataLoader(Heavy(tmp_path), batch_size=4)
    monkeypatch.setenv(forked.ENV, "1")
    here = stages.replay(loader, 0, batches=6, repeats=2, budget_s=60.0)
    monkeypatch.setenv(forked.ENV, "6")  # 3 children: 6 processes less this one and the count's two children
    monkeypatch.setattr(stages, "PARALLEL_MIN_S", 0.0)
    there = stages.replay(loader, 0, batches=6, repeats=2, budget_s=60.0)
    assert isinstance(here, stages.Replay) and isinstance(there, stages.Replay)
    assert (here.processes, there.processes) == (1, 3)
    assert len(there.per_batch_ms) == len(here.per_batch_ms) == 6
    assert set(there.stages) == set(here.stages) == {"__getitem__", "transform", "collate_fn"}
    assert all(len(v) == 6 and all(x > 0 for x in v) for v in there.stages.values())
    assert len(there.cal_ms) == 6 and there.cpu_s > 0


def test_a_dataset_that_fails_in_a_child_is_replayed_and_counted_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loader = DataLoader(Heavy(tmp_path, parent_only=True), batch_size=4)
    monkeypatch.setenv(forked.ENV, "5")
    monkeypatch.setattr(stages, "PARALLEL_MIN_S", 0.0)
    rep = stages.replay(loader, 0, batches=6, repeats=1, budget_s=60.0)
    assert isinstance(rep, stages.Replay) and rep.processes == 1 and len(rep.per_batch_ms) == 6
    job = perfsuite.Job(step=lambda batch: batch.sum(), loader=loader)
    result = run(RunSpec(job, steps=2, warmup=1, observe_steps=0, sol_steps=0))
    detail = result.metric("loader_offcpu_ms_per_sample").detail
    assert detail["counted_in"].startswith("this process (the forked child failed: RuntimeError: this Dataset")


def _tiny_job(root: Path) -> perfsuite.Job:
    model = torch.nn.Linear(48, 1)
    loader = DataLoader(Heavy(root, n=16), batch_size=4)

    def step(batch: torch.Tensor) -> torch.Tensor:
        loss = model(batch).mean()
        loss.backward()
        return loss

    return perfsuite.Job(step=step, loader=loader, model=model)


def test_a_run_on_spare_cores_judges_the_same_exact_counters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same job run with everything in this process and with the after-window work on 4 processes."""

    def exact_of(env: str) -> tuple[dict[str, Any], str]:
        from perfsuite.core import metrics

        monkeypatch.setenv(forked.ENV, env)
        result = run(RunSpec(_tiny_job(tmp_path), steps=2, warmup=1, observe_steps=0, sol_steps=0))
        got = {n: m.value for n, m in result.metrics.items() if m.available and metrics.get(n).exact}
        return got, result.metric("loader_offcpu_ms_per_sample").detail["counted_in"]

    one, where_one = exact_of("1")
    spare, where_spare = exact_of("4")
    assert (where_one, where_spare) == ("1 forked child process(es)", "2 forked child process(es)")
    assert "loader_calls_per_sample" in one and spare == one


def test_the_count_does_not_depend_on_what_the_window_drew_from_a_per_process_generator() -> None:
    """perfsuite's CPU augmentation keys its generator on the process (and worker), as worker-aware transforms
    do. With ``num_workers=0`` the training process draws from it through the window; counted in a fresh child
    the stream starts from its seed, so the count is the same whether the window drew 1 batch or 5."""
    from perfsuite.harness.pipeline import build_pipeline
    from perfsuite.jobs.registry import get_workload

    def counted_after(batches: int) -> dict[str, Any]:
        w = get_workload("gray_classifier")
        knobs = Knobs.from_flat(aug="cpu", num_workers=0, device="cpu")
        loader = build_pipeline(w, w.scale("smoke"), knobs, seed=0).loader
        for _, _ in zip(range(batches), loader, strict=False):
            pass
        return _exact(forked.Forked(count, loader, 0).result())

    assert counted_after(1) == counted_after(5)


def test_the_count_split_over_two_children_equals_the_count_in_one(face_loader: Any) -> None:
    """The first counted pass in one child; the allocations' and the second counted pass in another (a host with
    3 processes or more)."""
    from perfsuite.probes.loadercount import SPLIT_PASSES, combine, count_passes

    children = [forked.Forked(count_passes, face_loader, 0, 2, 0, passes) for passes in SPLIT_PASSES]
    split = combine([child.result() for child in children])
    whole = forked.Forked(count, face_loader, 0).result()
    assert _exact(split) == _exact(whole)
    assert isinstance(split, Counts) and isinstance(whole, Counts) and len(split.pass_cpu_s) == 5
    # the allocations are judged within 5% of their total (perfsuite.core.metrics): here traced after one pass, not
    # three (a stage of a few kB, the collate's, moves by 10% between processes; the total by 0.1%)
    assert set(split.alloc_bytes) == set(whole.alloc_bytes)
    assert sum(split.alloc_bytes.values()) == pytest.approx(sum(whole.alloc_bytes.values()), rel=0.05)


def test_a_childs_batch_comes_back_as_its_shapes_and_dtypes_and_is_rebuilt_with_their_bytes() -> None:
    batch = {"image": torch.ones(2, 3, 4, dtype=torch.uint8), "rest": [torch.zeros(2), 7, "name"]}
    spec = stages._spec(batch)
    assert spec == {"image": ("tensor", (2, 3, 4), "uint8"), "rest": [("tensor", (2,), "float32"), None, None]}
    like = stages._like(spec)
    assert like["image"].shape == (2, 3, 4) and like["image"].dtype == torch.uint8
    assert like["rest"][0].nbytes == batch["rest"][0].nbytes


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: pinning and the host-to-device copy")
def test_on_cuda_the_children_replay_is_pinned_and_copied_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loader = DataLoader(Heavy(tmp_path), batch_size=4, pin_memory=True)
    monkeypatch.setenv(forked.ENV, "6")
    monkeypatch.setattr(stages, "PARALLEL_MIN_S", 0.0)
    rep = stages.replay(loader, 0, torch.device("cuda"), batches=6, repeats=2, budget_s=60.0)
    assert isinstance(rep, stages.Replay) and rep.processes == 3
    assert len(rep.stages["pin_memory"]) == len(rep.h2d_ms) == 6
    assert all(x > 0 for x in rep.stages["pin_memory"])


_NOBODY_SEEDS = random.Random()  # a module's generator: the count's seeding of the global ones does not reach it


class Unseeded:
    """Each item makes a number of calls drawn from a generator nobody seeds: its count is not reproducible."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> torch.Tensor:
        for _ in range(_NOBODY_SEEDS.randrange(1, 40)):
            abs(index)
        return torch.zeros(2)


def test_a_counter_that_does_not_repeat_is_found_in_one_process_in_one_child_and_split_between_two() -> None:
    """The split keeps what the two counted passes are compared for: the second starts one pass after the first."""
    from perfsuite.probes.loadercount import PASSES, SPLIT_PASSES, combine, count_passes

    loader = DataLoader(Unseeded(), batch_size=4)
    here = count(loader, 0)
    one = combine([forked.Forked(count_passes, loader, 0, 2, 0, PASSES).result()])
    split = combine([forked.Forked(count_passes, loader, 0, 2, 0, p).result() for p in SPLIT_PASSES])
    for counts in (here, one, split):
        assert isinstance(counts, Counts)
        assert "loader_calls_per_sample" in counts.moved, counts.moved
        assert "builtins.abs" in counts.moved["loader_calls_per_sample"]

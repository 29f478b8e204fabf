"""Planning a launch on several ranks: devices (no shared GPU unless asked), threads, what crosses into the ranks.

No rank starts here; tests/faults/test_ddp.py and test_ddp_failures.py launch real ones.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from perfsuite.errors import DeviceError, JobError, PerfsuiteError
from perfsuite.harness.ranks.ddp import backend_for, plan_threads, rank_devices
from perfsuite.harness.ranks.launch import RankRun, plan_launch, rank_run, reference, resolve_reference
from perfsuite.harness.runner import RunSpec


def test_cpu_ranks_use_gloo_and_cuda_ranks_nccl_one_gpu_each() -> None:
    assert rank_devices("cpu", 3, gpu_count=0) == ["cpu"] * 3
    assert rank_devices("cuda", 2, gpu_count=4) == ["cuda:0", "cuda:1"]
    assert backend_for("cpu") == "gloo" and backend_for("cuda:1") == "nccl"


@pytest.mark.parametrize(
    ("device", "nproc", "gpus", "message"),
    [
        ("cuda", 4, 2, "torch sees 2 CUDA device(s): ranks would share GPUs"),
        ("cuda:1", 2, 4, "would put every rank on GPU 1"),
        ("cuda", 2, 0, "torch sees no CUDA device"),
        ("cpu", 0, 0, "write 1 or more"),
    ],
)
def test_ranks_that_would_share_a_gpu_are_refused_with_what_to_write(device, nproc, gpus, message) -> None:
    with pytest.raises(DeviceError) as info:
        rank_devices(device, nproc, gpus)
    assert message in str(info.value)
    if gpus:
        assert "share_gpus=True" in str(info.value)


def test_sharing_a_gpu_when_asked_for() -> None:
    assert rank_devices("cuda", 4, gpu_count=2, share_gpus=True) == ["cuda:0", "cuda:1", "cuda:0", "cuda:1"]
    assert rank_devices("cuda:1", 2, gpu_count=4, share_gpus=True) == ["cuda:1", "cuda:1"]


@pytest.mark.parametrize(
    ("nproc", "workers", "cores", "threads"),
    [(2, 0, 2, 1), (2, 0, 16, 8), (4, 2, 16, 2), (4, 8, 16, 1), (1, 0, 2, 2), (3, 0, 2, 1)],
)
def test_threads_per_rank_share_the_cores_with_the_workers(nproc, workers, cores, threads) -> None:
    assert plan_threads(nproc, workers, cores) == threads


def test_plan_launch_refuses_nonsense_counts() -> None:
    with pytest.raises(PerfsuiteError, match="nproc_per_node=0"):
        plan_launch(0, "cpu", cores=2)
    with pytest.raises(PerfsuiteError, match="omp_threads=0"):
        plan_launch(2, "cpu", omp_threads=0, cores=2)
    plan = plan_launch(2, "cpu", workers=1, cores=8, gpu_count=0)
    assert plan.omp_threads == 3 and plan.backend == "gloo" and plan.devices == ("cpu", "cpu")


def test_a_lambda_or_a_job_object_cannot_cross_into_the_ranks() -> None:
    import torch

    import perfsuite

    with pytest.raises(PerfsuiteError, match="define it at module level"):
        reference(lambda device: None, "the workload")
    job = perfsuite.Job(step=lambda b: b, loader=[torch.zeros(1)])
    with pytest.raises(JobError, match="pass the job factory instead"):
        reference(job, "the workload")


def test_a_module_level_function_is_found_again_by_module_or_by_file(tmp_path, monkeypatch) -> None:
    assert resolve_reference(reference(rank_devices, "f")) is rank_devices
    source = tmp_path / "my_jobs.py"
    source.write_text(textwrap.dedent("def make(device):\n    return device\n"), encoding="utf-8")
    ref = {"module": "not_importable_here", "qualname": "make", "file": str(source)}
    assert resolve_reference(ref)("cpu") == "cpu"
    with pytest.raises(PerfsuiteError, match="put it in an importable module"):
        resolve_reference({"module": "nowhere", "qualname": "make", "file": str(tmp_path / "missing.py")})


def test_a_rank_run_is_plain_json_and_rebuilds_the_spec_in_each_rank() -> None:
    from perfsuite.core.knobs import Knobs

    spec = RunSpec("face_parsing", "smoke", Knobs.from_flat(device="cpu", num_workers=0), steps=4, warmup=1)
    run = rank_run(spec, faults=("set_epoch_missing",))
    again = RankRun.from_dict(json.loads(json.dumps(run.to_dict())))
    assert again == run and again.faults == ("set_epoch_missing",) and not again.job
    rebuilt = again.spec(rank=1, world=2, device="cpu")
    assert rebuilt.steps == 4 and rebuilt.knobs.loader.num_workers == 0 and rebuilt.mutate is not None


def test_faults_are_for_reference_workloads_only() -> None:
    spec = RunSpec(_factory)
    with pytest.raises(PerfsuiteError, match="a user's job runs its own code"):
        rank_run(spec, faults=("set_epoch_missing",))


def _factory(device):  # a module-level job factory (never called here)
    raise AssertionError


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--nproc-per-node", "0"], "0 is below 1"),
        (["--nproc-per-node", "two"], "is not a whole number"),
        (["--scaling-rounds", "-1"], "-1 is below 0"),
    ],
)
def test_cli_refuses_bad_rank_flags_with_exit_2(argv, message, capsys) -> None:
    from perfsuite.cli.main import main

    with pytest.raises(SystemExit) as info:
        main(["run", "face_parsing", *argv])
    assert info.value.code == 2 and message in capsys.readouterr().err


def test_cli_scaling_needs_two_ranks_and_says_so(capsys) -> None:
    from perfsuite.cli.main import main

    assert main(["run", "face_parsing", "--scaling-rounds", "3", "--device", "cpu"]) == 2
    assert "write --nproc-per-node 2 or more" in capsys.readouterr().err  # the CLI names its flag


def test_cli_prints_each_rank(monkeypatch, capsys) -> None:
    """`perfsuite run ... --nproc-per-node 2` hands the spec to the launcher and prints the ranks it got back."""
    from test_rank_merge import _report

    from perfsuite.cli.main import main
    from perfsuite.harness.ranks import launch as distributed
    from perfsuite.harness.ranks.merge import merge

    seen = {}

    def fake_scaling(spec, nproc, rounds, **kw):
        seen.update(spec=spec, nproc=nproc, rounds=rounds, **kw)
        return merge([_report(0), _report(1)], cores=2)

    monkeypatch.setattr(distributed, "scaling", fake_scaling)
    assert main(["run", "face_parsing", "--nproc-per-node", "2", "--device", "cpu", "--omp-threads", "1"]) == 0
    out = capsys.readouterr().out
    assert seen["nproc"] == 2 and seen["rounds"] == 0 and seen["omp_threads"] == 1
    assert seen["spec"].workload == "face_parsing" and seen["spec"].scale == "smoke"
    assert "2 ranks (OMP_NUM_THREADS=1)" in out
    assert "step p50 ms" in out and "straggler_wait_frac" in out
    rows = [line.split() for line in out.splitlines() if line.split()[:2] in (["0", "100"], ["1", "101"])]
    assert len(rows) == 2  # one row per rank: rank, pid, threads, workers, p50, p95, data-wait, syncs

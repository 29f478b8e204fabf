"""perfsuite exec --nproc-per-node: a DDP script launched unchanged through torchrun, its ranks merged into one Result.

The script (tests/data/scripts/ddp/train_ddp.py) calls init_process_group itself, as under torchrun;
planted: a slow rank (a straggler), a rank that raises, a rank that hangs.
"""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest

import perfsuite
from perfsuite import RunSpec, Script
from perfsuite.cli.main import main
from perfsuite.errors import RankError, RunTimeout
from perfsuite.harness.ranks.script import run_script_distributed
from perfsuite.harness.watchdog import WatchdogConfig

pytestmark = pytest.mark.slow

DDP = Path(__file__).resolve().parents[1] / "data" / "scripts" / "ddp" / "train_ddp.py"
SHORT = WatchdogConfig(loader_timeout_s=10.0, warmup_s=60.0, floor_s=3.0, factor=3.0, grace_s=0.5)
LENGTHS = ["--steps", "4", "--warmup", "1", "--observe-steps", "1"]


def children() -> list[int]:
    return [p.pid for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE]


def test_exec_on_two_ranks_writes_one_result_with_both_ranks_figures_and_names_the_slow_rank(tmp_path):
    out = tmp_path / "ddp.json"
    command = ["python", str(DDP), "--slow-rank", "1", "--delay-ms", "40"]
    assert (
        main(["exec", "--nproc-per-node", "2", *LENGTHS, "--num-classes", "4", "--out", str(out), "--", *command]) == 0
    )
    result = perfsuite.Result.from_json(out.read_text())
    assert result.knobs["nproc_per_node"] == 2 and [r.rank for r in result.ranks] == [0, 1]
    samples = result.metric("samples_per_s").detail
    assert samples["ranks"] == 2 and samples["samples"] == 2 * 4 * 4  # both ranks' window batches
    assert result.metric("label_violations").detail["by_rank"] == {"0": 0, "1": 0}
    straggler = result.metric("straggler_wait_frac")
    assert straggler.detail["rank"] == 1 and straggler.detail["phase"] == "host prep", straggler.detail
    assert "--scaling-rounds" in result.metric("scaling_efficiency").reason
    assert children() == []


def test_a_rank_that_raises_fails_the_run_naming_it_with_the_scripts_traceback(capsys):
    assert main(["exec", "--nproc-per-node", "2", *LENGTHS, "--", "python", str(DDP), "--die-rank", "1"]) == 2
    err = capsys.readouterr().err
    assert "rank 1 failed in window" in err and "RuntimeError: rank 1 lost its data shard" in err
    assert f'File "{DDP}"' in err  # the script's own frame
    assert children() == []


def test_a_rank_that_hangs_is_named_and_nothing_is_left_running():
    script = Script([str(DDP), "--hang-rank", "0"])
    spec = RunSpec(script, steps=4, warmup=1, observe_steps=1, watchdog=SHORT)
    started = time.monotonic()
    with pytest.raises((RunTimeout, RankError)) as err:
        run_script_distributed(script, spec, 2)
    assert "rank 0" in str(err.value)
    assert children() == []
    assert time.monotonic() - started < 300  # an outer bound only: never a hang of the test session


def test_scaling_rounds_interleave_one_rank_and_two_rank_launches_of_the_script(tmp_path):
    out = tmp_path / "scaling.json"
    argv = ["exec", "--nproc-per-node", "2", "--scaling-rounds", "2", *LENGTHS, "--out", str(out)]
    assert main([*argv, "--", "python", str(DDP)]) == 0
    efficiency = perfsuite.Result.from_json(out.read_text()).metric("scaling_efficiency")
    assert efficiency.detail["rounds"] == 2 and len(efficiency.detail["n_rank_samples_per_s"]) == 2
    # A figure only where it can be true: at most N x one rank; above, the reason says why it is not one.
    assert (efficiency.value is not None and 0 < efficiency.value <= 1) or "above 1" in efficiency.reason
    assert children() == []

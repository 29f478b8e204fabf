"""Every phase of a run is timed, and the phases tile the run: their wall times sum to its wall time.

No timing assertions: which phases are recorded, in which order, that they add up to the time the run took
as seen from outside (within 5%), and that the record survives JSON (and that Results without it still load).
"""

from __future__ import annotations

import time

import pytest
import torch

import perfsuite
from perfsuite.core import phases
from perfsuite.core.results import Phase, PhaseTimes, Result
from perfsuite.errors import ResultError
from perfsuite.harness.runner import RunSpec, run


def _tiny_job() -> perfsuite.Job:
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(batch):
        optimizer.zero_grad()
        loss = model(batch).pow(2).mean()
        loss.backward()
        optimizer.step()
        return loss

    loader = torch.utils.data.DataLoader(torch.randn(16, 2), batch_size=4)
    return perfsuite.Job(step=step, loader=loader, model=model, optimizer=optimizer)


@pytest.fixture(scope="module")
def timed() -> tuple[Result, float]:
    spec = RunSpec(_tiny_job(), steps=3, warmup=2, observe_steps=2, period_steps=2, sol_steps=2)
    start = time.perf_counter()
    result = run(spec)
    return result, time.perf_counter() - start


def test_every_phase_is_recorded_in_order(timed):
    result, _ = timed
    assert result.phases is not None
    names = [p.name for p in result.phases.phases]
    expected = [
        phases.SETUP,
        phases.FIRST_BATCH,
        phases.WARMUP,
        phases.WINDOW,
        phases.WINDOW_CLOSE,
        phases.SOL,
        phases.PERIOD_SCAN,
        phases.OBSERVED,
        phases.TEARDOWN,
        phases.ASSEMBLY,
    ]
    assert [n for n in names if not n.startswith(phases.AFTER_WINDOW)] == expected
    # each probe's after-window work is its own phase, between the speed of light and the period scan
    after = [n for n in names if n.startswith(phases.AFTER_WINDOW)]
    assert after == [phases.after_window(p.name) for p in perfsuite.harness.runner.default_probes()]
    assert names.index(after[0]) == names.index(phases.SOL) + 1
    assert all(p.wall_s >= 0 and p.cpu_s >= 0 for p in result.phases.phases)


def test_the_phases_sum_to_the_runs_wall_time(timed):
    result, outside = timed
    assert result.phases is not None
    total = result.phases.wall_s
    assert total == pytest.approx(sum(p.wall_s for p in result.phases.phases))
    assert 0.95 * outside <= total <= outside


def test_the_phases_survive_json_and_old_results_still_load(timed):
    result, _ = timed
    back = Result.from_json(result.to_json())
    assert back.phases == result.phases
    old = result.to_dict()
    del old["phases"]
    assert Result.from_dict(old).phases is None


def test_a_negative_phase_time_is_refused(timed):
    data = timed[0].to_dict()
    data["phases"][0]["cpu_s"] = -1.0
    with pytest.raises(ResultError, match=r"phases\[0\]\.cpu_s"):
        Result.from_dict(data)


def test_the_clock_accumulates_a_phase_entered_twice_and_within_returns():
    with phases.recording() as clock:
        with phases.within(phases.DATASET):
            pass
        phases.enter(phases.OBSERVED)
        phases.enter(phases.PERIOD_SCAN)
        phases.enter(phases.OBSERVED)
        times = clock.times()
    assert [p.name for p in times.phases] == [phases.SETUP, phases.DATASET, phases.OBSERVED, phases.PERIOD_SCAN]
    phases.enter(phases.WINDOW)  # no run recording: nothing, no error


def test_the_line_names_every_phase():
    times = PhaseTimes((Phase("set-up", 1.1, 1.0), Phase("warm-up", 2.0, 0.5), Phase("window", 5.0, 4.0)))
    assert times.line() == "8.1 s: set-up 1.10, warm-up 2.00, window 5.00"
    tiny = PhaseTimes((*times.phases, Phase("after window: nvml", 0.001, 0.001)))
    assert tiny.line() == "8.1 s: set-up 1.10, warm-up 2.00, window 5.00, 1 more under 5 ms"


def test_a_sessions_phases_are_summed_by_name():
    a = PhaseTimes((Phase("set-up", 1.0, 0.5), Phase("window", 2.0, 1.0)))
    b = PhaseTimes((Phase("set-up", 3.0, 0.25), Phase("teardown", 1.0, 1.0)))
    total = PhaseTimes.summed([a, None, b])
    assert total == PhaseTimes((Phase("set-up", 4.0, 0.75), Phase("window", 2.0, 1.0), Phase("teardown", 1.0, 1.0)))
    assert PhaseTimes.summed([None]) is None


def test_the_overhead_is_the_time_beyond_the_warm_up_and_window_steps():
    times = PhaseTimes(
        (
            Phase(phases.SETUP, 2.0, 1.0),
            Phase(phases.FIRST_BATCH, 1.0, 0.1),
            Phase(phases.WARMUP, 3.0, 1.0),
            Phase(phases.WINDOW, 5.0, 4.0),
            Phase(phases.after_window("loadercount"), 4.0, 4.0),
        )
    )
    assert phases.overhead_s(times) == pytest.approx(6.0)


def test_the_budget_script_fails_a_run_over_budget_and_a_missed_cache(timed, tmp_path):
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "phase_budget.py"
    spec = importlib.util.spec_from_file_location("phase_budget", script)
    budget = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(budget)
    result = tmp_path / "run.json"
    result.write_text(timed[0].to_json())
    over = phases.overhead_s(timed[0].phases)
    assert budget.main([str(result), "--budget", str(over * 2 + 1)]) == 0
    assert budget.main([str(result), "--budget", str(over / 2)]) == 1
    setup = tmp_path / "setup.json"
    setup.write_text('{"setup_only": true, "phases": [{"name": "dataset", "wall_s": 3.0, "cpu_s": 3.0}]}')
    assert budget.main(["--setup", str(setup)]) == 1
    setup.write_text('{"setup_only": true, "phases": [{"name": "dataset", "wall_s": 0.01, "cpu_s": 0.01}]}')
    assert budget.main(["--setup", str(setup)]) == 0


def test_a_session_summary_names_the_longest_phases_and_counts_the_rest():
    from perfsuite.core.results import Phase, PhaseTimes

    times = PhaseTimes(
        tuple(Phase(n, w, w) for n, w in [("set-up", 0.5), ("window", 3.0), ("loader", 2.0), ("x", 0.001)])
    )
    assert times.line(most=2) == "5.5 s: window 3.00, loader 2.00, 2 more (0.50 s; -v lists them)"
    assert times.line() == "5.5 s: set-up 0.50, window 3.00, loader 2.00, 1 more under 5 ms"

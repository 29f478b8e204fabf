"""Contention: the /proc readers on recorded samples, the figures over an interval, and the judge's guard."""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time

import pytest

from perfsuite.core import metrics as registry
from perfsuite.core.results import Metric, Result
from perfsuite.errors import ResultError
from perfsuite.judge.contention import WALL_BOUND, Guard, clock_of, load_of, summary_line
from perfsuite.judge.engine import compare_results
from perfsuite.judge.verdict import Outcome
from perfsuite.probes.contention import (
    ContentionProbe,
    Snapshot,
    parse_pressure,
    parse_procs_running,
    span,
)
from tests.unit.fixed_fingerprint import FP

# Recorded on this project's 2-core VM (kernel 6.x): a busy minute, and a kernel without the 'full' line (< 5.13).
PRESSURE_BUSY = (
    "some avg10=99.12 avg60=97.40 avg300=80.02 total=812345678\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
)
PRESSURE_OLD_KERNEL = "some avg10=1.06 avg60=1.09 avg300=0.72 total=4526694\n"
STAT = (
    "cpu  8093 0 2332 45190 260 0 23 10 0 0\ncpu0 4000 0 1100 22500 130 0 11 5 0 0\n"
    "intr 1 2 3\nctxt 99\nbtime 1764150000\nprocesses 9252\nprocs_running 7\nprocs_blocked 0\n"
)


def test_pressure_totals_are_read_from_both_lines_and_a_missing_line_is_none() -> None:
    assert parse_pressure(PRESSURE_BUSY) == (812345678, 0)
    assert parse_pressure(PRESSURE_OLD_KERNEL) == (4526694, None)
    assert parse_pressure("") == (None, None)


def test_procs_running_is_read_from_proc_stat() -> None:
    assert parse_procs_running(STAT) == 7
    assert parse_procs_running("cpu 1 2 3\n") is None
    assert parse_procs_running("procs_running x\n") is None


def snap(t: float, some: int, busy: float, total: float, steal: float, own_s: float) -> Snapshot:
    return Snapshot(t, some, 0, busy, total, steal, int(own_s * 1e9))


def test_figures_over_an_interval_are_shares_of_it() -> None:
    # 2 s on 2 cores: pressure stalled 1.5 s, 3.0 busy core-seconds of which this run used 1.0, 0.4 of 4.0 stolen
    a, b = snap(10.0, 1_000_000, 100.0, 400.0, 5.0, 2.0), snap(12.0, 2_500_000, 103.0, 404.0, 5.4, 3.0)
    f = span(a, b, cores=2, runqueue=[4, 6, 5])
    assert f["cpu_pressure_some"] == 0.75 and f["cpu_pressure_full"] == 0.0
    assert f["steal"] == 0.1
    assert f["neighbours"] == 0.5  # (3.0 - 1.0) core-seconds over 2 s x 2 cores
    assert f["runqueue_per_core"] == 2.5 and f["runqueue_samples"] == 3


def test_no_share_is_ever_above_one_or_below_zero() -> None:
    # counters read a tick apart: the tree's own CPU above the cores' busy time, a stall longer than the interval
    a, b = snap(0.0, 0, 10.0, 20.0, 0.0, 0.0), snap(1.0, 3_000_000, 10.5, 22.0, 0.0, 0.9)
    f = span(a, b, cores=1)
    assert f["cpu_pressure_some"] == 1.0 and f["neighbours"] == 0.0 and f["runqueue_per_core"] is None


def test_unread_counters_give_none_never_zero() -> None:
    a = Snapshot(0.0, None, None, None, None, None, None)
    f = span(a, Snapshot(1.0, None, None, None, None, None, None), cores=2)
    assert all(f[k] is None for k in ("cpu_pressure_some", "cpu_pressure_full", "steal", "neighbours"))


def contention(foreign: float, pressure: float = 0.5, threads: int | None = None) -> dict:
    window = {"cpu_pressure_some": pressure, "neighbours": foreign, "steal": 0.0, "runqueue_per_core": 1.0}
    figures: dict = {"window": window, "speed_of_light": dict(window)}
    if threads is not None:
        figures["intra_op_threads"] = threads
    return {"contention": figures}


def result(step: float, env: dict | None = None, cpu: float = 10.0) -> Result:
    steps = [step * (1 + 0.002 * k) for k in range(20)]
    cpus = [cpu * (1 + 0.002 * k) for k in range(20)]
    metrics = {
        "step_ms": Metric("step_ms", step, "ms"),
        "step_cpu_ms": Metric("step_cpu_ms", cpu, "ms"),
        "syncs_per_step": Metric("syncs_per_step", 1, "syncs/step"),
    }
    samples = {"step_ms": steps, "step_cpu_ms": cpus}
    return Result("job", "smoke", {}, metrics, samples, FP, 8, 20, 2, environment=env or {})


def verdicts(base: Result, head: Result) -> dict[str, object]:
    return {v.metric: v for v in compare_results(base, head, "t", force=True)}


def test_a_slower_step_between_quiet_runs_is_judged_as_before() -> None:
    v = verdicts(result(100.0, contention(0.01)), result(170.0, contention(0.02)))
    assert v["step_ms"].outcome is Outcome.REGRESSED


def test_a_contended_side_makes_wall_clock_verdicts_abstain_with_the_figures_never_regressed() -> None:
    v = verdicts(result(100.0, contention(0.03, 0.03)), result(170.0, contention(0.92, 0.99)))
    step = v["step_ms"]
    assert step.outcome is Outcome.INCONCLUSIVE and step.cause is None
    assert "head run: neighbours and steal 92% of the usable CPU, CPU pressure 99%" in step.message
    assert "base: neighbours and steal 3%" in step.message
    assert "wall-clock figures not comparable" in step.message and "x1.700" in step.message
    assert v["syncs_per_step"].outcome is Outcome.UNCHANGED  # exact counters: judged as usual


def test_cpu_time_is_judged_under_a_load_that_stops_wall_clock_and_abstains_beyond_its_own_bound() -> None:
    v = verdicts(result(100.0, contention(0.03), cpu=10.0), result(170.0, contention(0.4), cpu=15.0))
    assert v["step_ms"].outcome is Outcome.INCONCLUSIVE
    assert v["step_cpu_ms"].outcome is Outcome.REGRESSED  # 40% neighbours: within the CPU bound
    v = verdicts(result(100.0, contention(0.03), cpu=10.0), result(170.0, contention(0.95), cpu=15.0))
    assert v["step_cpu_ms"].outcome is Outcome.INCONCLUSIVE
    assert "even CPU-time figures not comparable" in v["step_cpu_ms"].message
    assert "nor the CPU ledger's" in v["step_ms"].message  # the wall-clock message does not promise it judged


@pytest.mark.parametrize("foreign", [0.5, 0.6, 0.675, 0.75])
def test_identical_cpu_time_figures_that_read_apart_at_50_to_75_percent_foreign_load_are_not_judged(foreign) -> None:
    """Issue 56: an A/A pair judged at 67-70% foreign load read step_cpu_ms x1.249 "regressed", significant; and
    its hint asked for more steps. Between 50% and 75% a CPU-time figure abstains, in either order, and its hint
    (markdown included) says that more steps will not decide it."""
    from perfsuite.report.verdicts import format_markdown

    quiet, busy = result(100.0, contention(0.03), cpu=10.0), result(100.0, contention(foreign), cpu=12.5)
    for base, head in ((quiet, busy), (busy, quiet)):
        v = verdicts(base, head)
        for name in ("step_cpu_ms", "main_load_ms_per_step"):
            if name in v:
                assert v[name].outcome is Outcome.INCONCLUSIVE and not v[name].failed, v[name].message
        text = format_markdown([v["step_cpu_ms"]])
        assert "more steps will not" in text and "--steps" not in text, text


def test_a_multi_threaded_step_cpu_time_is_guarded_as_wall_clock_the_ledger_is_not() -> None:
    """With 2 intra-op threads the training thread's CPU time holds its spin while a helper waits for a core (an
    A/A pair read x19.97 beside 2 busy processes), so step_cpu_ms abstains where the wall clock does."""
    base = result(100.0, contention(0.03, threads=2), cpu=10.0)
    head = result(170.0, contention(0.4, threads=2), cpu=15.0)
    guard = Guard(load_of(base), load_of(head))
    assert guard.clock(registry.get("step_cpu_ms")) == "wall"
    assert guard.clock(registry.get("loader_cpu_ms_per_sample")) == "cpu"  # the workers' CPU keeps the CPU bound
    v = verdicts(base, head)
    cpu = v["step_cpu_ms"]
    assert cpu.outcome is Outcome.INCONCLUSIVE and cpu.cause is None
    assert "2 intra-op threads" in cpu.message and "judged as a wall-clock figure (bound 10%)" in cpu.message
    one = verdicts(
        result(100.0, contention(0.03, threads=1), cpu=10.0), result(170.0, contention(0.4, threads=1), cpu=15.0)
    )
    assert one["step_cpu_ms"].outcome is Outcome.REGRESSED  # one thread: nothing spins
    quiet = verdicts(
        result(100.0, contention(0.03, threads=2), cpu=10.0), result(170.0, contention(0.05, threads=2), cpu=15.0)
    )
    assert quiet["step_cpu_ms"].outcome is Outcome.REGRESSED  # within the wall-clock bound: judged


def test_the_probe_records_the_intra_op_threads_of_the_window() -> None:
    import torch

    before = torch.get_num_threads()
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            probe = ContentionProbe()
            probe.setup(None)  # type: ignore[arg-type]
            probe.start()
            probe.stop()
            probe.begin_after_window()  # the driver's order: every probe's begin, then every probe's after_window
            probe.after_window()
            probe.finish()
            assert probe._figures()["intra_op_threads"] == n
    finally:
        torch.set_num_threads(before)


def test_an_unchanged_wall_clock_verdict_under_contention_is_not_unchanged_either() -> None:
    v = verdicts(result(100.0, contention(0.9)), result(100.0, contention(0.9)))
    assert v["step_ms"].outcome is Outcome.INCONCLUSIVE


def test_results_without_contention_figures_are_judged_as_before() -> None:
    assert verdicts(result(100.0), result(170.0))["step_ms"].outcome is Outcome.REGRESSED
    assert load_of(result(100.0)).foreign is None and summary_line(result(100.0)) is None


def test_which_clock_each_metric_runs_on() -> None:
    assert clock_of(registry.get("step_ms")) == "wall" and clock_of(registry.get("data_wait_frac")) == "wall"
    assert (
        clock_of(registry.get("loader_cpu_ms_per_sample")) == "cpu" and clock_of(registry.get("step_cpu_ms")) == "cpu"
    )
    assert clock_of(registry.get("syncs_per_step")) is None and clock_of(registry.get("peak_rss_mb")) is None


def test_the_guard_takes_the_larger_of_the_window_and_the_speed_of_light_phase() -> None:
    env = contention(0.01)
    env["contention"]["speed_of_light"]["neighbours"] = 0.8
    assert load_of(result(1.0, env)).foreign == 0.8
    assert Guard(load_of(result(1.0, env)), load_of(result(1.0, contention(0.0)))).contended("wall")
    assert f"bound {WALL_BOUND:.0%}" in (summary_line(result(1.0, env)) or "")


def test_environment_round_trips_through_json_and_a_bad_one_names_its_field() -> None:
    r = result(100.0, contention(0.25))
    assert Result.from_json(r.to_json()) == r
    data = r.to_dict()
    data["environment"]["contention"]["window"]["neighbours"] = [1, {"x": float("inf")}]
    with pytest.raises(ResultError, match=r"environment\.contention\.window\.neighbours\[1\]\.x"):
        Result.from_dict(data)
    data["environment"] = ["not", "an", "object"]
    with pytest.raises(ResultError, match="'environment'"):
        Result.from_dict(data)


def _run_under(busy: int) -> dict:
    """A perfsuite run of a tiny reference workload (a fixed count of steps) with ``busy`` spinning processes."""
    from perfsuite.harness.runner import RunSpec, run

    # a subshell starts each spinner and exits, so init adopts it: not a descendant, not the run's own CPU
    spin = f"( {sys.executable} -c 'while True: pass' </dev/null >/dev/null 2>&1 & echo $! ); "
    started = subprocess.run(["/bin/sh", "-c", spin * busy], capture_output=True, text=True, timeout=30, check=True)
    pids = [int(pid) for pid in started.stdout.split()]
    try:
        time.sleep(0.3)  # the spinners get scheduled before the run starts
        spec = RunSpec("gray_classifier", steps=6, warmup=1, observe_steps=0, period_steps=0, sol_steps=2)
        result = run(spec, probes=[ContentionProbe()])
        return result.environment["contention"]["window"]
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGTERM)


@pytest.mark.slow
def test_a_run_under_planted_busy_processes_records_more_contention_than_a_quiet_one() -> None:
    quiet, busy = [], []
    for _ in range(2):  # alternated, so a neighbour's own load moves both sides alike
        quiet.append(_run_under(0))
        busy.append(_run_under(3))

    def med(runs: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    # 3 spinners are 3 more runnable tasks: the run queue per core rises by about 3 / cores
    assert med(busy, "runqueue_per_core") > med(quiet, "runqueue_per_core"), (quiet, busy)
    assert med(busy, "neighbours") > med(quiet, "neighbours") or med(busy, "neighbours") >= 0.9, (quiet, busy)
    if quiet[0]["cpu_pressure_some"] is not None:
        assert (
            med(busy, "cpu_pressure_some") >= med(quiet, "cpu_pressure_some") or med(busy, "cpu_pressure_some") >= 0.9
        ), (quiet, busy)


def test_ab_drops_a_contended_run_and_lists_it() -> None:
    from perfsuite.ab.engine import counted_values

    listed: list[str] = []
    assert counted_values(result(100.0, contention(0.02)), "min", "round 1, run 1 (A)", listed) is not None
    assert counted_values(result(100.0, contention(0.95)), "min", "round 1, run 2 (B)", listed) is None
    assert listed == [
        f"round 1, run 2 (B): neighbours and steal 95% of the usable CPU, CPU pressure 50%, run queue "
        f"1.0/core (bound {WALL_BOUND:.0%})"
    ]


def test_the_session_line_counts_contended_runs_and_shows_the_worst() -> None:
    from perfsuite.judge.contention import session_line

    runs = {"a": result(1.0, contention(0.02)), "b": result(1.0, contention(0.97, 0.99)), "c": result(1.0)}
    line = session_line(runs) or ""
    assert line.startswith("contention: 1 of 2 runs contended") and "b" in line and "97%" in line
    assert "1 beyond the CPU-time bound" in line  # 97% is beyond the CPU ledger's bound too
    assert "every run within the bound" in (session_line({"a": runs["a"]}) or "")
    assert session_line({"c": runs["c"]}) is None


def test_compare_notes_both_sides_contention_per_test() -> None:
    from perfsuite.report.compare import contention_notes

    notes = contention_notes({"t": result(1.0, contention(0.03))}, {"t": result(1.0, contention(0.9))})
    assert notes == [
        "t: contention: head run: neighbours and steal 90% of the usable CPU, CPU pressure 50%, run queue 1.0/core; "
        "base: neighbours and steal 3% of the usable CPU, CPU pressure 50%, run queue 1.0/core"
    ]


def test_the_run_s_own_cpu_counts_every_thread_so_intra_op_threads_are_not_neighbours() -> None:
    import threading

    from perfsuite.probes.contention import _own_ns

    def burn() -> None:  # 0.2 s of this thread's CPU: an amount of work, read back as an amount of CPU time
        start = time.thread_time()
        while time.thread_time() - start < 0.2:
            pass

    before = _own_ns()
    worker = threading.Thread(target=burn)
    worker.start()
    worker.join()
    after = _own_ns()
    assert before is not None and after is not None
    assert (after - before) / 1e9 >= 0.19  # /proc/<pid>/schedstat alone (the main thread) would read ~0


def test_a_second_stop_changes_nothing_and_the_window_is_bracketed_by_the_calibration_kernel() -> None:
    probe = ContentionProbe()
    probe.setup(None)  # type: ignore[arg-type]
    probe.start()
    probe.stop()
    window = dict(probe._marks)
    probe.stop()
    probe.begin_after_window()
    probe.after_window()
    probe.finish()
    assert probe._marks["window_end"] is window["window_end"]
    figures = probe._figures()
    assert set(figures) >= {"window", "speed_of_light", "calibration"}
    assert set(figures["calibration"]) == {"before", "after"}
    assert all(c["cpu_ms"] > 0 and c["wall_over_cpu"] > 0 for c in figures["calibration"].values())


def test_the_wall_clock_bound_can_be_raised_and_a_bad_value_is_named(monkeypatch):
    from perfsuite.errors import PerfsuiteError
    from perfsuite.judge import contention

    assert contention.wall_bound() == contention.WALL_BOUND
    monkeypatch.setenv("PERFSUITE_WALL_BOUND", "1")
    assert contention.Guard(contention.Load(None, None, None), contention.Load(None, None, None)).wall_bound == 1.0
    monkeypatch.setenv("PERFSUITE_WALL_BOUND", "lots")
    with pytest.raises(PerfsuiteError, match="PERFSUITE_WALL_BOUND='lots'"):
        contention.wall_bound()


RANK_B = """
import sys
from perfsuite.probes.contention import _own_ns
before = _own_ns()
print("ready", flush=True)
sys.stdin.readline()  # the sibling rank has burnt its CPU
print((_own_ns() - before) / 1e9, flush=True)
"""
RANK_A = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5:\n    pass\n"


def _sibling_cpu_seen(env: dict) -> float:
    """A 'rank' measures its job's CPU while a sibling process of the same parent burns 0.5 s of CPU."""
    b = subprocess.Popen(
        [sys.executable, "-c", RANK_B], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    assert b.stdout is not None and b.stdin is not None
    assert b.stdout.readline().strip() == "ready"
    subprocess.run([sys.executable, "-c", RANK_A], env=env, check=True)
    b.stdin.write("go\n")
    b.stdin.flush()
    seen = float(b.stdout.readline())
    b.wait(timeout=30)
    return seen


def test_a_sibling_rank_under_torchrun_is_the_same_job_not_a_neighbour() -> None:
    """2 ranks on 2 cores each read the other as 50% foreign load, so every DDP wall-clock verdict abstained."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    assert _sibling_cpu_seen({**env, "TORCHELASTIC_RUN_ID": "test"}) >= 0.4  # torchrun's agent's tree: the job
    env.pop("TORCHELASTIC_RUN_ID", None)
    assert _sibling_cpu_seen(env) < 0.3  # not under torchrun: a sibling is a neighbour, as before

"""Each of the doctor's rules on its own (perfsuite.tools.doctor.rules): its condition, finding and fix, from
hand-made Results (no runs)."""

from __future__ import annotations

import dataclasses
import pkgutil

from doctor_evidence import recorded_contention, result

from perfsuite.tools import doctor
from perfsuite.tools.doctor import predictions, rules
from perfsuite.tools.doctor.diagnosis import tried
from perfsuite.tools.doctor.evidence import Evidence, gather
from perfsuite.tools.doctor.model import Counterfactuals, Fix, Periodic, Predicted
from perfsuite.tools.doctor.rules import (
    busy,
    oversubscribed,
    periodic,
    sm_underused,
    step,
    syncs,
    worker_count,
    workers_zero,
)

WAITING = {"fetch": [200.0, 100.0, 90.0] * 6, "host": [400.0, 250.0, 240.0] * 6}  # data wait ~45%
NOT_WAITING = {"fetch": [1.0, 0.5, 0.0] * 6, "host": [200.0] * 18, "epoch_fetch": []}  # data wait ~0.3%


def evidence(*results: object) -> Evidence:
    return gather(list(results), [], 2)  # type: ignore[arg-type]


def test_every_rule_module_is_in_the_registry() -> None:
    modules = {m.name for m in pkgutil.iter_modules(rules.__path__)} - {"base", "measured"}
    assert {r.name for r in rules.RULES} == modules


def test_workers_zero_names_the_fix_only_on_an_input_bound_step_without_workers() -> None:
    (f,) = workers_zero.find(evidence(result(workers=0, **WAITING)), Counterfactuals())
    assert "num_workers=0" in f.title and f.fix == "DataLoader(num_workers=2, persistent_workers=True)"
    assert f.bottleneck
    assert workers_zero.find(evidence(result(workers=2, **WAITING)), Counterfactuals()) == []
    assert workers_zero.find(evidence(result(workers=0, **NOT_WAITING)), Counterfactuals()) == []


def test_worker_count_names_the_count_tried() -> None:
    base = [result(workers=2, samples_per_s=10.0, **WAITING)] * 2
    runs = [result(workers=1, samples_per_s=12.0, **WAITING)] * 2
    cf = Counterfactuals({Fix.FEWER_WORKERS: tried(Fix.FEWER_WORKERS, "w", "c", "why", base, runs, workers=1)})
    (f,) = worker_count.find(evidence(*base), cf)
    assert f.title == "num_workers 2 -> 1" and f.fix == "DataLoader(num_workers=1)"
    assert worker_count.find(evidence(result(workers=2, **NOT_WAITING)), cf) == []


def test_busy_reads_the_machine_and_leads_only_when_the_wait_for_a_core_outweighs_compute() -> None:
    loaded = recorded_contention(0.9, 3.0, neighbours=0.6)
    (f,) = busy.find(evidence(result(environment=loaded, sol=[60.0] * 5, **NOT_WAITING)), Counterfactuals())
    assert f.kind == "busy" and "90% of the time" in f.evidence and f.bottleneck
    assert busy.find(evidence(result(environment=recorded_contention(0.01, 0.5))), Counterfactuals()) == []


def test_step_is_the_bottleneck_only_when_the_step_does_not_wait() -> None:
    (f,) = step.find(evidence(result(**NOT_WAITING)), Counterfactuals())
    assert f.bottleneck and f.title.startswith("not input-bound")
    assert step.find(evidence(result(**WAITING)), Counterfactuals()) == []


def test_a_busy_machine_is_other_processes_load_never_the_jobs_own_threads_and_workers() -> None:
    """Observed: 'busy machine (noisy neighbour)' with 0% of the CPU taken by other processes, the 1.5 runnable
    tasks per core the script's own 2 threads and 2 workers."""
    own = recorded_contention(0.6, 1.5, neighbours=0.0, threads=2)
    e = evidence(result(environment=own, cores_busy=1.2, sol=[60.0] * 5, **NOT_WAITING))
    assert not e.contention.busy and busy.find(e, Counterfactuals()) == []
    (f,) = oversubscribed.find(e, Counterfactuals())
    assert f.title == "oversubscribed cores: the job's own 2 thread(s) and 2 worker(s) on 2 usable core(s)"
    assert "keeping 1.20 core(s) busy" in f.evidence and "the job's own included" in f.evidence
    assert f.fix.startswith("torch.set_num_threads(1)") and f.bottleneck  # no neighbour explains the wait
    d = doctor.assess(
        "x", [result(environment=own, cores_busy=1.2, sol=[60.0] * 5, **NOT_WAITING)], [], Counterfactuals(), 2
    )
    assert d.findings[0].kind == "cores" and not any(f.kind == "busy" for f in d.findings)

    neighbours = recorded_contention(0.6, 1.5, neighbours=0.7, threads=1)
    e = evidence(result(environment=neighbours, cores_busy=0.3, sol=[60.0] * 5, **NOT_WAITING))
    (f,) = busy.find(e, Counterfactuals())
    assert "other processes and steal took 70%" in f.evidence and f.bottleneck
    assert oversubscribed.find(e, Counterfactuals()) == []  # 1 thread + 0.3 busy cores fit 2


def test_the_busy_machine_falls_back_to_runnable_tasks_beyond_the_jobs_own_where_neighbours_were_not_read() -> None:
    env = recorded_contention(0.9, 3.0, threads=1)
    env["contention"]["window"]["neighbours"] = None
    (f,) = busy.find(evidence(result(environment=env, cores_busy=0.5)), Counterfactuals())
    assert "2.2 runnable tasks per usable core beyond the job's own" in f.evidence


def test_periodic_work_is_named_with_its_period() -> None:
    e = evidence(result(**NOT_WAITING))
    assert periodic.find(e, Counterfactuals()) == []
    found = Periodic(5, ((4, 9),), extra_ms_per_step=20.0, share=0.1, long_step_ms=300.0)
    (f,) = periodic.find(dataclasses.replace(e, periodic=found), Counterfactuals())
    assert f.title.startswith("periodic work every 5 steps") and isinstance(f.predicted, Predicted)
    assert f.predicted.ratio == e.ledger.step_ms / (e.ledger.step_ms - 20.0)


def test_syncs_are_named_at_their_sites() -> None:
    e = evidence(result(**NOT_WAITING))
    assert syncs.find(e, Counterfactuals()) == []
    led = dataclasses.replace(e.ledger, syncs_per_step=2.0, syncs_ms=10.0, sync_sites={"train.py:40": 5.0})
    (f,) = syncs.find(dataclasses.replace(e, ledger=led), Counterfactuals())
    assert f.title == "host syncs: 2 per step" and "train.py:40" in f.evidence


def test_a_fix_is_predicted_by_the_rule_that_names_it() -> None:
    e = evidence(result(cores_busy=1.4, environment=recorded_contention(0.9, 3.0), **WAITING))
    assert rules.predict_fix(e, Fix.THREADS) == predictions.wait_for_a_core(e)
    assert not isinstance(rules.predict_fix(e, Fix.PIN_MEMORY), Predicted)


def test_a_busy_gpu_whose_sms_are_half_used_is_named_with_its_fix() -> None:
    """The recorded H200 runs: tuned (gpu_util 0.97, gpu_sm_util 0.53) and the seed (0.75, 0.64)."""
    from pathlib import Path

    from perfsuite.core.results import Result

    def h200(name: str) -> Result:
        path = Path(__file__).parents[1] / "data" / "results" / "h200" / f"{name}.json"
        return Result.from_json(path.read_text(encoding="utf-8"))

    (f,) = sm_underused.find(evidence(h200("tuned")), Counterfactuals())
    assert f.title == "GPU busy but its SMs not: NVML utilisation 97%, SM activity 53%"
    assert (
        f.fix == "a larger batch (more work per kernel); compile='default' (torch.compile: fused kernels); "
        "channels_last=True"
    )
    assert sm_underused.find(evidence(h200("seed-a")), Counterfactuals()) == []  # 75% busy: not this finding
    assert sm_underused.find(evidence(result()), Counterfactuals()) == []  # a CPU run: no NVML, no GPM

"""Which fixes run past --rounds (perfsuite.tools.doctor.decide): those whose further pairs can change the answer,
which fix helps most and whether it helps; table-driven, without running jobs."""

from __future__ import annotations

import pytest

from perfsuite.tools.doctor.budget import Budget
from perfsuite.tools.doctor.decide import Further, still_open
from perfsuite.tools.doctor.model import Measured, Unavailable


def m(ratio: float, low: float | None, high: float | None) -> Measured:
    return Measured(ratio, low, high, 3, "a fix")


CASES = [
    # the VM's case: the best's interval holds 1, the other's reaches above its low: both run on
    (
        "best holds 1, rival reaches it",
        {"threads": m(1.33, 0.84, 2.09), "fewer": m(0.92, 0.78, 1.07)},
        ["threads", "fewer"],
    ),
    ("best holds 1, the other cannot help", {"threads": m(1.33, 0.84, 2.09), "fewer": m(0.7, 0.6, 0.8)}, ["threads"]),
    ("best shown, no rival", {"threads": m(1.8, 1.4, 2.3), "fewer": m(1.05, 0.9, 1.2)}, []),
    ("best shown, a rival overlaps it", {"threads": m(1.8, 1.4, 2.3), "fewer": m(1.3, 1.1, 1.5)}, ["threads", "fewer"]),
    ("no fix helps", {"threads": m(0.9, 0.8, 0.99), "fewer": m(0.95, 0.85, 1.0)}, []),
    ("one pair each: no interval to narrow", {"threads": m(1.4, None, None)}, []),
    ("nothing measured", {"threads": Unavailable("no pair of runs delivered samples")}, []),
    ("an unmeasured fix is left alone", {"x": Unavailable("none"), "threads": m(1.1, 0.9, 1.3)}, ["threads"]),
]


@pytest.mark.parametrize(("case", "measured", "open_"), CASES, ids=[c[0] for c in CASES])
def test_still_open(case: str, measured: dict, open_: list[str]) -> None:
    assert still_open(measured) == open_


def test_the_note_names_the_rounds_each_fix_ran_and_why_they_stopped() -> None:
    further = Further(asked=3, limit=8)
    assert further.note() == ""  # none ran: nothing to say
    budget = Budget(seconds=100.0)
    assert further.go_on(["torch threads 2 -> 1", "num_workers 2 -> 1"], budget, 10.0)
    assert further.go_on(["torch threads 2 -> 1"], budget, 10.0)
    assert not further.go_on([], budget, 10.0)
    assert not Further(3, 8).go_on(["a"], budget, 1000.0)  # a round the budget does not hold
    assert further.note() == (
        "rounds 4..5 (up to 8, --max-rounds) ran again the fixes whose intervals after 3 could not yet say which "
        "helps most, or whether it helps: torch threads 2 -> 1: 2 rounds; num_workers 2 -> 1: 1 round; "
        "stopped: the answer was decided"
    )
    over = Further(3, 8)
    over.go_on(["a"], budget, 1000.0)
    assert over.note() == "" and over.stopped == "the budget held no further round"
    last = Further(3, 4, [["a"]]).note()
    assert last.startswith("round 4 (up to 4, --max-rounds)") and last.endswith("a: 1 round; stopped: --max-rounds 4")


def test_further_rounds_run_only_the_open_fixes_until_the_answer_is_decided(monkeypatch: pytest.MonkeyPatch) -> None:
    """The job loop (perfsuite.tools.doctor.runs.diagnose) with its runs stood in for by recorded Results: fewer
    threads gains about x1.4 with a wide spread, fewer workers loses about x0.8; after 3 rounds the threads'
    interval still holds 1, so it alone runs on, until its interval clears 1."""
    from doctor_evidence import result

    from perfsuite.harness.runner import RunSpec
    from perfsuite.tools.doctor import runs
    from perfsuite.tools.doctor.arms import Arm
    from perfsuite.tools.doctor.model import Fix

    spec = RunSpec("faces")
    rates = {
        None: iter([10.0] * 8),
        Fix.THREADS: iter([20.0, 9.0, 14.0, 15.0, 14.0, 13.0, 16.0, 14.0]),
        Fix.FEWER_WORKERS: iter([8.0, 8.2, 7.9, 8.1, 8.0, 8.0, 8.0, 8.0]),
    }
    ran: list[Fix | None] = []

    def run_arm(arm: Arm | None, spec: RunSpec, probes: list) -> object:
        key = None if arm is None else arm.fix
        ran.append(key)
        return result(samples_per_s=next(rates[key]))

    arms = [
        Arm(Fix.THREADS, "torch threads 2 -> 1", "torch.set_num_threads(1)", spec, threads=1),
        Arm(Fix.FEWER_WORKERS, "num_workers 2 -> 1", "DataLoader(num_workers=1)", spec, workers=1),
    ]
    monkeypatch.setattr(runs, "_run_arm", run_arm)
    monkeypatch.setattr(runs, "planned", lambda *args, **kwargs: (arms, {}))
    d = runs.diagnose(spec, "faces", rounds=3, max_rounds=8)
    assert ran.count(Fix.FEWER_WORKERS) == 3  # decided after 3 rounds: it runs no more
    extra = ran.count(Fix.THREADS) - 3
    assert ran.count(None) == 3 + extra and 1 <= extra <= 5
    threads = d.counterfactuals.tried[Fix.THREADS].measured
    assert isinstance(threads, Measured) and threads.pairs == 3 + extra and threads.low is not None
    assert threads.low > 1.0  # it stopped because the answer was decided, not at --max-rounds
    note = next(b for b in d.budget if b.startswith("round"))
    assert "torch threads 2 -> 1: " in note and "num_workers" not in note and note.endswith("the answer was decided")
    # Without --max-rounds above --rounds, nothing more runs.
    ran.clear()
    rates = {
        k: iter(list(v))
        for k, v in {None: [10.0] * 3, Fix.THREADS: [20.0, 9.0, 14.0], Fix.FEWER_WORKERS: [8.0] * 3}.items()
    }
    runs.diagnose(spec, "faces", rounds=3)
    assert len(ran) == 9

"""The runs of a Job or reference workload's diagnosis: the job as it is, ``rounds`` times, each counterfactual
interleaved with it (each arm taking each place in the round in turn), within the time budget.

The first run's evidence says what could be tried (:func:`.arms.choose_arms`) and :mod:`.plan` which of those
run: the ones that can change the answer, largest first; a lengthened one (persistent workers, where no epoch
boundary fell inside the measured steps) is paired with runs of the job as it is at its length."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from perfsuite.core.results import Result
from perfsuite.errors import PerfsuiteError
from perfsuite.harness.runner import RunSpec
from perfsuite.tools.doctor.arms import Arm, choose_arms
from perfsuite.tools.doctor.budget import Budget
from perfsuite.tools.doctor.decide import Further, still_open
from perfsuite.tools.doctor.diagnosis import Diagnosis, assess, measure, tried
from perfsuite.tools.doctor.model import Counterfactuals, Fix

DEFAULT_ROUNDS = 3


def _run_arm(arm: Arm | None, spec: RunSpec, probes: list[Any]) -> Result:
    import torch

    from perfsuite.harness.runner import run

    if arm is None or arm.threads is None:
        return run(spec if arm is None else arm.spec, probes)
    before = torch.get_num_threads()
    torch.set_num_threads(arm.threads)
    try:
        return run(arm.spec, probes)
    finally:
        torch.set_num_threads(before)


def lengths(spec: RunSpec) -> RunSpec:
    """At least one observed step (the step ledger) and 3 cached-batch steps (the speed of light)."""
    if spec.observe_steps < 1:
        spec = dataclasses.replace(spec, observe_steps=1)
    if spec.sol_steps < 3:
        spec = dataclasses.replace(spec, sol_steps=5)
    return spec


def diagnose(
    spec: RunSpec,
    target: str,
    rounds: int = DEFAULT_ROUNDS,
    counterfactuals: bool = True,
    progress: Callable[[str], None] = lambda s: None,
    budget: Budget | None = None,
    max_rounds: int | None = None,
) -> Diagnosis:
    """Run ``spec`` ``rounds`` times (and its counterfactuals, interleaved) and say what limits it; up to
    ``max_rounds`` (None: ``rounds``) while further pairs can change the answer (:mod:`.decide`)."""
    from perfsuite.core.cores import usable_cores
    from perfsuite.harness.runner import default_probes
    from perfsuite.probes.stepledger import StepLedgerProbe

    if rounds < 1:
        raise PerfsuiteError(f"rounds={rounds} must be 1 or more")
    spec = lengths(spec)
    budget = budget or Budget(None)
    usable = usable_cores().usable
    base: list[Result] = []
    ledgers: list[StepLedgerProbe] = []
    arms: list[Arm] = []
    why: dict[Fix, str] = {}
    cf_runs: dict[Fix, list[Result]] = {}
    own_base: dict[Fix, list[Result]] = {}  # a lengthened arm's unchanged runs, at its length
    first_round_s = 0.0
    live: list[Arm] = []  # the arms a round runs: all of them up to --rounds, then those still open
    further = Further(rounds, max(rounds, max_rounds or rounds))
    for r in range(further.limit):
        if r >= rounds:
            live = _still_open(live, base, cf_runs, own_base)
            if not further.go_on([a.label for a in live], budget, first_round_s * (1 + len(live)) / (1 + len(arms))):
                break
        elif r > 0 and not budget.another_round(first_round_s, r, rounds):
            break
        total = rounds if r < rounds else further.limit
        order: list[Arm | None] = [None, *(live if r >= rounds else arms)]
        order = order[r % len(order) :] + order[: r % len(order)]  # each arm takes each place in turn
        for arm in order:
            if arm is not None:
                run_pair(arm, spec, r, total, budget, progress, cf_runs, own_base)
                continue
            progress(f"round {r + 1}/{total}: as it is{budget.say()}")
            probe = StepLedgerProbe()
            t0 = time.monotonic()
            base.append(_run_arm(None, spec, [*default_probes(), probe]))
            ledgers.append(probe)
            if r == 0 and counterfactuals:  # the first run says what to try: it runs next, in this round
                arms, why = planned(spec, base[0], probe, usable, time.monotonic() - t0, budget, min(2, rounds))
                for a in arms:
                    run_pair(a, spec, 0, rounds, budget, progress, cf_runs, own_base)
                live = list(arms)
        if r == 0:
            first_round_s = budget.elapsed()
    budget.more += [further.note()] if further.note() else []
    cf = Counterfactuals(
        {
            a.fix: tried(
                a.fix,
                a.label,
                a.change,
                a.label,
                own_base.get(a.fix, base),
                cf_runs.get(a.fix, []),
                workers=a.workers,
            )
            for a in arms
        },
        why,
        None if counterfactuals else "not run (--no-counterfactuals)",
    )
    d = assess(target, base, [p.summary() for p in ledgers], cf, usable)
    d.budget = budget.summary()
    return d


def _still_open(
    live: list[Arm], base: list[Result], cf_runs: dict[Fix, list[Result]], own_base: dict[Fix, list[Result]]
) -> list[Arm]:
    """The arms whose further pairs can change the answer (:func:`.decide.still_open`)."""
    measured = {a.fix: measure(own_base.get(a.fix, base), cf_runs.get(a.fix, []), a.label)[0] for a in live}
    open_ = set(still_open(measured))
    return [a for a in live if a.fix in open_]


def planned(
    spec: RunSpec, first: Result, probe: Any, usable: int, run_s: float, budget: Budget, rounds: int
) -> tuple[list[Arm], dict[Fix, str]]:
    """The arms :mod:`.plan` runs from the first run's evidence, lengthened where it says; why each other is not."""
    from perfsuite.tools.doctor import plan
    from perfsuite.tools.doctor.evidence import gather

    arms, why = choose_arms(spec, first, usable)
    e = gather([first], [probe.summary()], usable)
    window = plan.Window(spec.steps, spec.warmup, epoch_batches(spec))
    candidates = [plan.Candidate(a.fix, a.label, a.workers, a.threads) for a in arms]
    chosen = plan.choose(candidates, e, window, run_s, budget.left(), rounds)
    by_fix = {a.fix: a for a in arms}
    out = []
    for c in chosen.run:
        arm = dataclasses.replace(by_fix[c.fix], why=c.why)
        if c.steps is not None:
            arm.spec = dataclasses.replace(arm.spec, steps=c.steps)
            arm.base = dataclasses.replace(spec, steps=c.steps)
        out.append(arm)
    for fix, reason in chosen.skipped.items():
        why[fix] = reason
        budget.left_out.append(f"counterfactual {by_fix[fix].label}: {reason}")
    return out, why


def run_pair(
    arm: Arm,
    spec: RunSpec,
    r: int,
    rounds: int,
    budget: Budget,
    progress: Callable[[str], None],
    cf_runs: dict[Fix, list[Result]],
    own_base: dict[Fix, list[Result]],
) -> None:
    """One round's run of ``arm``, after a run of the job as it is at the arm's length where it was lengthened."""
    from perfsuite.harness.runner import default_probes

    if arm.base is not None:
        progress(f"round {r + 1}/{rounds}: as it is, {arm.base.steps} steps{budget.say()}")
        own_base.setdefault(arm.fix, []).append(_run_arm(None, arm.base, default_probes()))
    progress(f"round {r + 1}/{rounds}: {arm.label}{budget.say()}")
    cf_runs.setdefault(arm.fix, []).append(_run_arm(arm, spec, default_probes()))


def epoch_batches(spec: RunSpec) -> int | None:
    """The batches of one epoch of a Job's DataLoader (None where its length is not known)."""
    from perfsuite.jobs.contract import Job

    loader = getattr(spec.workload, "loader", None) if isinstance(spec.workload, Job) else None
    try:
        return len(loader) if loader is not None else None
    except TypeError:  # an iterable dataset has no length
        return None

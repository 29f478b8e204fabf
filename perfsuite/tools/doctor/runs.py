"""The runs of a Job or reference workload's diagnosis: the job as it is, ``rounds`` times, each counterfactual
interleaved with it (each arm taking each place in the round in turn), within the time budget."""

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
from perfsuite.tools.doctor.diagnosis import Diagnosis, assess, tried
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
) -> Diagnosis:
    """Run ``spec`` ``rounds`` times (and its counterfactuals, interleaved) and say what limits it."""
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
    first_round_s = 0.0
    for r in range(rounds):
        if r > 0 and not budget.another_round(first_round_s, r, rounds):
            break
        order: list[Arm | None] = [None, *arms]
        order = order[r % len(order) :] + order[: r % len(order)]  # each arm takes each place in turn
        for arm in order:
            if arm is not None:
                progress(f"round {r + 1}/{rounds}: {arm.label}{budget.say()}")
                cf_runs.setdefault(arm.fix, []).append(_run_arm(arm, spec, default_probes()))
                continue
            progress(f"round {r + 1}/{rounds}: as it is{budget.say()}")
            probe = StepLedgerProbe()
            t0 = time.monotonic()
            base.append(_run_arm(None, spec, [*default_probes(), probe]))
            ledgers.append(probe)
            if r == 0 and counterfactuals:  # the first run says what to try: it runs next, in this round
                arms, why = choose_arms(spec, base[0], usable)
                keep = budget.arms_that_fit(time.monotonic() - t0, [a.label for a in arms], min(2, rounds))
                for a in arms[keep:]:
                    why[a.fix] = "left out to keep within --budget"
                arms = arms[:keep]
                for a in arms:
                    progress(f"round 1/{rounds}: {a.label}{budget.say()}")
                    cf_runs.setdefault(a.fix, []).append(_run_arm(a, spec, default_probes()))
        if r == 0:
            first_round_s = budget.elapsed()
    cf = Counterfactuals(
        {
            a.fix: tried(a.fix, a.label, a.change, a.label, base, cf_runs.get(a.fix, []), workers=a.workers)
            for a in arms
        },
        why,
        None if counterfactuals else "not run (--no-counterfactuals)",
    )
    d = assess(target, base, [p.summary() for p in ledgers], cf, usable)
    d.budget = budget.summary()
    return d

"""``perfsuite doctor -- python train.py ARGS``: a user's script diagnosed as a Job is, each run in a fresh process.

The same diagnosis as :func:`perfsuite.tools.doctor.runs.diagnose` (the step ledger, the data-wait
band with its interval, the costliest loader stage, the fix), with the fix in the script's
terms: the arguments at the line that builds its training loader
(``train.py:88 DataLoader(num_workers=0 -> 2, persistent_workers=False -> True)``).

Every run, the unchanged one and each counterfactual, is a fresh process
(:mod:`perfsuite.harness.child`): a script may initialise a process group, seed
globals or hold CUDA state. The counterfactuals run the script again, unchanged, with
perfsuite setting the training loader's arguments (:mod:`perfsuite.harness.script.loader_args`),
chosen from what the first run found (:func:`choose`): more workers where cores are free,
persistent workers where workers are forked each epoch, pinned memory on a GPU; on a machine
whose cores are full, fewer workers and fewer intra-op threads. They run interleaved with the
unchanged script (ABC, CBA, ...) and each is reported as a samples/s ratio with its interval, under its
:class:`~perfsuite.tools.doctor.model.Fix`: the findings read it under that key. Within ``--budget``
(default 5 minutes for a script), the rounds and the counterfactuals :mod:`.plan` chooses: those that can
act within the runs and change the answer, largest predicted gain first.
A run that fails raises :class:`perfsuite.errors.ScriptError` naming that run.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite.core.results import Result
from perfsuite.errors import ScriptError
from perfsuite.harness.runner import RunSpec
from perfsuite.harness.script.loader_args import Override, Site
from perfsuite.jobs.script import Script
from perfsuite.judge.contention import load_of
from perfsuite.tools.doctor.arms import more_workers
from perfsuite.tools.doctor.budget import Budget
from perfsuite.tools.doctor.decide import Further, still_open
from perfsuite.tools.doctor.diagnosis import Diagnosis, assess, measure, tried
from perfsuite.tools.doctor.evidence import BUSY_PRESSURE
from perfsuite.tools.doctor.model import Counterfactuals, Fix, Tried

DEFAULT_BUDGET_MINUTES = 5.0


@dataclass
class Run:
    """What one child process gave back: its Result, its step ledger's summary and the loader it built (JSON)."""

    result: Result
    ledger: dict[str, Any]
    loader: dict[str, Any]


@dataclass(frozen=True)
class Counterfactual:
    """One change to try: the training loader's arguments (``args``) and/or the intra-op threads."""

    fix: Fix
    why: str
    args: Mapping[str, Any] = field(default_factory=dict)
    threads: int | None = None
    steps: int | None = None  # its runs (and the unchanged runs paired with it) lengthened to this many, by the plan

    def describe(self, site: Site | None, given: Mapping[str, Any], threads: int) -> str:
        parts = []
        if self.args and site is not None:
            parts.append(Override(site, self.args).describe(given))
        if self.threads is not None:
            parts.append(f"torch.set_num_threads({self.threads}) (OMP_NUM_THREADS={self.threads}; now {threads})")
        return "; ".join(parts)


def _plan(script: Script, spec: RunSpec, cf: Counterfactual | None, site: Site | None) -> dict[str, Any]:
    from perfsuite.harness.ranks.script import _SCRIPT_FIELDS, _SPEC_FIELDS, script_argv

    fields = {k: getattr(script, k) for k in _SCRIPT_FIELDS}
    if fields["flip_pairs"] is not None:
        fields["flip_pairs"] = [list(p) for p in fields["flip_pairs"]]
    plan: dict[str, Any] = {
        "script": {"argv": script_argv(script), **fields},
        "spec": {k: getattr(spec, k) for k in _SPEC_FIELDS},
        "sys_path": [os.getcwd(), *[p for p in sys.path if p]],
    }
    if cf is not None and cf.args:
        assert site is not None
        plan["override"] = Override(site, cf.args).to_dict()
    if cf is not None and cf.threads is not None:
        plan["threads"] = cf.threads
    return plan


def run_child(
    script: Script,
    spec: RunSpec,
    what: str,
    cf: Counterfactual | None = None,
    site: Site | None = None,
    nproc: int = 1,
) -> Run:
    """One run of ``script`` in a fresh process, or a torchrun launch of ``nproc`` ranks (``what`` names it)."""
    run = _run_ranks(script, spec, what, cf, site, nproc) if nproc > 1 else _run_process(script, spec, what, cf, site)
    if cf is not None and cf.args and not run.loader.get("overridden"):
        raise ScriptError(
            f"perfsuite doctor: the {what} run of {script.command()} built no training loader at {site}, so the "
            "counterfactual did not apply (does the script build its loader elsewhere on some runs?)"
        )
    return run


def _run_ranks(
    script: Script, spec: RunSpec, what: str, cf: Counterfactual | None, site: Site | None, nproc: int
) -> Run:
    from perfsuite.errors import PerfsuiteError
    from perfsuite.harness.ranks.launch import plan_launch
    from perfsuite.harness.ranks.script import launch_script

    threads = cf.threads if cf is not None and cf.threads is not None else plan_launch(nproc, "cpu").omp_threads
    override = _plan(script, spec, cf, site).get("override")
    facts: dict[str, Any] = {"override": override}
    try:
        result = launch_script(script, spec, nproc, threads, doctor=facts)
    except PerfsuiteError as exc:
        raise ScriptError(
            f"perfsuite doctor: the {what} run of {script.command()} on {nproc} ranks failed: {exc}"
        ) from None
    return Run(result, facts["ledger"], facts["loader"])


def _run_process(script: Script, spec: RunSpec, what: str, cf: Counterfactual | None, site: Site | None) -> Run:
    out = Path(tempfile.mkdtemp(prefix="perfsuite-doctor-"))
    try:
        (out / "plan.json").write_text(json.dumps(_plan(script, spec, cf, site)), encoding="utf-8")
        env = dict(os.environ)
        if cf is not None and cf.threads is not None:
            env["OMP_NUM_THREADS"] = str(cf.threads)
        command = [sys.executable, "-m", "perfsuite.harness.child", str(out)]
        with open(out / "output.log", "w", encoding="utf-8") as log:
            proc = subprocess.run(command, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
        if proc.returncode != 0:
            raise _failed(script, what, out, proc.returncode)
        run = Run(
            Result.from_json((out / "result.json").read_text(encoding="utf-8")),
            json.loads((out / "ledger.json").read_text(encoding="utf-8")),
            json.loads((out / "loader.json").read_text(encoding="utf-8")),
        )
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return run


def _failed(script: Script, what: str, out: Path, code: int) -> ScriptError:
    try:
        error = json.loads((out / "error.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        log = (out / "output.log").read_text(encoding="utf-8", errors="replace").rstrip().splitlines()[-20:]
        return ScriptError(
            f"perfsuite doctor: the {what} run of {script.command()} died with exit status {code} without a Python "
            "exception; its last lines:\n" + "\n".join(log)
        )
    message = str(error.get("message", "")).strip()
    return ScriptError(
        f"perfsuite doctor: the {what} run of {script.command()} failed: {error.get('type')}: {message}",
        error.get("script_traceback") or "",
    )


def choose(first: Run, usable: int) -> list[Counterfactual]:
    """What could be tried, from the first run (see the module docstring); :mod:`.plan` decides which run."""
    loader, result = first.loader, first.result
    if not loader.get("site"):
        return []
    given = loader.get("given", {})
    workers = int(result.knobs.get("num_workers", given.get("num_workers", 0)) or 0)
    persistent = bool(result.knobs.get("persistent_workers", given.get("persistent_workers", False)))
    threads = int(loader.get("threads") or 1)
    out: list[Counterfactual] = []
    more = more_workers(workers, usable)
    if more is not None:
        out.append(
            Counterfactual(
                Fix.MORE_WORKERS,
                f"{workers} worker(s) on {usable} usable core(s)",
                {"num_workers": more, "persistent_workers": True},
            )
        )
    if workers > 0 and not persistent:
        out.append(
            Counterfactual(Fix.PERSISTENT, "the workers are forked again at every epoch", {"persistent_workers": True})
        )
    full = workers + threads > usable
    why = f"{workers} worker(s) + {threads} intra-op thread(s) on {usable} usable core(s)"
    if full and workers > 0:
        fewer = max(0, min(workers - 1, usable - 1))
        args = {"num_workers": fewer}
        if fewer > 0:
            args["persistent_workers"] = True
        out.append(Counterfactual(Fix.FEWER_WORKERS, f"{why}: fewer workers", args))
    pressure = load_of(result).pressure or 0.0
    if threads > 1 and (full or pressure >= BUSY_PRESSURE):
        fit = max(1, usable - workers) if full and usable > workers else 1
        busy = "" if full else f"; the machine under CPU pressure {pressure:.0%}"
        out.append(Counterfactual(Fix.THREADS, f"{why}{busy}: fewer intra-op threads", threads=fit))
    if result.fingerprint.device.startswith("cuda") and not result.knobs.get("pin_memory"):
        out.append(
            Counterfactual(Fix.PIN_MEMORY, "batches are copied to the GPU from pageable memory", {"pin_memory": True})
        )
    return out


def diagnose_script(
    script: Script,
    spec: RunSpec,
    target: str,
    rounds: int,
    counterfactuals: bool = True,
    progress: Callable[[str], None] = lambda s: None,
    nproc: int = 1,
    budget: Budget | None = None,
    max_rounds: int | None = None,
) -> Diagnosis:
    """Run the script ``rounds`` times, each counterfactual interleaved, every run a fresh process (or a torchrun
    launch of ``nproc`` ranks, each rank given its share of the usable cores), within ``budget``; up to
    ``max_rounds`` (None: ``rounds``) while further pairs can change the answer (:mod:`.decide`)."""
    import time

    from perfsuite.core.cores import usable_cores

    if spec.observe_steps < 1:
        spec = dataclasses.replace(spec, observe_steps=1)
    if spec.sol_steps < 3:
        spec = dataclasses.replace(spec, sol_steps=5)
    budget = budget or Budget.minutes(DEFAULT_BUDGET_MINUTES)
    usable = max(1, usable_cores().usable // max(1, nproc))
    base: list[Run] = []
    chosen: list[Counterfactual] = []
    cf_runs: dict[int, list[Run]] = {}
    own_base: dict[int, list[Run]] = {}  # a lengthened counterfactual's unchanged runs, at its length
    left: dict[Fix, str] = {}
    site: Site | None = None
    first_round_s = 0.0

    def of(r: int) -> int:
        """The rounds a progress line counts: --rounds, then --max-rounds for the further ones."""
        return rounds if r < rounds else further.limit

    def _measured(i: int) -> Any:
        """Counterfactual ``i`` against the unchanged runs of its rounds, so far."""
        paired = [x.result for x in own_base.get(i, base)]
        return measure(paired, [x.result for x in cf_runs[i]], _name(chosen[i]))[0]

    def pair(i: int, r: int) -> None:
        cf = chosen[i]
        if cf.steps is not None:
            progress(f"round {r + 1}/{of(r)}: as it is, {cf.steps} steps{budget.say()}")
            longer = dataclasses.replace(spec, steps=cf.steps)
            own_base.setdefault(i, []).append(
                run_child(script, longer, f"round {r + 1} unchanged, longer", nproc=nproc)
            )
        progress(f"round {r + 1}/{of(r)}: {cf.why}{budget.say()}")
        at = spec if cf.steps is None else dataclasses.replace(spec, steps=cf.steps)
        cf_runs[i].append(run_child(script, at, f"round {r + 1} counterfactual {_name(cf)}", cf, site, nproc))

    live: list[int] = []  # the counterfactuals a round runs: all up to --rounds, then those still open
    further = Further(rounds, max(rounds, max_rounds or rounds))
    for r in range(further.limit):
        if r >= rounds:
            live = still_open({i: _measured(i) for i in live})
            labels = [_change(chosen[i], base[0]) for i in live]
            if not further.go_on(labels, budget, first_round_s * (1 + len(live)) / (1 + len(chosen))):
                break
        elif r > 0 and not budget.another_round(first_round_s, r, rounds):
            break
        arms: list[int] = [-1, *(live if r >= rounds else range(len(chosen)))]
        if r % 2 == 1:
            arms.reverse()
        for arm in arms:
            if arm < 0:
                progress(f"round {r + 1}/{of(r)}: as it is{budget.say()}")
                t0 = time.monotonic()
                base.append(run_child(script, spec, f"round {r + 1} unchanged", nproc=nproc))
                if r == 0:
                    site = Site.from_dict(base[0].loader["site"]) if base[0].loader.get("site") else None
                    options = choose(base[0], usable) if counterfactuals else []
                    chosen, left = planned(spec, base[0], options, usable, time.monotonic() - t0, budget, rounds)
                    cf_runs = {i: [] for i in range(len(chosen))}
                    for i in range(len(chosen)):  # round 1: each right after the unchanged run, in order
                        pair(i, 0)
                    live = list(range(len(chosen)))
                continue
            if r > 0:
                pair(arm, r)
        if r == 0:
            first_round_s = budget.elapsed()
    budget.more += [further.note()] if further.note() else []
    d = assess_script(target, base, chosen, cf_runs, usable, counterfactuals, left, own_base)
    d.budget = budget.summary()
    return d


def planned(
    spec: RunSpec, first: Run, options: Sequence[Counterfactual], usable: int, run_s: float, budget: Budget, rounds: int
) -> tuple[list[Counterfactual], dict[Fix, str]]:
    """The counterfactuals :mod:`.plan` runs from the first run's evidence (lengthened where it says), and why each
    other one does not."""
    from perfsuite.tools.doctor import plan
    from perfsuite.tools.doctor.evidence import gather

    if not options:
        return [], {}
    e = gather([first.result], [first.ledger], usable)
    batches = first.loader.get("batches")
    window = plan.Window(spec.steps, spec.warmup, int(batches) if isinstance(batches, int) else None)
    workers = {cf.fix: int(cf.args["num_workers"]) if "num_workers" in cf.args else None for cf in options}
    candidates = [plan.Candidate(cf.fix, cf.why, workers[cf.fix], cf.threads) for cf in options]
    decided = plan.choose(candidates, e, window, run_s, budget.left(), min(2, rounds))
    by_fix = {cf.fix: cf for cf in options}
    out = [dataclasses.replace(by_fix[c.fix], steps=c.steps) for c in decided.run]
    for fix, reason in decided.skipped.items():
        budget.left_out.append(f"counterfactual {by_fix[fix].why}: {reason}")
    return out, decided.skipped


def assess_script(
    target: str,
    base: Sequence[Run],
    chosen: Sequence[Counterfactual],
    cf_runs: Mapping[int, Sequence[Run]],
    usable: int,
    asked: bool = True,
    left: Mapping[Fix, str] | None = None,
    own_base: Mapping[int, Sequence[Run]] | None = None,
) -> Diagnosis:
    """A Job's diagnosis of the unchanged runs, with the counterfactuals measured under their :class:`Fix`; the
    fixes at the script's line."""
    results = [b.result for b in base]
    loader = base[0].loader
    site = Site.from_dict(loader["site"]) if loader.get("site") else None
    given = dict(loader.get("given", {}))
    threads = int(loader.get("threads") or 1)
    measured: dict[Fix, Tried] = {}
    for i, cf in enumerate(chosen):
        change = cf.describe(site, given, threads)
        workers = int(cf.args["num_workers"]) if "num_workers" in cf.args else None
        runs = [x.result for x in cf_runs.get(i, [])]
        paired = [x.result for x in (own_base or {}).get(i, [])] or results
        if cf.steps is not None:
            change += f" (its runs and the unchanged ones paired with it lengthened to {cf.steps} steps)"
        measured[cf.fix] = tried(cf.fix, change, change, cf.why, paired, runs, workers=workers)
    none = None
    if not chosen:
        none = (
            "not run (--no-counterfactuals)"
            if not asked
            else "no training loader built at a line of the script was found"
            if site is None
            else "nothing to try: no free core for more workers, workers persist, cores not full"
            if not left
            else "none could change the answer within --budget: "
            + "; ".join(f"{k.value}: {v}" for k, v in left.items())
        )
    tries = Counterfactuals(measured, dict(left or {}), none)
    d = assess(target, results, [b.ledger for b in base], tries, usable)
    d.findings = [dataclasses.replace(f, fix=in_script_terms(f.fix, site, given)) for f in d.findings]
    if site is not None:
        d.notes.append(f"the training loader, as the script builds it: {_call(site, given)}")
    return d


def _change(cf: Counterfactual, first: Run) -> str:
    """The change ``cf`` makes, at the script's line where it was found (as the report's counterfactuals name it)."""
    site = Site.from_dict(first.loader["site"]) if first.loader.get("site") else None
    return cf.describe(site, dict(first.loader.get("given", {})), int(first.loader.get("threads") or 1)) or cf.why


def _name(cf: Counterfactual) -> str:
    parts = [f"{k}={v!r}" for k, v in cf.args.items()]
    if cf.threads is not None:
        parts.append(f"threads={cf.threads}")
    return "(" + ", ".join(parts) + ")"


def _call(site: Site, given: Mapping[str, Any]) -> str:
    inner = ", ".join(f"{k}={v!r}" for k, v in given.items())
    return f"{site} DataLoader({inner})"


_CALL = re.compile(r"DataLoader\(([^()]*)\)")


def in_script_terms(fix: str, site: Site | None, given: Mapping[str, Any]) -> str:
    """A fix written as ``DataLoader(num_workers=2)``, at the script's line:
    ``train.py:88 DataLoader(num_workers=0 -> 2)``."""
    fix = fix.replace("perfsuite: aug='gpu'; ", "")  # a Job field: a script has no such option
    if site is None:
        return fix

    def at_line(match: re.Match[str]) -> str:
        try:
            args = {
                k.strip(): ast.literal_eval(v.strip()) for k, v in (a.split("=", 1) for a in match.group(1).split(","))
            }
        except (ValueError, SyntaxError):  # already in the script's terms (a tried change: ``2 -> 1``) or not Python
            return match.group(0) if "->" in match.group(0) else f"{site} {match.group(0)}"
        try:
            return Override(site, args).describe(given)
        except Exception:  # noqa: BLE001 - an argument perfsuite does not set: the fix as written, at the line
            return f"{site} {match.group(0)}"

    return _CALL.sub(at_line, fix)

"""Ctrl-C trials: real SIGINTs at random points of a real `pytest tests/perf -p perfsuite` session.

    python scripts/interrupt_trials.py                     # 10 trials, seed 0
    python scripts/interrupt_trials.py --trials 20 --seed 3 -- -k face_parsing

Each trial starts the reference suite in its own process group, as a terminal would
(``--perfsuite-compare --perfsuite-update-exact`` into a scratch copy of the committed exact file, JSON
and markdown reports, saved baselines in a scratch directory), waits until collection has ended and then
a random time drawn between ``--min-delay`` and ``--max-delay`` seconds, and sends SIGINT to the whole
group, as Ctrl-C does (``--to-pid`` sends it to pytest's pid alone, so its DataLoader workers never see it).
A trial passes when:

* pytest exits non-zero (2, or 1 if a test had already failed) within ``--grace`` seconds;
* the JSON report, if written, has ``status: partial`` and the markdown report starts with PARTIAL;
* the scratch exact file is byte-identical to the committed one (never rewritten by an interrupted session);
* no temporary file is left and every JSON file written parses;
* no process of the trial's group is alive afterwards.

Prints one line per trial and a summary; exits 1 if any trial failed. Wall-clock delays only choose
where the interrupt lands; nothing timed is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def group_alive(pgid: int) -> list[int]:
    """Pids still alive in process group ``pgid`` (zombies excluded)."""
    import psutil

    alive = []
    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                alive.append(proc.pid)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return alive


def trial(index: int, delay: float, scratch: Path, args: argparse.Namespace, extra: list[str]) -> tuple[bool, str]:
    exact_dir = scratch / "exact"
    shutil.copytree(ROOT / "baselines" / "exact", exact_dir)
    committed = {p.name: p.read_bytes() for p in exact_dir.glob("*.json")}
    report_json, report_md = scratch / "report.json", scratch / "report.md"
    (scratch / "baselines").mkdir()  # --perfsuite-compare wants the timing baselines directory to exist
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "tests/perf",
        "-p",
        "perfsuite",
        "-p",
        "no:randomly",
        "--perfsuite-compare",
        "--perfsuite-update-exact",
        f"--perfsuite-exact-dir={exact_dir}",
        "--perfsuite-save",
        f"--perfsuite-baselines={scratch / 'baselines'}",
        f"--perfsuite-report-json={report_json}",
        f"--perfsuite-report-md={report_md}",
        *extra,
    ]
    env = {**os.environ, "PERFSUITE_CACHE": args.cache}
    log = (scratch / "pytest.log").open("w")
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    pgid = proc.pid
    started = time.monotonic() + args.grace
    while time.monotonic() < started and proc.poll() is None:  # the delay counts from collection's end
        if "collected " in (scratch / "pytest.log").read_text(errors="replace"):
            break
        time.sleep(0.2)
    time.sleep(delay)
    if proc.poll() is not None:
        log.close()
        return False, f"the session ended by itself before the interrupt (exit {proc.returncode}); lower --max-delay"
    if args.to_pid:
        os.kill(proc.pid, signal.SIGINT)
    else:
        os.killpg(pgid, signal.SIGINT)
    try:
        code = proc.wait(timeout=args.grace)
    except subprocess.TimeoutExpired:
        os.killpg(pgid, signal.SIGKILL)
        proc.wait()
        log.close()
        return False, f"still running {args.grace:.0f} s after SIGINT: killed"
    log.close()
    problems = []
    if code == 0:
        problems.append("exit 0 after SIGINT")
    if report_json.exists():
        status = json.loads(report_json.read_text())["status"]
        if status != "partial":
            problems.append(f"report.json status {status!r}")
    if report_md.exists() and not report_md.read_text().startswith("> **PARTIAL REPORT**"):
        problems.append("report.md not marked partial")
    for name, data in committed.items():
        if (exact_dir / name).read_bytes() != data:
            problems.append(f"exact file {name} rewritten")
    for path in scratch.rglob("*"):
        if ".tmp-" in path.name:
            problems.append(f"temporary left: {path.name}")
        elif path.suffix == ".json" and path.is_file():
            try:
                json.loads(path.read_text())
            except ValueError:
                problems.append(f"half-written {path.name}")
    time.sleep(0.5)
    left = group_alive(pgid)
    if left:
        problems.append(f"processes left: {left}")
        for pid in left:
            with_suppress_kill(pid)
    tail = (scratch / "pytest.log").read_text().strip().splitlines()[-1:] or [""]
    what = f"exit {code}, report {'partial' if report_json.exists() else 'not written'}; {tail[0][:90]}"
    return not problems, what + ("; " + "; ".join(problems) if problems else "")


def with_suppress_kill(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Real SIGINTs at random points of a perf session (see the module).")
    parser.add_argument("--trials", type=int, default=10, help="how many sessions to interrupt (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="seeds the interrupt delays")
    parser.add_argument("--min-delay", type=float, default=1.0, help="earliest interrupt, seconds after collection")
    parser.add_argument("--max-delay", type=float, default=60.0, help="latest interrupt, seconds after collection")
    parser.add_argument("--grace", type=float, default=120.0, help="seconds the session may take to stop")
    parser.add_argument("--to-pid", action="store_true", help="signal pytest's pid only, not its process group")
    parser.add_argument(
        "--cache",
        default=os.environ.get("PERFSUITE_CACHE", str(Path.home() / ".cache" / "perfsuite")),
        help="dataset cache (shared between trials, so each one measures rather than generates)",
    )
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments, after --")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    passed = 0
    with open("/proc/loadavg") as fh:
        print(f"load average at start: {' '.join(fh.read().split()[:3])}")
    for i in range(args.trials):
        delay = rng.uniform(args.min_delay, args.max_delay)
        with tempfile.TemporaryDirectory(prefix="perfsuite-trial-") as tmp:
            ok, what = trial(i, delay, Path(tmp), args, args.pytest_args)
        passed += ok
        print(f"trial {i + 1}: SIGINT at {delay:5.1f} s: {'ok  ' if ok else 'FAIL'} {what}", flush=True)
    with open("/proc/loadavg") as fh:
        print(f"load average at end: {' '.join(fh.read().split()[:3])}")
    print(f"{passed}/{args.trials} trials stopped cleanly (non-zero exit, reports partial, nothing left behind)")
    return 0 if passed == args.trials else 1


if __name__ == "__main__":
    sys.exit(main())

"""Time every row of the bad-input table as a user meets it and write docs/bad_input.md.

    python scripts/bad_input_table.py          # run each row in a fresh `python -m perfsuite.cli`, rewrite the page
    python scripts/bad_input_table.py ID ...   # run these rows again; the page keeps the other rows' lines

Each row (tests/unit/bad_inputs.py) runs in a scratch directory made by ``prepare``; the seconds are
wall time from the process's start to its exit (interpreter start and imports included), so they
are what a user waits for. The disk-full rows mock the write (``os.fsync`` raises ENOSPC), so they run
in this process and time ``main()`` alone. A row that holds an ``--out`` lock holds it here while its
process runs; a row sent SIGTERM is timed to its exit, the wait for its run to start included. The
page's table sits between its markers.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "unit")]

from bad_inputs import CASES, Case, prepare, sigterm_when_ready  # type: ignore[import-not-found]  # noqa: E402

from perfsuite.core.outlock import out_lock  # noqa: E402
from perfsuite.core.tmpfiles import write_text_atomic  # noqa: E402

PAGE = ROOT / "docs" / "bad_input.md"
START, END = "<!-- bad-input-table:start -->", "<!-- bad-input-table:end -->"


def in_process(case: Case, cwd: Path) -> tuple[int, str, float, float]:
    from perfsuite.cli.main import main
    from perfsuite.core import tmpfiles

    def full(fd: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    real, tmpfiles.os.fsync = tmpfiles.os.fsync, full
    here = os.getcwd()
    err = io.StringIO()
    try:
        os.chdir(cwd)
        t0, c0 = time.perf_counter(), time.process_time()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(case.args())
        return code, err.getvalue(), time.perf_counter() - t0, time.process_time() - c0
    finally:
        tmpfiles.os.fsync = real
        os.chdir(here)


def fresh_process(case: Case, cwd: Path) -> tuple[int, str, float, float]:
    import resource

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(cwd)]), "CI": "1"}
    with contextlib.ExitStack() as held:
        if case.held is not None:  # another run writing the same --out
            held.enter_context(out_lock(cwd / case.held))
        t0, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        if case.sigterm_when is not None:
            with tempfile.TemporaryDirectory() as tmpdir:
                code, err = sigterm_when_ready(case, cwd, env, Path(tmpdir))
        else:
            done = subprocess.run(
                [sys.executable, "-m", "perfsuite.cli", *case.args()], cwd=cwd, env=env, capture_output=True, text=True
            )
            code, err = done.returncode, done.stderr
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return code, err, time.perf_counter() - t0, cpu


def row_line(case: Case, code: int, err: str, seconds: float, cpu: float) -> str:
    lines = err.strip().splitlines() or [""]
    # perfsuite's line; a DataLoader worker killed by SIGSEGV has torch's own line printed before it
    first = next((line for line in lines if line.startswith("perfsuite")), lines[0]).replace("|", "\\|")
    first = first if len(first) <= 160 else first[:157] + "..."
    how = " (write mocked)" if case.disk_full else ""
    cells = [case.argv[0], case.kind, f"`{case.id}`", str(code), f"{seconds:.1f}{how}", f"{cpu:.1f}", first]
    return "| " + " | ".join(cells) + " |"


def render(rows: list[tuple[Case, int, str, float, float] | str]) -> str:
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "?"
    out = [
        f"Measured by `python scripts/bad_input_table.py` on a {os.cpu_count()}-CPU VM shared with other work (load "
        f"average {load} at the end): *seconds* is wall time from the command's start to its exit, interpreter and "
        "imports included; *CPU s* the CPU time it used, which the load does not stretch. Rows that check a name "
        "import torch (about 1.7 CPU s), which under that load takes most of their wall time.",
        "",
        "| command | class | row | exit | seconds | CPU s | the first line it prints |",
        "|---|---|---|---|---|---|---|",
    ]
    out += [row if isinstance(row, str) else row_line(*row) for row in rows]
    return "\n".join(out)


def kept_lines(page: str) -> dict[str, str]:
    """The page's current line of each row, by id (for rows not run again)."""
    return {case.id: line for line in page.splitlines() for case in CASES if f"| `{case.id}` |" in line}


def main(only: list[str]) -> int:
    unknown = sorted(set(only) - {case.id for case in CASES})
    if unknown:
        print(f"no such row: {', '.join(unknown)}", file=sys.stderr)
        return 2
    page = PAGE.read_text(encoding="utf-8")
    kept = kept_lines(page)
    rows: list[tuple[Case, int, str, float, float] | str] = []
    for case in CASES:
        if only and case.id not in only and case.id in kept:
            rows.append(kept[case.id])
            continue
        with tempfile.TemporaryDirectory() as tmp:
            cwd = prepare(Path(tmp))
            code, err, seconds, cpu = (in_process if case.disk_full else fresh_process)(case, cwd)
        rows.append((case, code, err, seconds, cpu))
        print(f"{case.id}: exit {code} in {seconds:.1f} s ({cpu:.1f} CPU s)", file=sys.stderr)
    head, _, rest = page.partition(START)
    _, _, tail = rest.partition(END)
    write_text_atomic(PAGE, f"{head}{START}\n{render(rows)}\n{END}{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

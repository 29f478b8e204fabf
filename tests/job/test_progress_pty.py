"""Under a pseudo-terminal, the long commands show a live line: exec, a 2-rank run, doctor on a test id (issue 37).

Each command runs for real in a subprocess whose stdout and stderr are a pty, as a person's terminal would be;
the test reads what it drew. Slow: each trains for a few steps.
"""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

pty = pytest.importorskip("pty")

ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def under_pty(argv: list[str], cwd: Path, marker: str, timeout_s: float = 400.0) -> tuple[str, float | None, int]:
    """(what the command drew, seconds until ``marker`` first showed or None, exit status)."""
    import fcntl
    import struct
    import termios

    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(TERM="xterm", COLUMNS="200", PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]))
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdin=child, stdout=child, stderr=child, cwd=cwd, env=env, close_fds=True)
    os.close(child)
    chunks: list[bytes] = []
    seen: float | None = None
    try:
        while time.monotonic() - start < timeout_s:
            ready, _, _ = select.select([main], [], [], 1.0)
            if ready:
                try:
                    data = os.read(main, 65536)
                except OSError:
                    break
                if not data:
                    break
                chunks.append(data)
                if seen is None and marker in ANSI.sub("", b"".join(chunks).decode(errors="replace")):
                    seen = time.monotonic() - start
            elif proc.poll() is not None:
                break
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        os.close(main)
    return ANSI.sub("", b"".join(chunks).decode(errors="replace")), seen, proc.returncode


def perfsuite(*args: str) -> list[str]:
    return [sys.executable, "-m", "perfsuite.cli", *args]


@pytest.mark.slow
def test_exec_shows_its_phases(tmp_path: Path) -> None:
    data = tmp_path / "faces"
    subprocess.run([sys.executable, str(ROOT / "examples/own_pipeline/make_data.py"), str(data)], check=True)
    script = ["python", str(ROOT / "examples/own_pipeline/train.py"), "--data", str(data), "--epochs", "12"]
    text, seen, code = under_pty(
        perfsuite("exec", "--steps", "4", "--", *script, "--workers", "0"), tmp_path, "perfsuite exec"
    )
    assert code == 0, text[-2000:]
    assert seen is not None, "no live line"
    assert "warm-up" in text and "measured window" in text and "observed steps" in text
    print(f"first progress after {seen:.1f} s")


@pytest.mark.slow
def test_a_two_rank_run_shows_a_live_line_while_the_ranks_run(tmp_path: Path) -> None:
    argv = perfsuite("run", "face_parsing", "--nproc-per-node", "2", "--steps", "3", "--warmup", "1")
    text, seen, code = under_pty([*argv, "--observe-steps", "1", "--workers", "0"], tmp_path, "on 2 ranks:")
    assert code == 0, text[-2000:]
    assert seen is not None and "launching and running (torchrun)" in text
    print(f"first progress after {seen:.1f} s")


@pytest.mark.slow
def test_doctor_on_a_test_id_shows_each_round_and_keeps_pytests_output_to_itself(tmp_path: Path) -> None:
    test_id = "tests/perf/test_loader.py::test_loader_settings[gray_classifier-workers0]"
    argv = perfsuite("doctor", test_id, "--rounds", "2", "--steps", "6", "--no-counterfactuals")
    text, seen, code = under_pty(argv, ROOT, "perfsuite doctor: ")
    assert code == 0, text[-2000:]
    assert seen is not None
    assert "round 1/2" in text and "round 2/2" in text
    assert " passed" not in text and "PytestAssertRewriteWarning" not in text  # pytest's own lines stay captured
    assert "bottleneck:" in text
    print(f"first progress after {seen:.1f} s")


@pytest.mark.slow
def test_compare_at_a_terminal_prints_a_table_and_no_markdown(tmp_path: Path) -> None:
    data = ROOT / "tests" / "data" / "results"
    text, seen, code = under_pty(
        perfsuite("compare", str(data / "base.json"), str(data / "head_slow.json")), tmp_path, "verdict"
    )
    assert code == 1 and seen is not None, text
    assert "<br>" not in text and "<details>" not in text and "|---" not in text
    assert "regressed" in text and "12.9 ms" in text
    piped = subprocess.run(
        perfsuite("compare", str(data / "base.json"), str(data / "head_slow.json")),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert "| test | metric |" in piped.stdout  # not a terminal: the PR-comment markdown

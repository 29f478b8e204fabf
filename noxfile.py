"""nox sessions: `nox -s tests` (the unit, property and plugin tests), `nox -s lint` (ruff, mypy and
the import contract), `nox -s docs` (the MkDocs site, strict), `nox -s perf` (the reference suite),
`nox -s baseline` (store this machine's baselines), `nox -s dev` (the environment alone).

**One torch per checkout.** Every session that needs torch (tests, slow, lint, perf, baseline, dev) runs in
the same environment, `.venv/` in this directory, made by the first of them: torch is installed once, not
once per session (four CPU torches took about 6 GB), and `source .venv/bin/activate` then puts `perfsuite`
on PATH. perfsuite is installed into it editable, again only when pyproject.toml changed. `nox -s docs`
needs no torch and keeps a small virtualenv of its own under `.nox/`.

Torch is the CPU build unless the runner's own is reused: the environment gets torch==2.13.0 from the
PyTorch CPU wheel index (PERFSUITE_TORCH_INDEX overrides it), which on a stock machine is the CPU wheel,
never the multi-GB CUDA build that plain PyPI resolves to on Linux. When the environment already has torch
(made with PERFSUITE_SYSTEM_TORCH=1 on a GPU runner, it sees the system's) nothing is installed. When the CPU
index cannot be reached, the session says so and installs torch==2.13.0 from the indexes pip is configured
with (a local wheel folder, a mirror; on a stock machine that would be the CUDA build).
"""

from __future__ import annotations

import os
import sys

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True

CPU_TORCH = "torch==2.13.0"
CPU_INDEX = os.environ.get("PERFSUITE_TORCH_INDEX", "https://download.pytorch.org/whl/cpu")
# Pinned: a new ruff or mypy release adds rules, and CI must not turn red on its own.
LINTERS = ("ruff==0.17.6", "mypy==2.4.1", "import-linter==2.16")
# Pinned for the same reason; the docs need no perfsuite install (the generated tables are checked by tests).
DOCS = ("mkdocs==1.6.1", "mkdocs-material==9.8.1")
QUIET_MKDOCS = {"NO_MKDOCS_2_WARNING": "1"}  # Material's end-of-life notice is not a docs warning
SYSTEM_TORCH = os.environ.get("PERFSUITE_SYSTEM_TORCH", "") not in ("", "0", "false", "no")
VENV_PARAMS = ["--system-site-packages"] if SYSTEM_TORCH else []
# Runs `nox -s baseline` keeps per test: the default of --perfsuite-baseline-runs (perfsuite/core/options.py).
BASELINE_RUNS = 3
ROOT = os.path.dirname(os.path.abspath(__file__))
VENV = os.path.join(ROOT, ".venv")  # the one environment of this checkout (see the module docstring)
ACTIVATE = os.path.join(".venv", "Scripts" if os.name == "nt" else "bin", "activate")
# What a failing exact check tells people to run: this session, not the pytest command nox runs inside it.
UPDATE_EXACT = "PERFSUITE_UPDATE_EXACT_COMMAND"
# pip prints its warnings and errors only: a failing install still shows why, a working one stays out of the way.
PIP_QUIET = "--quiet"
TORCH_PROBE = (
    "import importlib.util as u; "
    "print('yes' if u.find_spec('torch') and __import__('torch').__version__.startswith('2.13.') else 'no')"
)


def install_torch(session: nox.Session, pip: tuple[str, ...]) -> None:
    """The CPU torch from the PyTorch CPU index with ``pip`` (the shared environment's); the configured indexes
    if the CPU index cannot be reached (see the module docstring)."""
    session.log(
        f"installing {CPU_TORCH} (CPU) from {CPU_INDEX} (PERFSUITE_TORCH_INDEX overrides it) into {VENV}: the "
        "first time it downloads the wheel, which can take minutes; pip prints only warnings and errors"
    )
    try:
        session.run_install(
            *pip,
            "install",
            PIP_QUIET,
            CPU_TORCH,
            "--index-url",
            CPU_INDEX,
            "--timeout",
            "30",
            "--retries",
            "1",
            external=True,
        )
    except nox.command.CommandFailed:
        session.warn(f"{CPU_INDEX} could not be used; installing {CPU_TORCH} from pip's configured indexes instead")
        session.run_install(*pip, "install", PIP_QUIET, CPU_TORCH, external=True)


def shared_env(session: nox.Session) -> str:
    """The checkout's one environment (``VENV``), made if it is not there; its python."""
    python = os.path.join(VENV, "Scripts" if os.name == "nt" else "bin", "python")
    if not os.path.exists(python):
        session.log(f"making {VENV}: the one environment every session of this checkout shares")
        session.run_install(sys.executable, "-m", "venv", *VENV_PARAMS, VENV, external=True)
    return python


def install(session: nox.Session) -> str:
    """The shared environment with the CPU torch (unless it has torch) and perfsuite's dev extras; its python.

    perfsuite is (re)installed only when pyproject.toml differs from the one it was installed with.
    """
    python = shared_env(session)
    pip = (python, "-m", "pip")
    if not SYSTEM_TORCH and not _torch_installed(session, python):
        install_torch(session, pip)
    stamp = os.path.join(VENV, ".perfsuite-pyproject")
    wanted = _pyproject_digest()
    if _read(stamp) != wanted:
        session.log(f"installing perfsuite (editable) with its dev extras into {VENV}")
        session.run_install(*pip, "install", PIP_QUIET, "-e", f"{ROOT}[dev]", external=True)  # torch stays
        _write(stamp, wanted)
    session.run_install(python, "-c", "import torch; print('torch', torch.__version__)", external=True)
    return python


def _pyproject_digest() -> str:
    import hashlib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return ""


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    except OSError:
        pass  # no stamp: the next session installs again, nothing worse


def _torch_installed(session: nox.Session, python: str) -> bool:
    """Whether the shared environment can already import torch 2.13 (installed before, or the system's).

    run_install: the check belongs to the install step, so it also runs under --install-only (without it,
    pip would resolve torch from perfsuite's own requirement, which on a stock index is the CUDA build).
    """
    answer = session.run_install(python, "-c", TORCH_PROBE, silent=True, external=True)
    return isinstance(answer, str) and answer.strip().endswith("yes")


def bin_of(python: str, name: str) -> str:
    """A console script of the shared environment (pytest, ruff, mypy)."""
    return os.path.join(os.path.dirname(python), name)


def activated(python: str, **extra: str) -> dict[str, str]:
    """The environment variables of the shared environment activated: its bin/ first on PATH (so the tests'
    own subprocesses find `perfsuite`), VIRTUAL_ENV set."""
    bindir = os.path.dirname(python)
    return {"PATH": bindir + os.pathsep + os.environ.get("PATH", ""), "VIRTUAL_ENV": VENV, **extra}


def run_tests(session: nox.Session, marker: str, python: str) -> None:
    """pytest over tests/ (not the perf suite) on two xdist workers, the tests ``marker`` selects."""
    session.run(
        python,
        "-m",
        "pytest",
        "tests",
        "--ignore=tests/perf",
        "-m",
        marker,
        "-n",
        os.environ.get("PERFSUITE_TEST_WORKERS", "2"),
        *session.posargs,
        env=activated(python, PERFSUITE_HYPOTHESIS_PROFILE=os.environ.get("PERFSUITE_HYPOTHESIS_PROFILE", "ci")),
        external=True,
    )


@nox.session(venv_backend="none")
def tests(session: nox.Session) -> None:
    """Unit, property and plugin tests (CPU; GPU-only tests skip with a reason): all but the slow ones."""
    run_tests(session, "not slow", install(session))


@nox.session(venv_backend="none")
def slow(session: nox.Session) -> None:
    """The slow end-to-end tests: the catch table's faults, DDP launches, tune, ab, doctor, bisect, and the history
    dashboard in headless Chromium (CI runs them too; the browser test skips, saying why, without chromium)."""
    python = install(session)
    # drives the system's chromium (.ci/run installs it where it can)
    session.run_install(python, "-m", "pip", "install", PIP_QUIET, "selenium>=4.20", external=True)
    run_tests(session, "slow", python)


@nox.session(venv_backend="none")
def lint(session: nox.Session) -> None:
    """ruff (lint, format check), mypy over perfsuite/, and the import contract (lint-imports; pyproject.toml)."""
    python = install(session)  # mypy reads torch's and numpy's own type information
    session.run_install(python, "-m", "pip", "install", PIP_QUIET, *LINTERS, external=True)
    session.run(bin_of(python, "ruff"), "check", ".", external=True)
    session.run(bin_of(python, "ruff"), "format", "--check", ".", external=True)
    session.run(bin_of(python, "mypy"), external=True)
    session.run(bin_of(python, "lint-imports"), external=True)


@nox.session
def docs(session: nox.Session) -> None:
    """The documentation under docs/, built with MkDocs Material in strict mode: warnings and broken links fail."""
    session.install(*DOCS)
    session.run("mkdocs", "build", "--strict", "--site-dir", f"{session.create_tmp()}/site", env=QUIET_MKDOCS)


@nox.session(venv_backend="none")
def perf(session: nox.Session) -> None:
    """The reference perf suite; smoke scale by default, `-- --perfsuite-scale full` on a GPU. pytest-benchmark's
    tables (48 lines at 210 columns) are left out of a run's output: `-- --benchmark-tables` prints them."""
    python = install(session)
    rerun = " ".join(["nox -s perf --", *session.posargs, "--perfsuite-update-exact"])
    tables = BENCHMARK_TABLES in session.posargs
    session.posargs[:] = [arg for arg in session.posargs if arg != BENCHMARK_TABLES]
    quiet = () if tables else ("--benchmark-quiet",)  # the JSON (--benchmark-json, --benchmark-save) is kept either way
    # -q: no platform and plugin header; each skipped test's reason (a GPU-only test on a CPU machine) is in
    # perfsuite's own summary, folded to the terminal's width
    run_suite(session, python, "-q", "--perfsuite-compare", *quiet, env=activated(python, **{UPDATE_EXACT: rerun}))
    session.log(f"perfsuite is installed in {VENV}: `source {ACTIVATE}` puts it on PATH")


def run_suite(session: nox.Session, python: str, *flags: str, env: dict[str, str]) -> None:
    """The reference suite (tests/perf under the perfsuite plugin) in the checkout's environment."""
    session.run(
        python, "-m", "pytest", "tests/perf", "-p", "perfsuite", *flags, *session.posargs, env=env, external=True
    )


# `nox -s perf -- --benchmark-tables`: pytest-benchmark's own tables, which the perf session leaves out by default.
BENCHMARK_TABLES = "--benchmark-tables"


@nox.session(venv_backend="none", default=False)
def baseline(session: nox.Session) -> None:
    """Run the reference suite k times (3, or --perfsuite-baseline-runs N) and keep the runs as this machine's
    baselines: a wall-clock verdict needs several base runs (docs/baselines.md, Several runs per baseline)."""
    python = install(session)
    runs = BASELINE_RUNS
    for i, arg in enumerate(session.posargs):
        if arg.startswith("--perfsuite-baseline-runs"):
            runs = int(arg.split("=", 1)[1] if "=" in arg else session.posargs[i + 1])
    for _ in range(runs):
        run_suite(session, python, "--perfsuite-save", env=activated(python))


@nox.session(venv_backend="none", default=False)
def dev(session: nox.Session) -> None:
    """The shared .venv alone (CPU torch, perfsuite editable): `source .venv/bin/activate` puts `perfsuite` on
    PATH."""
    install(session)
    session.log(f"perfsuite is installed in {VENV}: run `source {ACTIVATE}`, then `perfsuite --help`")

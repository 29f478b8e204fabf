"""nox sessions: `nox -s tests` (the unit, property and plugin tests), `nox -s lint` (ruff, mypy and
the import contract), `nox -s docs` (the MkDocs site, strict), `nox -s perf` (the reference suite),
`nox -s baseline` (store this machine's baselines), `nox -s dev` (a .venv here with perfsuite on PATH).

Torch is the CPU build unless the runner's own is reused: each session installs torch==2.13.0 from the
PyTorch CPU wheel index (PERFSUITE_TORCH_INDEX overrides it), which on a stock machine is the CPU wheel,
never the multi-GB CUDA build that plain PyPI resolves to on Linux. When the session's environment already
has torch (a reused virtualenv, or the system's on a GPU runner with PERFSUITE_SYSTEM_TORCH=1) nothing is
installed. When the CPU index cannot be reached, the session says so and installs torch==2.13.0 from the
indexes pip is configured with (a local wheel folder, a mirror; on a stock machine that would be the CUDA build).
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
# What a failing exact check tells people to run: this session, not the pytest command nox runs inside it.
UPDATE_EXACT = "PERFSUITE_UPDATE_EXACT_COMMAND"
# pip prints its warnings and errors only: a failing install still shows why, a working one stays out of the way.
PIP_QUIET = "--quiet"
TORCH_PROBE = (
    "import importlib.util as u; "
    "print('yes' if u.find_spec('torch') and __import__('torch').__version__.startswith('2.13.') else 'no')"
)


def install_torch(session: nox.Session, pip: tuple[str, ...] = ()) -> None:
    """The CPU torch from the PyTorch CPU index; nothing if the environment has torch; the configured indexes if
    the CPU index cannot be reached (see the module docstring)."""
    install = (lambda *a: session.run_install(*pip, "install", *a, external=True)) if pip else session.install
    session.log(
        f"installing {CPU_TORCH} (CPU) from {CPU_INDEX} (PERFSUITE_TORCH_INDEX overrides it): the first time it "
        "downloads the wheel, which can take minutes; pip prints only warnings and errors"
    )
    try:
        install(PIP_QUIET, CPU_TORCH, "--index-url", CPU_INDEX, "--timeout", "30", "--retries", "1")
    except nox.command.CommandFailed:
        session.warn(f"{CPU_INDEX} could not be used; installing {CPU_TORCH} from pip's configured indexes instead")
        install(PIP_QUIET, CPU_TORCH)


def install(session: nox.Session) -> None:
    """perfsuite with its test extras, on the CPU torch unless the environment already has torch."""
    if not SYSTEM_TORCH and not _torch_installed(session):
        install_torch(session)
    session.log("installing perfsuite (editable) with its dev extras")
    session.install(PIP_QUIET, "-e", ".[dev]")  # torch>=2.5.1 is satisfied by the torch above: pip leaves it as it is
    session.run_install("python", "-c", "import torch; print('torch', torch.__version__)")


def _torch_installed(session: nox.Session) -> bool:
    """Whether the session's environment can already import torch 2.13 (reused, or the system's).

    run_install: the check belongs to the install step, so it also runs under --install-only (without it,
    pip would resolve torch from perfsuite's own requirement, which on a stock index is the CUDA build).
    """
    answer = session.run_install("python", "-c", TORCH_PROBE, silent=True)
    return isinstance(answer, str) and answer.strip().endswith("yes")


def run_tests(session: nox.Session, marker: str) -> None:
    """pytest over tests/ (not the perf suite) on two xdist workers, the tests ``marker`` selects."""
    install(session)
    session.run(
        "pytest",
        "tests",
        "--ignore=tests/perf",
        "-m",
        marker,
        "-n",
        os.environ.get("PERFSUITE_TEST_WORKERS", "2"),
        *session.posargs,
        env={"PERFSUITE_HYPOTHESIS_PROFILE": os.environ.get("PERFSUITE_HYPOTHESIS_PROFILE", "ci")},
    )


@nox.session(venv_params=VENV_PARAMS)
def tests(session: nox.Session) -> None:
    """Unit, property and plugin tests (CPU; GPU-only tests skip with a reason): all but the slow ones."""
    run_tests(session, "not slow")


@nox.session(venv_params=VENV_PARAMS)
def slow(session: nox.Session) -> None:
    """The slow end-to-end tests: the catch table's faults, DDP launches, tune, ab, doctor, bisect, and the history
    dashboard in headless Chromium (CI runs them too; the browser test skips, saying why, without chromium)."""
    session.install("selenium>=4.20")  # drives the system's chromium (.ci/run installs it where it can)
    run_tests(session, "slow")


@nox.session(venv_params=VENV_PARAMS)
def lint(session: nox.Session) -> None:
    """ruff (lint, format check), mypy over perfsuite/, and the import contract (lint-imports; pyproject.toml)."""
    install(session)  # mypy reads torch's and numpy's own type information
    session.install(*LINTERS)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")
    session.run("lint-imports")


@nox.session
def docs(session: nox.Session) -> None:
    """The documentation under docs/, built with MkDocs Material in strict mode: warnings and broken links fail."""
    session.install(*DOCS)
    session.run("mkdocs", "build", "--strict", "--site-dir", f"{session.create_tmp()}/site", env=QUIET_MKDOCS)


@nox.session(venv_params=VENV_PARAMS)
def perf(session: nox.Session) -> None:
    """The reference perf suite; smoke scale by default, `-- --perfsuite-scale full` on a GPU."""
    install(session)
    rerun = " ".join(["nox -s perf --", *session.posargs, "--perfsuite-update-exact"])
    session.run(  # -rs: each skipped test's reason (a GPU-only test on a CPU machine) in the short summary
        "pytest",
        "tests/perf",
        "-p",
        "perfsuite",
        "-rs",
        "--perfsuite-compare",
        *session.posargs,
        env={UPDATE_EXACT: rerun},
    )


@nox.session(venv_params=VENV_PARAMS, default=False)
def baseline(session: nox.Session) -> None:
    """Run the reference suite k times (3, or --perfsuite-baseline-runs N) and keep the runs as this machine's
    baselines: a wall-clock verdict needs several base runs (docs/baselines.md, Several runs per baseline)."""
    install(session)
    runs = BASELINE_RUNS
    for i, arg in enumerate(session.posargs):
        if arg.startswith("--perfsuite-baseline-runs"):
            runs = int(arg.split("=", 1)[1] if "=" in arg else session.posargs[i + 1])
    for _ in range(runs):
        session.run("pytest", "tests/perf", "-p", "perfsuite", "--perfsuite-save", *session.posargs)


@nox.session(venv_backend="none", default=False)
def dev(session: nox.Session) -> None:
    """A .venv in this directory with perfsuite (editable) and the CPU torch; `source .venv/bin/activate`
    then puts `perfsuite` on PATH."""
    session.run_install(sys.executable, "-m", "venv", ".venv", external=True)
    bindir = os.path.join(".venv", "Scripts" if os.name == "nt" else "bin")
    pip = (os.path.join(bindir, "python"), "-m", "pip")
    if not SYSTEM_TORCH:
        install_torch(session, pip)
    session.run_install(*pip, "install", PIP_QUIET, "-e", ".[dev]", external=True)
    session.log(f"perfsuite is installed in .venv: run `source {bindir}/activate`, then `perfsuite --help`")

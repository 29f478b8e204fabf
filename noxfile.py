"""nox sessions: `nox -s tests` (the unit, property and plugin tests), `nox -s lint` (ruff, mypy and
the import contract), `nox -s docs` (the MkDocs site, strict), `nox -s perf` (the reference suite),
`nox -s baseline` (store this machine's baselines).

On a CPU machine each session installs the CPU build torch==2.13.0, never the
multi-GB CUDA build. On a GPU runner set PERFSUITE_SYSTEM_TORCH=1: the session's
virtualenv then sees the system site-packages and reuses the torch installed there.
"""

from __future__ import annotations

import os

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True

CPU_TORCH = "torch==2.13.0"
# Pinned: a new ruff or mypy release adds rules, and CI must not turn red on its own.
LINTERS = ("ruff==0.17.6", "mypy==2.4.1", "import-linter==2.16")
# Pinned for the same reason; the docs need no perfsuite install (the generated tables are checked by tests).
DOCS = ("mkdocs==1.6.1", "mkdocs-material==9.8.1")
QUIET_MKDOCS = {"NO_MKDOCS_2_WARNING": "1"}  # Material's end-of-life notice is not a docs warning
SYSTEM_TORCH = os.environ.get("PERFSUITE_SYSTEM_TORCH", "") not in ("", "0", "false", "no")
VENV_PARAMS = ["--system-site-packages"] if SYSTEM_TORCH else []


def install(session: nox.Session) -> None:
    """perfsuite with its test extras, on the CPU torch unless the runner's torch is reused."""
    if not SYSTEM_TORCH:
        session.install(CPU_TORCH)
    session.install("-e", ".[dev]")


@nox.session(venv_params=VENV_PARAMS)
def tests(session: nox.Session) -> None:
    """Unit, property and plugin tests (CPU; GPU-only tests skip with a reason), on two xdist workers."""
    install(session)
    session.run(
        "pytest",
        "tests",
        "--ignore=tests/perf",
        "-n",
        os.environ.get("PERFSUITE_TEST_WORKERS", "2"),
        *session.posargs,
        env={"PERFSUITE_HYPOTHESIS_PROFILE": os.environ.get("PERFSUITE_HYPOTHESIS_PROFILE", "ci")},
    )


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
    session.run("pytest", "tests/perf", "-p", "perfsuite", "--perfsuite-compare", *session.posargs)


@nox.session(venv_params=VENV_PARAMS, default=False)
def baseline(session: nox.Session) -> None:
    """Run the reference suite and save its results as this machine's baselines."""
    install(session)
    session.run("pytest", "tests/perf", "-p", "perfsuite", "--perfsuite-save", *session.posargs)

"""The noxfile's torch install: the CPU wheel index first, nothing when torch is already there, the configured
indexes (with a warning) when the CPU index cannot be reached; and the check runs under --install-only."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

nox = pytest.importorskip("nox")

NOXFILE = Path(__file__).resolve().parents[2] / "noxfile.py"


@pytest.fixture(scope="module")
def noxfile() -> Any:
    """The noxfile, loaded once (nox registers its sessions on import), with no torch settings in the env."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("PERFSUITE_SYSTEM_TORCH", raising=False)
        mp.delenv("PERFSUITE_TORCH_INDEX", raising=False)
        spec = importlib.util.spec_from_file_location("perfsuite_noxfile", NOXFILE)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        mp.setitem(sys.modules, "perfsuite_noxfile", module)
        spec.loader.exec_module(module)
        yield module


class FakeSession:
    """What a session would run, recorded; the torch probe answers ``has_torch``."""

    def __init__(self, has_torch: bool, index_reachable: bool = True) -> None:
        self.has_torch, self.index_reachable = has_torch, index_reachable
        self.calls: list[tuple[str, tuple[str, ...]]] = []
        self.warnings: list[str] = []

    def run_install(self, *args: str, **kwargs: Any) -> str | None:
        self.calls.append(("run_install", args))
        if "--index-url" in args and not self.index_reachable:
            raise nox.command.CommandFailed("unreachable")
        return "yes\n" if self.has_torch else "no\n"

    def install(self, *args: str, **kwargs: Any) -> None:  # a venv_backend="none" session has no install()
        raise AssertionError("session.install would install into a per-session virtualenv")

    def log(self, message: str) -> None:
        self.calls.append(("log", (message,)))

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def installs(self) -> list[tuple[str, ...]]:
        """The pip installs, after ``python -m pip install``."""
        return [
            args[4:] for kind, args in self.calls if kind == "run_install" and args[1:4] == ("-m", "pip", "install")
        ]


@pytest.fixture
def venv(noxfile: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shared environment's place, here under tmp_path (never the checkout's own .venv)."""
    monkeypatch.setattr(noxfile, "VENV", str(tmp_path / ".venv"))
    return tmp_path / ".venv"


def test_the_cpu_wheel_index_is_used_for_torch(noxfile: Any, venv: Path) -> None:
    """Before: plain torch==2.13.0, which a stock Linux index resolves to the multi-GB CUDA build."""
    session = FakeSession(has_torch=False)
    python = noxfile.install(session)
    assert python == str(venv / "bin" / "python")
    torch_install, perfsuite_install = session.installs()
    assert torch_install[:4] == ("--quiet", "torch==2.13.0", "--index-url", "https://download.pytorch.org/whl/cpu")
    assert perfsuite_install == ("--quiet", "-e", f"{noxfile.ROOT}[dev]")
    assert session.calls[1][1][:2] == (sys.executable, "-m")  # the environment is made first, then checked
    assert session.calls[2][1][0] == python  # the torch check runs in the shared environment (install step)


def test_an_environment_that_has_torch_keeps_it(noxfile: Any, venv: Path) -> None:
    session = FakeSession(has_torch=True)
    noxfile.install(session)
    assert session.installs() == [("--quiet", "-e", f"{noxfile.ROOT}[dev]")]


def test_perfsuite_is_installed_again_only_when_pyproject_changed(noxfile: Any, venv: Path) -> None:
    venv.mkdir()
    noxfile.install(FakeSession(has_torch=True))  # writes the stamp
    again = FakeSession(has_torch=True)
    noxfile.install(again)
    assert again.installs() == []
    (venv / ".perfsuite-pyproject").write_text("another pyproject\n")
    changed = FakeSession(has_torch=True)
    noxfile.install(changed)
    assert changed.installs() == [("--quiet", "-e", f"{noxfile.ROOT}[dev]")]


def test_an_unreachable_cpu_index_falls_back_to_the_configured_indexes_with_a_warning(noxfile: Any, venv: Path) -> None:
    session = FakeSession(has_torch=False, index_reachable=False)
    noxfile.install(session)
    assert session.installs()[1] == ("--quiet", "torch==2.13.0") and "could not be used" in session.warnings[0]


def test_every_session_that_needs_torch_shares_the_one_environment(noxfile: Any) -> None:
    """Issue 47: four sessions installed four CPU torches (about 6 GB); now one .venv serves them all."""
    from nox.registry import get

    sessions = get()
    for name in ("tests", "slow", "lint", "perf", "baseline", "dev"):
        assert sessions[name].venv_backend == "none", name  # no virtualenv of its own: install() gives .venv's python
    assert sessions["docs"].venv_backend != "none"  # mkdocs only: no torch
    shared = Path(noxfile.VENV)
    assert shared.name == ".venv" and str(shared.parent) == noxfile.ROOT  # in the checkout: one per checkout


def test_the_cpu_index_is_configurable_through_an_environment_variable() -> None:
    """PERFSUITE_TORCH_INDEX (a mirror, a local wheel folder) replaces the PyTorch CPU index (a fresh process:
    nox registers the sessions once per import)."""
    import os
    import subprocess

    code = (
        f"import importlib.util as u; s = u.spec_from_file_location('nf', {str(NOXFILE)!r}); "
        "m = u.module_from_spec(s); s.loader.exec_module(m); print(m.CPU_INDEX)"
    )
    env = {**os.environ, "PERFSUITE_TORCH_INDEX": "https://mirror.example/whl/cpu"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "https://mirror.example/whl/cpu"


def test_the_perf_session_leaves_the_benchmark_tables_out_unless_asked() -> None:
    """Issue 56: pytest-benchmark's tables were 48 of a green run's 87 lines; `-- --benchmark-tables` brings them."""
    text = NOXFILE.read_text(encoding="utf-8")
    perf = text[text.index("def perf(") : text.index("def run_suite(")]
    assert '"--benchmark-quiet"' in perf and "BENCHMARK_TABLES in session.posargs" in perf
    assert 'BENCHMARK_TABLES = "--benchmark-tables"' in text

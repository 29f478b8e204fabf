"""The Python each side of ``perfsuite ab`` runs with: the current environment, or one of its own.

Both sides run in the current environment when their declared dependencies
match (the code under test comes from each worktree through ``PYTHONPATH``).
When they differ, a side whose requirements changed gets a virtual
environment of its own that *layers* over the current one: a ``.pth`` file
adds the current environment's site-packages to its path (after its own, with
their own ``.pth`` files, so editable installs resolve), and
``pip install`` adds only the requirement groups that differ between the
sides. So torch and the rest are not reinstalled, a changed pin shadows the
current version for that side only, and a side with nothing to add keeps the
current interpreter. Everything lives in the session's temporary directory.

What counts as a requirement group: ``pyproject.toml``'s build requirements,
``[project] dependencies``, each optional-dependency extra, and each
``requirements*.txt`` file. Build requirements only matter to a build, so a
change there is reported and installs nothing. The layer's limit: a
requirement one side *removed* stays importable there through the current
environment (``--env venv`` does not change that; a clean environment per
side would mean reinstalling torch).
"""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfsuite.errors import PerfsuiteError

ENV_MODES = ("auto", "current", "venv")


class ABEnvError(PerfsuiteError):
    """A side's environment could not be prepared (exit status 2)."""


def _git_show(repo: Path, sha: str, path: str) -> str | None:
    proc = subprocess.run(["git", "-C", str(repo), "show", f"{sha}:{path}"], capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else None


def project_name(repo: Path, sha: str) -> str | None:
    from perfsuite.core.toml import tomllib

    text = _git_show(repo, sha, "pyproject.toml")
    if text is None:
        return None
    try:
        return tomllib.loads(text).get("project", {}).get("name")
    except tomllib.TOMLDecodeError:
        return None


def dependencies(repo: Path, sha: str) -> dict[str, Any]:
    """What a revision installs, by group: pyproject's build requirements, dependencies, extras; requirements files."""
    from perfsuite.core.toml import tomllib

    out: dict[str, Any] = {}
    text = _git_show(repo, sha, "pyproject.toml")
    if text is not None:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ABEnvError(f"{sha[:10]}:pyproject.toml is not valid TOML ({exc})") from exc
        project = data.get("project", {})
        out["build-system.requires"] = sorted(data.get("build-system", {}).get("requires", []))
        out["project.dependencies"] = sorted(project.get("dependencies", []))
        for extra, reqs in sorted(project.get("optional-dependencies", {}).items()):
            out[f"project.optional-dependencies.{extra}"] = sorted(reqs)
    listing = subprocess.run(["git", "-C", str(repo), "ls-tree", "--name-only", sha], capture_output=True, text=True)
    for name in sorted(f for f in listing.stdout.splitlines() if f.startswith("requirements") and f.endswith(".txt")):
        out[name] = sorted(
            line.strip()
            for line in (_git_show(repo, sha, name) or "").splitlines()
            if line.strip() and not line.strip().startswith("#")
        )
    return out


def changed_groups(base: Mapping[str, Any], head: Mapping[str, Any]) -> list[str]:
    return [k for k in sorted(set(base) | set(head)) if set(base.get(k, [])) != set(head.get(k, []))]


def dependency_changes(base: Mapping[str, Any], head: Mapping[str, Any]) -> list[str]:
    """One line per changed group: ``group: +added, -removed``."""
    changes = []
    for key in changed_groups(base, head):
        b, h = set(base.get(key, [])), set(head.get(key, []))
        moved = [f"+{x}" for x in sorted(h - b)] + [f"-{x}" for x in sorted(b - h)]
        changes.append(f"{key}: {', '.join(moved)}")
    return changes


def _requirement_name(req: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
    return re.sub(r"[-_.]+", "-", match.group(1)).lower() if match else ""


def install_arguments(
    groups: Sequence[str], deps: Mapping[str, Any], worktree: Path, own_name: str | None
) -> list[str]:
    """``pip install`` arguments for a side's changed groups (its own package and build requirements left out)."""
    own = _requirement_name(own_name or "")
    args: list[str] = []
    for group in groups:
        if group == "build-system.requires" or group not in deps:
            continue
        if group.startswith("requirements"):
            args += ["-r", str(worktree / group)]
        else:
            args += [r for r in deps[group] if _requirement_name(r) != own]
    return args


@dataclass(frozen=True)
class SideEnv:
    """The interpreter one side runs with, and what was installed for it (for the report)."""

    python: str
    own: bool = False
    installed: tuple[str, ...] = ()

    @property
    def note(self) -> str:
        if not self.own:
            return "current environment"
        return "own venv over the current one, " + (
            f"with pip install {' '.join(self.installed)}" if self.installed else "nothing added"
        )


def _outer_site_packages() -> list[str]:
    """The current interpreter's package directories, in path order: the layered venv sees them after its own."""
    found = [p for p in sys.path if p.rstrip("/").endswith(("site-packages", "dist-packages"))]
    for key in ("purelib", "platlib"):
        path = sysconfig.get_paths()[key]
        if path not in found:
            found.append(path)
    return found


def build_layered_venv(where: Path, pip_args: Sequence[str], base_python: str | None = None) -> str:
    """A venv at ``where`` that sees the current environment's packages, with ``pip_args`` installed over them."""
    base_python = base_python or sys.executable
    proc = subprocess.run([base_python, "-m", "venv", str(where)], capture_output=True, text=True)
    python = where / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    if proc.returncode != 0 or not python.exists():
        raise ABEnvError(
            f"could not create a virtual environment at {where} ({(proc.stderr or proc.stdout).strip()[-500:]}); "
            "install the venv module (Debian: python3-venv), or pass --env current to run both sides here"
        )
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # ``addsitedir`` rather than bare paths: the outer directories' own .pth files (editable installs) run too
    lines = [f"import site; site.addsitedir({path!r})" for path in _outer_site_packages()]
    Path(site, "_perfsuite_ab_outer.pth").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if pip_args:
        proc = subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *pip_args],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise ABEnvError(
                f"pip install {' '.join(pip_args)} failed in {where}:\n{(proc.stderr or proc.stdout)[-2000:]}\n"
                "Fix the requirement, or install what both sides need here and pass --env current"
            )
    return str(python)


def prepare(
    mode: str,
    repo: Path,
    shas: Mapping[str, str],
    worktrees: Mapping[str, Path],
    tmp: Path,
    python: str | None = None,
) -> tuple[dict[str, SideEnv], str]:
    """Each side's environment, and one line for the report that says why."""
    if mode not in ENV_MODES:
        raise ABEnvError(f"--env {mode!r}: write one of {', '.join(ENV_MODES)}")
    python = python or sys.executable
    deps = {side: dependencies(repo, sha) for side, sha in shas.items()}
    base, head = deps["A"], deps["B"]
    groups = changed_groups(base, head)
    changes = dependency_changes(base, head)
    if mode == "current" or (mode == "auto" and not groups):
        note = "current environment, " + (
            "dependencies unchanged" if not groups else f"--env current although they differ: {'; '.join(changes)}"
        )
        return {side: SideEnv(python) for side in shas}, note
    # "venv" builds a side's own environment even with nothing changed (a clean check of the layering);
    # "auto" only for the sides whose requirements differ.
    envs: dict[str, SideEnv] = {}
    for side, sha in shas.items():
        args = install_arguments(groups, deps[side], worktrees[side], project_name(repo, sha))
        if not args and mode == "auto":
            envs[side] = SideEnv(python)
            continue
        envs[side] = SideEnv(build_layered_venv(tmp / f"env-{side}", args, python), True, tuple(args))
    note = "; ".join(f"{'BASE' if s == 'A' else 'HEAD'}: {e.note}" for s, e in envs.items())
    if changes:
        note += f" (dependencies differ: {'; '.join(changes)})"
    return envs, note

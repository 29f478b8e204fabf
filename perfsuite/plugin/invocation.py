"""How this pytest session was started: the project root perfsuite's test ids are relative to, and the
command line that rewrites the committed exact values.

**The root.** pytest fixes its rootdir before plugins load, so in a project
without pytest configuration the space form ``--perfsuite-baselines DIR`` is
read as one more test path and moves the rootdir to the common ancestor of DIR
and the tests: every node id, and so every stored baseline's id, changes
with where the baselines live. :func:`project_root` asks pytest's own rule
again with the real test paths only; ids are made relative to that
(:func:`result_nodeid`), and :func:`rootdir_note` says what happened.

**The update command.** A failing exact check names the command that
rewrites the committed file: this session's own command line with
``--perfsuite-update-exact`` (``--perfsuite-compare`` and ``--perfsuite-save``
dropped). A wrapper such as nox or make sets ``PERFSUITE_UPDATE_EXACT_COMMAND``
to print its own form instead (perfsuite's noxfile does).
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any

UPDATE_ENV = "PERFSUITE_UPDATE_EXACT_COMMAND"
_DROPPED = ("--perfsuite-compare", "--perfsuite-save", "--perfsuite-update-exact")


def project_root(config: Any) -> Path:
    """The rootdir pytest would pick from the test paths alone (``config.rootpath`` when that is the same)."""
    rootpath = Path(config.rootpath)
    try:
        from _pytest.config.findpaths import determine_setup

        opt = config.option
        args = [str(a) for a in config.args] if _args_given(config) else []
        root = determine_setup(
            inifile=getattr(opt, "inifilename", None),
            override_ini=getattr(opt, "override_ini", None),
            args=args,
            rootdir_cmd_arg=getattr(opt, "rootdir", None) or None,
            invocation_dir=Path(config.invocation_params.dir),
        )[0]
    except Exception:  # noqa: BLE001 - a pytest whose internals moved: keep its own rootdir
        return rootpath
    return Path(root)


def _args_given(config: Any) -> bool:
    source = getattr(config, "args_source", None)
    return getattr(source, "name", "ARGS") == "ARGS"


def rootdir_note(config: Any, root: Path) -> str | None:
    """A line for the summary when pytest's rootdir differs from the project root perfsuite uses."""
    if Path(config.rootpath) == root:
        return None
    return (
        f"pytest's rootdir is {config.rootpath}, not {root}: a perfsuite option's value (space form, e.g. "
        "--perfsuite-baselines DIR) was read as a test path before perfsuite loaded. perfsuite keeps its test "
        f"ids relative to {root}; write --perfsuite-baselines=DIR to keep pytest's own ids as they were"
    )


def result_nodeid(nodeid: str, path: Path | None, root: Path) -> str:
    """``nodeid`` with its file part made relative to ``root`` (unchanged when the file is not under it)."""
    if path is None:
        return nodeid
    try:
        rel = Path(path).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return nodeid
    _, sep, rest = nodeid.partition("::")
    return rel + sep + rest


def update_command(config: Any, environ: Any = None) -> str:
    """The command that reruns this session with ``--perfsuite-update-exact`` (see the module docstring)."""
    env = os.environ if environ is None else environ
    if env.get(UPDATE_ENV):
        return str(env[UPDATE_ENV])
    workerinput = getattr(config, "workerinput", None)
    argv0 = workerinput["mainargv"][0] if isinstance(workerinput, dict) and "mainargv" in workerinput else sys.argv[0]
    name = os.path.basename(str(argv0))
    module = name in ("__main__.py", "-c", "") or name.startswith("python")
    prefix = ["python", "-m", "pytest"] if module else ["pytest"]
    args = [str(a) for a in config.invocation_params.args]
    kept: list[str] = [a for a in args if a not in _DROPPED]
    return shlex.join([*prefix, *kept, "--perfsuite-update-exact"])


def partly_selected_files(config: Any, root: Path) -> set[str]:
    """Test files this session was asked for by node id (``tests/test_x.py::test_a``), relative to ``root``:
    only part of them was collected, so their other tests are not gone (see exact.stale_entries)."""
    out = set()
    base = Path(config.invocation_params.dir)
    for arg in getattr(config, "args", []) or []:
        text = str(arg)
        if "::" not in text:
            continue
        path = (base / text.split("::", 1)[0]).resolve()
        try:
            out.add(path.relative_to(root.resolve()).as_posix())
        except ValueError:
            out.add(text.split("::", 1)[0])
    return out

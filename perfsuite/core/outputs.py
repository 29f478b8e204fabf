"""Output paths checked before any work: the one rule every command and the pytest plugin apply.

A run that takes minutes must not find out at its end that its report cannot be written, nor write
where it was not asked to. So each output path is checked when the command starts:

* it is not a directory, nor a device or pipe (``/dev/null`` would be *replaced* by an atomic write);
* its parent exists and is a directory (a missing one is created only when the caller allows it:
  ``--parents`` on the command line; the pytest plugin's report paths, as documented there);
* the directory it goes in is writable, and so is the file if it exists;
* an existing file is replaced only when asked (``--overwrite``).

:func:`output_problem` says what is wrong in a few words (or None); :func:`check_output` raises a
PerfsuiteError naming the flag and the user's path.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from perfsuite.errors import PerfsuiteError


def output_problem(
    path: Path,
    *,
    overwrite: bool,
    parents: bool = False,
    overwrite_flag: str = "--overwrite",
    directory: bool = False,
) -> str | None:
    """What stops writing ``path`` (a file, or with ``directory`` a directory that may be created), or None."""
    if not str(path).strip():
        return "is empty; give a file name"
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except NotADirectoryError:
        return f"cannot be created: {_first_file_ancestor(path)} is a file, so no directory can be made there"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if mode is not None:
        if directory:
            if not stat.S_ISDIR(mode):
                return "is a file; give a directory"
            return None if os.access(path, os.W_OK | os.X_OK) else "is a directory you cannot write"
        if stat.S_ISDIR(mode):
            return "is a directory; give a file name"
        if not stat.S_ISREG(mode):
            return "is not a regular file (a device or pipe); give a file name"
        if not overwrite:
            return f"exists; pass {overwrite_flag} to replace it, or name another file"
        if not os.access(path, os.W_OK):
            return "exists and is not writable"
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.exists():
        ancestor = _nearest_existing(parent)
        if not ancestor.is_dir():
            return f"cannot be created: {ancestor} is a file, so no directory can be made there"
        if not parents:
            return f"its directory {parent} does not exist; create it, or pass --parents to have it created"
        parent = ancestor
    elif not parent.is_dir():
        return f"cannot be created: {parent} is a file, so no directory can be made there"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"its directory {parent} is not writable"
    return None


def check_output(
    flag: str,
    path: Path | str | None,
    *,
    overwrite: bool,
    parents: bool = False,
    overwrite_flag: str = "--overwrite",
    directory: bool = False,
) -> None:
    """Raise a one-line PerfsuiteError naming ``flag`` and ``path`` if ``path`` cannot be written as asked."""
    if path is None:
        return
    problem = output_problem(
        Path(path), overwrite=overwrite, parents=parents, overwrite_flag=overwrite_flag, directory=directory
    )
    if problem:
        raise PerfsuiteError(f"{flag} {path}: {problem}")


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _first_file_ancestor(path: Path) -> Path:
    for ancestor in reversed(path.parents):
        if ancestor.exists() and not ancestor.is_dir():
            return ancestor
    return path.parent

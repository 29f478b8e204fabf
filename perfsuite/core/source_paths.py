"""How a source file is named in a site (``segjob.py:159``): the same on every machine and from every directory.

A site names a line of code, and two runs of the same code must name it alike, or a comparison reads one
line as "gone" and the same line as "new". So a file's name never depends on the working directory:

- an installed package's or the standard library's file is named from its package on
  (``torch/utils/data/_utils/collate.py``, ``multiprocessing/queues.py``), without the virtualenv's path;
- a project's file is named relative to the project's root: the git top level that holds it, else the folder
  of the script being run (:func:`anchored_at`, set by ``perfsuite exec``) or of the module the job was
  imported from (:func:`job_imported_from`, set by ``--import``);
- any other file keeps its absolute path (only a file outside any project: it is the same from every directory).

Libraries and perfsuite are told by where they are installed (``sysconfig``, ``site``), never by a folder's
name: a clone named ``perfsuite/`` holds torch too, in its ``.venv/``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import site
import sysconfig
from collections.abc import Iterator

_anchor: list[str] = []  # the script's folder while perfsuite runs a script: the root of a project without git
_job_folder: list[str] = []  # the folder of the module a command imported its job from (perfsuite run --import)


def _library_roots() -> tuple[str, ...]:
    """The standard library's and installed packages' folders, as configured and as resolved, longest first
    (a ``site-packages`` inside the standard library's folder is matched before it)."""
    paths = sysconfig.get_paths()
    found = [paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    with contextlib.suppress(AttributeError):  # a virtualenv's old site module has neither
        found += [*site.getsitepackages(), site.getusersitepackages()]
    roots = {f(p).rstrip(os.sep) + os.sep for p in found if p for f in (os.path.abspath, os.path.realpath)}
    return tuple(sorted(roots, key=len, reverse=True))


LIBRARY_ROOTS = _library_roots()


def library_relative(path: str) -> str | None:
    """``kornia/augmentation/base.py`` for a file of an installed package (or the standard library); else None."""
    absolute = os.path.abspath(path)
    for root in LIBRARY_ROOTS:
        if absolute.startswith(root):
            return absolute[len(root) :]
    return None


@functools.lru_cache(maxsize=4096)
def git_top(folder: str) -> str | None:
    """The git top level holding ``folder`` (the nearest folder above with a ``.git``), or None."""
    here = folder
    while True:
        if os.path.exists(os.path.join(here, ".git")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def project_root(path: str) -> str | None:
    """The root a project's file is named from: its git top level, else the folder of the script being run
    when the file lies under it; None for a file of neither."""
    absolute = os.path.abspath(path)
    top = git_top(os.path.dirname(absolute))
    if top is not None:
        return top
    anchor = _anchor[-1] if _anchor else _job_folder[-1] if _job_folder else None
    if anchor is not None and absolute.startswith(anchor.rstrip(os.sep) + os.sep):
        return anchor
    return None


def source_path(path: str) -> str:
    """A source file's name in a site: from its package on, relative to its project's root, or absolute.

    ``<string>`` and other pseudo-files are kept as they are.
    """
    if not path or path.startswith("<"):
        return path
    library = library_relative(path)
    if library is not None:
        return library
    root = project_root(path)
    absolute = os.path.abspath(path)
    return os.path.relpath(absolute, root) if root is not None else absolute


@contextlib.contextmanager
def anchored_at(folder: str | os.PathLike[str]) -> Iterator[None]:
    """While open, a file under ``folder`` outside any git repository is named relative to it (the script's
    folder, for ``perfsuite exec``)."""
    _anchor.append(os.path.abspath(folder))
    try:
        yield
    finally:
        _anchor.pop()


def job_imported_from(module_file: str | None) -> None:
    """The folder of the module a command imported its job from (``--import``): the root of its files outside
    any git repository, for the rest of the process (a command runs the jobs it imported)."""
    if module_file:
        _job_folder[:] = [os.path.dirname(os.path.abspath(module_file))]

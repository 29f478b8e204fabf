"""DataLoader workers leave no ``pymp-*`` folder in TMPDIR: they share their parent's, which it removes at exit.

A worker that sends a tensor by file descriptor (torch's default sharing strategy) opens a socket in a
multiprocessing temp folder, ``$TMPDIR/pymp-*``, made the first time the worker needs one; multiprocessing
removes it when that process exits through its own finalizers. A worker that is terminated instead (perfsuite
shuts the run's loader down explicitly, and a user's script may exit with its workers still running) never
removes it: one repository's checks under ``perfsuite exec`` and ``doctor`` left 37.

:func:`share_temp_dir` makes the running process's folder before any worker starts. A worker forked from it
inherits the folder (multiprocessing copies the parent's ``tempdir`` into each child's config) and makes none
of its own, and the parent's own exit removes it with whatever the workers left inside. Nothing a worker
computes changes: only where its socket files live.
"""

from __future__ import annotations


def share_temp_dir() -> str:
    """This process's multiprocessing temp folder, made now if it does not exist yet (see the module docstring)."""
    from multiprocessing import util

    return str(util.get_temp_dir())

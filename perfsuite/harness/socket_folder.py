"""The folder DataLoader workers put their sockets in, made before they start and short enough to bind.

A DataLoader worker hands each batch's tensors over by file descriptor, through a Unix socket that
multiprocessing makes in a folder of its own (``$TMPDIR/pymp-XXXXXXXX/listener-XXXXXXXX``). Two things go wrong
there. Under a long TMPDIR (more than 75 bytes: a pytest-xdist worker's ``tmp_path``, a CI runner's work
folder) the socket's path passes the 108 bytes a Unix socket path may have: the worker's queue thread fails with
"AF_UNIX path too long", the batch is never sent, and the training loop waits for it forever (issue 57: ``exec``
under pytest-xdist hung 5 of 5 times). And a worker killed by a signal (a CI job's time limit) leaves its own
folder behind. :func:`share_socket_folder` makes the folder in the main process before any worker starts, so
the workers forked later use it (and the main process removes it at exit), under a short system directory
when TMPDIR is too long, as Python 3.13's multiprocessing does.
"""

from __future__ import annotations

import os
import sys
import tempfile

SUN_PATH_MAX = 104 if sys.platform == "darwin" else 108  # a Unix socket path's bytes, its terminating NUL included
_SOCKET_TAIL = len("/pymp-XXXXXXXX/listener-XXXXXXXX") + 1
SHORT_DIRS = ("/tmp", "/var/tmp", "/usr/tmp")


def fits(base: str) -> bool:
    """Whether a worker's socket under ``base`` fits a Unix socket path."""
    return len(os.fsencode(base)) + _SOCKET_TAIL <= SUN_PATH_MAX


def share_socket_folder() -> str:
    """multiprocessing's folder for this process, made now (see the module docstring); its path."""
    from multiprocessing import util

    base = tempfile.gettempdir()
    short = next((d for d in SHORT_DIRS if os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK)), None)
    saved = tempfile.tempdir
    try:
        if not fits(base) and short is not None:
            tempfile.tempdir = short  # only while multiprocessing makes its folder
        return util.get_temp_dir()
    finally:
        tempfile.tempdir = saved

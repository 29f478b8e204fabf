"""Temporary files and directories for atomic writes: named after their owner, swept when it is gone,
and published with the user's umask.

Atomic writes go through a temporary name next to the target (then a rename).
A run killed mid-write leaves that temporary behind; the next write into the
same directory sweeps it. The temporary's name says which process made it
(``.<stem>.tmp-<host>-<pid>-<random>``), so a sweep removes only leftovers of
processes that are gone on this host (or, on a shared file system, ones older
than :data:`STALE_AFTER_S`), never another live run's work in progress.

``tempfile`` creates files 0600 and directories 0700; :func:`publish_mode`
gives them the mode an ordinary ``open``/``mkdir`` would have under the
user's umask, so a shared dataset cache or baselines directory stays readable
by the team.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil

STALE_AFTER_S = 24 * 3600.0
_MARK = ".tmp-"
_OWNER = re.compile(r"\.tmp-(?P<host>[A-Za-z0-9_-]*)-(?P<pid>\d+)-")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname())[:40]


def temp_prefix(stem: str) -> str:
    """The prefix of a temporary for ``stem``: ``.<stem>.tmp-<host>-<pid>-``."""
    return f".{stem}{_MARK}{_host()}-{os.getpid()}-"


def make_temp_dir(directory: Path, stem: str) -> Path:
    """A new temporary directory in ``directory`` for ``stem``, with the umask's mode (not 0700)."""
    path = Path(tempfile.mkdtemp(prefix=temp_prefix(stem), dir=directory))
    publish_mode(path)
    return path


def make_temp_file(directory: Path, stem: str, suffix: str = "") -> tuple[int, Path]:
    """(fd, path) of a new temporary file in ``directory`` for ``stem``, with the umask's mode (not 0600)."""
    fd, name = tempfile.mkstemp(prefix=temp_prefix(stem), suffix=suffix, dir=directory)
    os.fchmod(fd, 0o666 & ~current_umask()) if hasattr(os, "fchmod") else publish_mode(Path(name))
    return fd, Path(name)


def current_umask() -> int:
    """This process's umask; read from /proc where possible (setting it to read it races with threads)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def publish_mode(path: Path) -> None:
    """Give ``path`` the mode ``open``/``mkdir`` would: 0666/0777 less the umask."""
    base = 0o777 if path.is_dir() else 0o666
    with contextlib.suppress(OSError):
        os.chmod(path, base & ~current_umask())


def publish_tree(root: Path) -> None:
    """:func:`publish_mode` for ``root`` and everything under it."""
    publish_mode(root)
    for path in root.rglob("*"):
        if not path.is_symlink():
            publish_mode(path)


def is_leftover(path: Path, now: float | None = None) -> bool:
    """Whether ``path`` is a temporary whose owner is gone (dead pid on this host, or stale anywhere)."""
    match = _OWNER.search(path.name)
    if match is None or not path.name.startswith("."):
        return False
    try:
        age = (time.time() if now is None else now) - path.lstat().st_mtime
    except OSError:
        return False
    if age > STALE_AFTER_S:
        return True
    if match["host"] != _host():
        return False  # another machine's run on a shared file system: only age can tell
    return not psutil.pid_exists(int(match["pid"]))


def sweep(directory: Path) -> list[Path]:
    """Remove the leftover temporaries in ``directory`` (not recursive); return what was removed."""
    removed: list[Path] = []
    try:
        entries = list(Path(directory).iterdir())
    except OSError:
        return removed
    for path in entries:
        if not is_leftover(path):
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
        if not path.exists():
            removed.append(path)
    return removed


def is_dir_mode_private(path: Path) -> bool:
    """True if only the owner can read ``path`` (what ``tempfile`` leaves): for tests and diagnostics."""
    return not path.stat().st_mode & (stat.S_IRGRP | stat.S_IROTH)


def write_text_atomic(path: Path, text: str, publish: Callable[[Path, Path], None] = os.replace) -> Path:
    """Write ``text`` to ``path`` atomically: a temporary in the same directory (the umask's mode), fsync, then
    ``publish(tmp, path)`` (replace by default; a hard link refuses to overwrite), then fsync the directory.
    Temporaries of earlier writes that were killed are swept first. A crash never leaves half a file.
    """
    with as_users_path(path), new_directories(path.parent):
        sweep(path.parent)
        fd, tmp = make_temp_file(path.parent, path.stem, suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            publish(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
    return path


def write_bytes_atomic(path: Path, data: bytes) -> Path:
    """:func:`write_text_atomic` for bytes (an image): a temporary in the same directory, fsync, replace."""
    with as_users_path(path), new_directories(path.parent):
        sweep(path.parent)
        fd, tmp = make_temp_file(path.parent, path.stem, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
    return path


@contextlib.contextmanager
def new_directories(directory: Path) -> Iterator[None]:
    """``directory`` made with its missing parents; if the body fails (a full disk), the ones made here are removed
    again, so a failed write leaves no empty ``tuned/<fingerprint>/`` behind."""
    missing = []
    for folder in (directory, *directory.parents):
        if folder.exists():
            break
        missing.append(folder)
    directory.mkdir(parents=True, exist_ok=True)
    try:
        yield
    except BaseException:
        for folder in missing:  # deepest first; a folder someone else filled meanwhile stays
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


@contextlib.contextmanager
def as_users_path(path: Path) -> Iterator[None]:
    """An OSError inside names ``path``, the file the user asked for, not the hidden temporary it failed on
    (``No space left on device`` on ``.report.tmp-host-123-x.tmp`` means nothing to them). A FileExistsError
    passes unchanged: callers publishing with a hard link read it as "someone wrote it meanwhile"."""
    try:
        yield
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.filename is not None and Path(exc.filename) == Path(path):
            raise
        raise type(exc)(exc.errno, exc.strerror or str(exc), str(path)) from exc


def write_json_atomic(path: Path, payload: Any, publish: Callable[[Path, Path], None] = os.replace) -> Path:
    """:func:`write_text_atomic` of ``payload`` as indented JSON."""
    import json

    return write_text_atomic(path, json.dumps(payload, indent=2) + "\n", publish)


def fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some platforms cannot fsync a directory; the file itself is already on disk
    finally:
        os.close(fd)

"""One run at a time per output file: ``perfsuite run --out same.json`` started twice refuses the second.

Two runs writing one ``--out`` would both run to the end, and the last to finish would replace the
other's Result unseen. The first takes an exclusive ``flock`` on a sibling ``.same.json.lock`` (its pid
and command inside) for the whole run and removes it at the end; a second finds it held and refuses before
any work, naming the holder. :func:`perfsuite.cli.main.main` locks every file a command writes
(:func:`perfsuite.cli.validate.written_files`). The kernel drops the lock when its holder dies however it
dies, so a lock file left by a killed run never blocks the next one (which takes it over and removes it at
its end).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from perfsuite.errors import PerfsuiteError


def lock_path(out: Path) -> Path:
    return out.with_name(f".{out.name}.lock")


@contextlib.contextmanager
def out_lock(out: Path | None, flag: str = "--out", holder: str = "") -> Iterator[None]:
    """Hold ``out``'s lock while the body runs; PerfsuiteError at once if another process holds it (``holder``:
    this run's command, named to a second one)."""
    if out is None or os.name != "posix" or not out.parent.is_dir():  # a new directory: made by the write itself
        yield
        return
    import fcntl

    path = lock_path(out).absolute()  # removed where it was made, whatever the working directory is by then
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            first = " ".join(os.read(fd, 512).decode("utf-8", "replace").split()) or "?"
            os.close(fd)
            raise PerfsuiteError(
                f"{flag} {out} is being written by another perfsuite run (pid {first.replace(' ', ': ', 1)}) that is "
                "still running; "
                "wait for it to finish, or name another file"
            ) from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino  # not a lock file its last holder just removed
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n{holder[:300]}\n".encode())
        yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
        os.close(fd)


@contextlib.contextmanager
def out_locks(named: list[tuple[str, Path]], holder: str = "") -> Iterator[None]:
    """:func:`out_lock` on each ``(flag, path)``, all held while the body runs."""
    with contextlib.ExitStack() as held:
        for flag, path in named:
            held.enter_context(out_lock(path, flag, holder))
        yield

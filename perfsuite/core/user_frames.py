"""Which frames of a traceback are the user's: not perfsuite's, not the standard library's or an installed package's.

A user's step, Dataset or script that raises is their bug: they want their own frames, not the runner's
that called into them. Used by the CLI (:mod:`perfsuite.cli.user_errors`) and by the rank launcher, which
carries a rank's traceback as text (:mod:`perfsuite.harness.ranks.supervise`).
"""

from __future__ import annotations

import re
import sysconfig
from pathlib import Path

PERFSUITE_DIR = str(Path(__file__).resolve().parents[1])
LIBRARY_DIRS = tuple(
    str(Path(p).resolve()) for p in {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
)


def is_users_file(filename: str) -> bool:
    """A frame of the user's code: not perfsuite's, not the standard library's or an installed package's."""
    if filename.startswith("<"):
        return False
    try:
        path = str(Path(filename).resolve())
    except OSError:
        return False
    return not path.startswith(PERFSUITE_DIR) and not path.startswith(LIBRARY_DIRS)


def users_traceback_text(body: str) -> str:
    """A traceback's text (a DataLoader worker's, a rank's): its frames from the user's first on, perfsuite's left
    out, then the exception; '' when no frame is the user's. Of a chain, the last traceback (the one raised)."""
    marker = "Traceback (most recent call last):\n"
    if marker in body:
        body = body.rsplit(marker, 1)[1]
    blocks: list[list[str]] = []
    tail: list[str] = []
    for line in body.splitlines(keepends=True):
        if tail:
            tail.append(line)
        elif line.startswith('  File "'):
            blocks.append([line])
        elif line.startswith("    ") and blocks:
            blocks[-1].append(line)
        elif blocks:
            tail.append(line)
    names = [re.match(r'  File "([^"]+)"', b[0]) for b in blocks]
    files = [m.group(1) if m else "" for m in names]
    first = next((i for i, f in enumerate(files) if is_users_file(f)), None)
    if first is None:
        return ""
    kept = [b for b, f in zip(blocks[first:], files[first:], strict=True) if not f.startswith(PERFSUITE_DIR)]
    return "".join("".join(b) for b in kept) + "".join(tail)

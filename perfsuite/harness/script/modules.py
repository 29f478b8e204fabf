"""The modules a script run in this process sees: its own folder's, as ``python train.py`` would give it.

A script run in-process (``perfsuite exec``, a ``perfsuite.Script`` perf test) shares ``sys.modules`` with
what ran before it: if another test already imported a ``model`` or ``facedata`` of its own, ``import model``
in the script would get that one, and the script would run another's code. While the script runs, each
module its own folder would shadow (same name, imported from another user's folder) is set aside, and put
back afterwards; the standard library and installed packages are never touched (``python train.py`` gets
those first too, where they are already imported).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from perfsuite.core.user_frames import is_users_file


def shadowed(home: Path) -> dict[str, ModuleType]:
    """The modules (and their submodules) imported from outside ``home`` whose top name ``home`` has a module of."""
    root = str(home.resolve()) + os.sep
    aside: dict[str, ModuleType] = {}
    for name, module in list(sys.modules.items()):
        top = name.partition(".")[0]
        if not ((home / f"{top}.py").is_file() or (home / top / "__init__.py").is_file()):
            continue
        where = getattr(module, "__file__", None) or ""
        if os.path.isabs(where) and is_users_file(where) and not where.startswith(root):  # torch.ops: "_ops.py"
            aside[name] = module
    return aside


@contextlib.contextmanager
def own_modules(home: Path) -> Iterator[None]:
    """While the body runs, the modules ``home`` shadows are out of ``sys.modules``; then they are back."""
    aside = shadowed(home)
    for name in aside:
        del sys.modules[name]
    try:
        yield
    finally:
        for name, module in aside.items():
            sys.modules[name] = module

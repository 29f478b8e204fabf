"""Where a tensor operation comes from: the first frame outside torch and outside perfsuite's harness.

A sync or a copy is reported at the line of the step's own code that issued
it (the user's ``train.py:57``), not at torch's internals nor at perfsuite's
runner. ``find`` also says whether that line issued the call *directly*
(only torch's routing files in between) or through torch's own code (an
optimizer reading its step counter, ``clip_grad_norm_`` checking its norm).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from typing import Any

# torch files that only route a call to its implementation: a call passing only through
# these was issued by the caller itself.
_PLUMBING = frozenset(
    os.path.join(*p.split("/"))
    for p in ("overrides.py", "_tensor.py", "functional.py", "_jit_internal.py", "utils/_device.py")
)


class Sites:
    """Where calls come from: the first frame outside torch and perfsuite's harness."""

    def __init__(self) -> None:
        import torch

        import perfsuite.probes as probes_pkg

        self.torch_dir = os.path.dirname(torch.__file__) + os.sep
        package = os.path.dirname(os.path.dirname(probes_pkg.__file__))
        self.harness = (
            os.path.dirname(probes_pkg.__file__) + os.sep,
            os.path.join(package, "harness", "runner.py"),
            os.path.join(package, "harness", "script.py"),  # a script's steps (perfsuite exec)
            os.path.join(package, "jobs", "contract.py"),
            os.path.dirname(warnings.__file__) + os.sep + "warnings.py",
            contextlib.__file__,
        )

    def find(self, frame: Any) -> tuple[str, bool]:
        """(site "path:line", issued directly by that site rather than by torch internals)."""
        direct = True
        while frame is not None:
            path = frame.f_code.co_filename
            if path.startswith(self.torch_dir):
                if path[len(self.torch_dir) :] not in _PLUMBING:
                    direct = False
            elif not path.startswith(self.harness):
                return f"{_short(path)}:{frame.f_lineno}", direct
            frame = frame.f_back
        return "<unknown>", direct


def _short(path: str) -> str:
    rel = os.path.relpath(path) if os.path.isabs(path) else path
    return path if rel.startswith("..") else rel

"""A user's training script as a job: ``Script(["train.py", "--data", "data"])``, run unchanged.

``perfsuite exec -- python train.py ARGS`` and ``perf_run(perfsuite.Script([...]))``
run the script in this process (as ``python train.py ARGS`` would: ``sys.argv``
set, its directory first on ``sys.path``, ``__name__ == "__main__"``), and the
batches its training DataLoader yields mark the steps
(:mod:`perfsuite.harness.script.drive`). Nothing in the script changes and nothing
in it imports perfsuite.

What a script cannot say through its objects, the Script says:

* ``loader``: which DataLoader is the training one when the script iterates
  several: the class name of its dataset (``FaceParsingDataset``) or of the
  loader, optionally ``NAME#N`` for the N-th such loader, or ``N`` for the N-th
  DataLoader the script iterates. Default: the first one it iterates.
* ``criterion``: the class name of the loss module, when the script holds
  several loss modules (the label probe hooks the one named).
* ``num_classes``/``ignore_index``/``target_kind``/``flip_pairs``: the targets'
  labels, as for :class:`perfsuite.Job` (``ignore_index`` defaults to the loss
  module's own ``ignore_index`` attribute, when it has one).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite.errors import JobError
from perfsuite.jobs.contract import check_flip_pairs
from perfsuite.jobs.workload import TARGET_KINDS

_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?(\.exe)?$")


def _is_list(argv: Any) -> bool:
    return isinstance(argv, Sequence) and not isinstance(argv, (str, bytes))


@dataclass(frozen=True)
class LoaderChoice:
    """Which DataLoader marks the steps: by class name (dataset or loader) and ordinal, or by ordinal alone."""

    name: str | None = None
    nth: int = 1

    @classmethod
    def parse(cls, text: str | None) -> LoaderChoice:
        if text is None or text == "":
            return cls()
        name, _, nth = str(text).partition("#")
        if name.isdigit() and not nth:
            return cls(None, int(name)) if int(name) >= 1 else cls._bad(text)
        if not name.isidentifier() or (nth and not (nth.isdigit() and int(nth) >= 1)):
            cls._bad(text)
        return cls(name, int(nth) if nth else 1)

    @staticmethod
    def _bad(text: str) -> LoaderChoice:
        raise JobError(
            f"loader={text!r}: name the training DataLoader by the class of its dataset or loader "
            "(loader='FaceParsingDataset'), the N-th such loader ('FaceParsingDataset#2'), or the N-th DataLoader "
            "the script iterates ('2')"
        )

    def matches(self, loader: Any) -> bool:
        """Does this loader carry the name asked for (ordinals are counted by the caller)?"""
        if self.name is None:
            return True
        dataset = getattr(loader, "dataset", None)
        names = {type(loader).__name__, type(dataset).__name__ if dataset is not None else ""}
        return self.name in names

    def __str__(self) -> str:
        if self.name is None:
            return "the first DataLoader the script iterates" if self.nth == 1 else f"DataLoader number {self.nth}"
        return self.name + (f"#{self.nth}" if self.nth > 1 else "")


EXEC_NOTE = "perfsuite exec "  # how the Result of a script run begins its note (perfsuite.harness.script.drive)


def ran_a_script(result: Any) -> bool:
    """Whether a Result is a script's run (perfsuite exec or perfsuite.Script): its advice names the script's terms."""
    return any(str(note).startswith(EXEC_NOTE) for note in getattr(result, "notes", ()))


def workload_of(result: Any) -> str:
    """What a Result ran, to tell apart Results that do not compare: for a script, ``python <file name>`` (or
    ``python -m <module>``) without its arguments, which are what an A/B of a script changes; else its workload."""
    note = next((str(n) for n in getattr(result, "notes", ()) if str(n).startswith(EXEC_NOTE)), None)
    if note is None:
        return str(result.workload)
    words = note[len(EXEC_NOTE) :].split(": ", 1)[0].split()
    if words[:2] == ["python", "-m"] and len(words) > 2:
        return f"python -m {words[2]}"
    return f"python {os.path.basename(words[1])}" if len(words) > 1 else str(result.workload)


@dataclass(frozen=True)
class Script:
    """A training script (``["train.py", ARGS...]``) or module (``["-m", "pkg.train", ARGS...]``), run unchanged.

    A leading ``python`` is dropped, so the command line a user types works as is; arguments may be
    strings or paths. The script's path is resolved against the working directory when the Script is made.
    """

    argv: Sequence[str]
    loader: str | None = None
    name: str | None = None
    criterion: str | None = None
    num_classes: int | None = None
    ignore_index: int | None = None
    target_kind: str = "mask"
    flip_pairs: Any = None
    path: Path | None = field(default=None, init=False)
    module: str | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        argv = [os.fspath(a) if isinstance(a, os.PathLike) else a for a in self.argv] if _is_list(self.argv) else None
        if not argv or not all(isinstance(a, str) for a in argv):
            raise JobError(
                f"Script({self.argv!r}): give the command line as a list of strings, e.g. "
                "Script(['train.py', '--data', 'data']) or Script(['-m', 'pkg.train'])"
            )
        if _PYTHON.match(os.path.basename(argv[0])) or argv[0] == sys.executable:
            argv = argv[1:]
        if not argv:
            raise JobError("Script(['python']): name the training script after python, e.g. ['python', 'train.py']")
        if argv[0] == "-m":
            if len(argv) < 2 or not all(part.isidentifier() for part in argv[1].split(".")):
                raise JobError("Script(['-m', ...]): name the module to run after -m, e.g. ['-m', 'pkg.train']")
            object.__setattr__(self, "module", argv[1])
            argv = argv[1:]
        elif argv[0].startswith("-"):
            raise JobError(
                f"Script: python's own option {argv[0]!r} cannot apply: perfsuite runs the script in its own "
                "process; drop it and give the script first (['train.py', ...]) or a module (['-m', 'pkg.train'])"
            )
        else:
            path = Path(argv[0]).resolve()
            if not path.is_file():
                raise JobError(
                    f"Script: no file {argv[0]!r} (looked at {path}); give the training script's path, relative to "
                    f"{Path.cwd()} or absolute"
                )
            object.__setattr__(self, "path", path)
        object.__setattr__(self, "argv", tuple(argv))
        LoaderChoice.parse(self.loader)
        if self.target_kind not in TARGET_KINDS:
            raise JobError(f"Script(target_kind={self.target_kind!r}): write one of {', '.join(TARGET_KINDS)}")
        if self.num_classes is not None and (
            isinstance(self.num_classes, bool) or not isinstance(self.num_classes, int) or self.num_classes < 1
        ):
            raise JobError(f"Script(num_classes={self.num_classes!r}): a positive integer")
        if self.flip_pairs is not None:
            object.__setattr__(
                self, "flip_pairs", check_flip_pairs(self.flip_pairs, self.num_classes, f"script {self.label!r}")
            )

    @property
    def label(self) -> str:
        """How Results name the run: ``name``, else the script's stem or the module's last part."""
        if self.name:
            return self.name
        if self.module:
            return self.module.rsplit(".", 1)[-1]
        return self.path.stem if self.path is not None else "script"

    @property
    def choice(self) -> LoaderChoice:
        return LoaderChoice.parse(self.loader)

    def command(self) -> str:
        """The command line as the user would type it (for messages)."""
        head = ["python", "-m"] if self.module else ["python"]
        return " ".join([*head, *self.argv])

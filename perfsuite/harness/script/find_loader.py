"""Run a user's training script unchanged only until its training DataLoader is iterated, then stop it.

``perfsuite check`` needs the script's training Dataset (and its transform), not a
run: the script runs in this process as ``python train.py ARGS`` would, and the
first ``DataLoader.__iter__`` call on the training loader (chosen as
``perfsuite exec`` chooses it: :class:`perfsuite.jobs.script.LoaderChoice`) raises
an exception derived from BaseException before any worker starts. The script's
``finally`` blocks run; its ``except Exception`` handlers do not swallow the stop.

The loss module's ``ignore_index`` is read from the objects the script's frames
hold at that moment (:func:`perfsuite.harness.script.drive.find_objects`, read-only), so
a script that builds ``CrossEntropyLoss(ignore_index=255)`` before its loop needs
no flag for it.
"""

from __future__ import annotations

import os
import runpy
import sys
from dataclasses import dataclass, field
from typing import Any

from perfsuite.core.user_frames import PERFSUITE_DIR
from perfsuite.errors import ScriptError
from perfsuite.harness.script.drive import as_main
from perfsuite.jobs.script import LoaderChoice, Script


class _Found(BaseException):
    """Raised from the training loader's ``__iter__``: the script has built what the check needs."""


@dataclass
class TrainingLoader:
    """What the script had built when it first iterated its training DataLoader."""

    loader: Any
    ignore_index: int | None = None  # the loss module's, when one was found
    others: list[Any] = field(default_factory=list)  # DataLoaders iterated before it (left alone)

    @property
    def dataset(self) -> Any:
        return getattr(self.loader, "dataset", None)

    def describe(self) -> str:
        return (
            f"{type(self.loader).__name__} over {type(self.dataset).__name__} "
            f"(batch {getattr(self.loader, 'batch_size', '?')}, {getattr(self.loader, 'num_workers', '?')} workers)"
        )


def _loss_ignore_index(frame: Any, criterion: str | None) -> int | None:
    from perfsuite.harness.script.drive import find_objects, is_runpy

    package = PERFSUITE_DIR + os.sep  # the package, wherever it lies
    frames = []
    while frame is not None:
        if is_runpy(frame.f_code.co_filename):
            break
        if not frame.f_code.co_filename.startswith(package):
            frames.append(frame)
        frame = frame.f_back
    value = getattr(find_objects(frames, criterion).criterion, "ignore_index", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def find_training_loader(script: Script) -> TrainingLoader:
    """Run ``script`` until it iterates its training DataLoader; return that loader (the script is stopped there).

    Raises :class:`perfsuite.errors.ScriptError` if the script raises, exits with a failure status, or ends
    without iterating a DataLoader the choice matches.
    """
    from torch.utils.data import DataLoader

    choice = LoaderChoice.parse(script.loader)
    seen: list[Any] = []
    found: list[TrainingLoader] = []
    original = DataLoader.__iter__

    def hooked(loader: Any) -> Any:
        if not any(known is loader for known in seen):
            seen.append(loader)
            matching = [known for known in seen if choice.matches(known)]
            if len(matching) == choice.nth and matching[-1] is loader:
                ignore = _loss_ignore_index(sys._getframe(1), script.criterion)
                found.append(TrainingLoader(loader, ignore, [ld for ld in seen if ld is not loader]))
                raise _Found
        return original(loader)

    DataLoader.__iter__ = hooked  # type: ignore[method-assign]
    try:
        with as_main(script):
            if script.module is not None:
                runpy.run_module(script.module, run_name="__main__", alter_sys=True)
            else:
                assert script.path is not None
                runpy.run_path(str(script.path), run_name="__main__")
    except _Found:
        pass
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise ScriptError(
                f"{script.command()} exited with status {exc.code!r} before iterating its training DataLoader"
            ) from None
    except Exception as exc:
        raise ScriptError(
            f"{script.command()} raised {type(exc).__name__}: {exc} before iterating its training DataLoader"
        ) from exc
    finally:
        DataLoader.__iter__ = original  # type: ignore[method-assign]
    if not found:
        if seen:
            names = ", ".join(f"{type(ld).__name__} over {type(getattr(ld, 'dataset', None)).__name__}" for ld in seen)
            raise ScriptError(
                f"loader={script.loader!r} matched none of the DataLoaders {script.command()} iterated ({names}); "
                "name one by the class of its dataset or loader (--loader), or leave it out to take the first"
            )
        raise ScriptError(
            f"{script.command()} ended without iterating a torch DataLoader; perfsuite check finds the training "
            "transform through the training DataLoader's Dataset. Check the transform directly instead: "
            "perfsuite.augment.checks.check_paired_augmentation(transform, ...) (docs/properties.md)"
        )
    return found[0]

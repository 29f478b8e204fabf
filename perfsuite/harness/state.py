"""The user's state that perfsuite's own work must leave as it found it: random generators and training objects.

A run measures the user's training; it must not change what that training
computes. Two kinds of perfsuite work could:

* work at a step boundary (finding the script's objects, starting and
  stopping probes, the loader ledger's replay, the observation plan) could
  draw from a global generator that the user's next step draws from next:
  :func:`kept_rng` puts Python's, NumPy's and torch's generators (CUDA's too,
  once CUDA is initialised) back as they were;
* steps perfsuite adds beyond the user's (a Job's speed-of-light steps, fed a
  cached batch) move the model, the optimizer and its GradScaler:
  :class:`Snapshot` keeps deep copies of their ``state_dict()``\\ s and the
  generators, and puts them back after.

A script's extra steps could only run through its own loop body (a progress
bar's counter, an evaluation, a file written are not undone by any snapshot),
so a script gets none (:data:`SCRIPT_NO_SOL`).
"""

from __future__ import annotations

import contextlib
import copy
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

# Why a script's Result has no speed of light: one source for the Result's record and input_efficiency's reason.
SCRIPT_NO_SOL = (
    "not run for a script: its steps are its own loop body (a progress bar, an evaluation, a checkpoint written), "
    "and extra steps through it would change what the script computes and saves"
)


@dataclass(frozen=True)
class RngState:
    """The global generators' states: Python's, NumPy's, torch's CPU one and (if initialised) CUDA's."""

    python: Any
    numpy: Any
    torch: Any
    cuda: Any = None

    @classmethod
    def take(cls) -> RngState:
        import numpy as np
        import torch

        cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
        return cls(random.getstate(), np.random.get_state(), torch.get_rng_state(), cuda)

    def put_back(self) -> None:
        import numpy as np
        import torch

        random.setstate(self.python)
        np.random.set_state(self.numpy)
        torch.set_rng_state(self.torch)
        if self.cuda is not None:
            torch.cuda.set_rng_state_all(self.cuda)


@contextlib.contextmanager
def kept_rng() -> Iterator[None]:
    """Whatever runs inside draws from the global generators without the user's next draw seeing it."""
    state = RngState.take()
    try:
        yield
    finally:
        state.put_back()


@dataclass
class Snapshot:
    """Deep copies of some objects' ``state_dict()`` and of the generators, to put back after extra steps.

    ``objects`` are anything with ``state_dict``/``load_state_dict`` (a module, an optimizer, a GradScaler, an LR
    scheduler, an EMA); ``None`` entries and duplicates are skipped.
    """

    objects: Sequence[Any]
    _states: list[tuple[Any, Any]] = field(default_factory=list)
    _grads: list[tuple[Any, Any]] = field(default_factory=list)  # a module's .grad (not in its state_dict)
    _rng: RngState | None = None

    def __post_init__(self) -> None:
        seen: set[int] = set()
        for obj in self.objects:
            if obj is None or id(obj) in seen or not _has_state(obj):
                continue
            seen.add(id(obj))
            try:
                state = _host_copy(obj.state_dict())
            except Exception:  # noqa: BLE001 - an object whose state_dict() needs arguments: not one to put back
                continue
            self._states.append((obj, state))
            for param in obj.parameters() if callable(getattr(obj, "parameters", None)) else ():
                self._grads.append((param, None if param.grad is None else param.grad.detach().clone()))
        self._rng = RngState.take()

    def restore(self) -> None:
        import torch

        for obj, state in self._states:
            obj.load_state_dict(state)
        with torch.no_grad():
            for param, grad in self._grads:
                if grad is None or param.grad is None or param.grad.shape != grad.shape:
                    param.grad = grad
                else:
                    param.grad.copy_(grad)
        assert self._rng is not None
        self._rng.put_back()


def _host_copy(value: Any) -> Any:
    """A deep copy whose tensors are in host memory: a snapshot takes no device memory from the user's model."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return type(value)((k, _host_copy(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_host_copy(v) for v in value)
    return copy.deepcopy(value)


def _has_state(obj: Any) -> bool:
    """An instance (not a class a step names) with ``state_dict`` and ``load_state_dict``."""
    if isinstance(obj, type):
        return False
    return callable(getattr(obj, "state_dict", None)) and callable(getattr(obj, "load_state_dict", None))


def held_by(step: Any) -> list[Any]:
    """The objects with a state a Job's step holds beyond the Job's model and optimizer: its closure's cells (a
    scheduler, a GradScaler, an EMA the fixture made), the module globals its code names, and, for a bound
    method, its instance's attributes."""
    out: list[Any] = []
    for cell in getattr(step, "__closure__", None) or ():
        with contextlib.suppress(ValueError):  # an empty cell
            out.append(cell.cell_contents)
    code, names = getattr(step, "__code__", None), getattr(step, "__globals__", {})
    out += [names[name] for name in getattr(code, "co_names", ()) if name in names]
    owner = getattr(step, "__self__", None)
    if owner is not None:
        out += list(getattr(owner, "__dict__", {}).values())
    return [obj for obj in out if _has_state(obj) and not hasattr(obj, "dataset")]  # a (stateful) loader: not stepped


@contextlib.contextmanager
def undone(objects: Sequence[Any]) -> Iterator[None]:
    """What runs inside leaves ``objects``' state and the generators as they were (see :class:`Snapshot`)."""
    snap = Snapshot(objects)
    try:
        yield
    finally:
        snap.restore()

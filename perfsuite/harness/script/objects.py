"""What a script's frames hold: its model, optimizer, GradScaler and the loss module that receives the labels.

``perfsuite exec`` finds these by looking (no argument names them). Loss modules are searched
at any depth, nested ones included (an ``OhemCELoss`` holding a ``CrossEntropyLoss``), each
named by the path it was reached by (``LossP``, ``LossP.criteria``, ``trainer.losses['seg']``).
When several could be the criterion, :class:`LossPick` hooks them all during the warm-up
(never in the measured window) and picks the one the labels reach: the innermost such module
unless ``--criterion`` named a class or path, then the first called of those named. A name
that matches nothing is an error listing what was found.
"""

from __future__ import annotations

import contextlib
import functools
import types
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from perfsuite.errors import JobError

SEARCH_DEPTH = 3  # attribute levels searched below the script's frames (self.model, trainer.optimizer, ...)
_BIG = 2000  # containers larger than this are not searched (a list of file paths, a dataset's items)
_TARGET_KWARGS = ("target", "targets", "label", "labels", "lb", "y")


@dataclass
class Found:
    """What the script's frames hold: the objects the probes hook (see :func:`find_objects`)."""

    model: Any = None
    optimizer: Any = None
    scaler: Any = None
    criterion: Any = None
    losses: list[Any] = field(default_factory=list)  # the candidates for the criterion
    paths: dict[int, str] = field(default_factory=dict)  # id(loss module) -> the path it was reached by
    why: str = ""  # how the criterion was chosen (or why none was)

    def path(self, module: Any) -> str:
        return self.paths.get(id(module), type(module).__name__)

    def describe(self) -> str:
        def name(obj: Any) -> str:
            if obj is None:
                return "none found"
            inner = getattr(obj, "_orig_mod", None)  # torch.compile's OptimizedModule
            return f"{type(inner).__name__} (compiled)" if inner is not None else type(obj).__name__

        if self.criterion is not None:
            loss = f"{name(self.criterion)} at {self.path(self.criterion)}"
        elif len(self.losses) > 1:
            loss = f"one of {', '.join(self.listing())} (name it with --criterion)"
        else:
            loss = "none found"
        if self.why:
            loss += f" ({self.why})"
        return (
            f"model {name(self.model)}, optimizer {name(self.optimizer)}, loss {loss}, GradScaler {name(self.scaler)}"
        )

    def listing(self) -> list[str]:
        """Each candidate as ``Class at path``."""
        return [f"{type(m).__name__} at {self.path(m)}" for m in self.losses]


def _children(obj: Any, path: str) -> list[tuple[Any, str]]:
    """What a search goes through below ``obj``, with their paths: items, attributes, a closure's cells."""
    if isinstance(obj, dict):
        return [(v, f"{path}[{k!r}]") for k, v in obj.items()] if len(obj) <= _BIG else []
    if isinstance(obj, (list, tuple)):
        return [(v, f"{path}[{i}]") for i, v in enumerate(obj)] if len(obj) <= _BIG else []
    if isinstance(obj, (set, frozenset)):
        return [(v, f"{path}{{}}") for v in obj] if len(obj) <= _BIG else []
    if isinstance(obj, functools.partial):
        return [(obj.func, f"{path}.func"), *((a, f"{path}.args") for a in obj.args)] + [
            (v, f"{path}.{k}") for k, v in obj.keywords.items()
        ]
    if isinstance(obj, types.FunctionType):
        names = obj.__code__.co_freevars
        return [(c.cell_contents, f"{path}.<{n}>") for n, c in zip(names, obj.__closure__ or ()) if _filled(c)]
    if isinstance(obj, types.MethodType):
        return [(obj.__self__, path)]
    attrs = getattr(obj, "__dict__", None)
    return [(v, f"{path}.{k}") for k, v in attrs.items()] if isinstance(attrs, dict) and len(attrs) <= _BIG else []


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def is_loss(module: Any) -> bool:
    """``torch.nn``'s loss classes, or a class named ``...Loss``."""
    names = [c.__name__ for c in type(module).__mro__]
    return "_Loss" in names or "loss" in type(module).__name__.lower()


def find_objects(frames: Sequence[Any], criterion_name: str | None = None) -> Found:
    """The model, optimizer, GradScaler and loss modules among the objects the script's frames hold.

    A breadth-first search from each frame's locals (the script's globals included) down to
    :data:`SEARCH_DEPTH` attribute levels, stopping at modules, optimizers and scalers. The model is
    the outermost module whose parameters the optimizer updates (else the largest). The loss
    candidates are the loss modules (:func:`is_loss`) that update nothing, at any depth inside the
    modules found, or those whose class or path is ``criterion_name``: a name matching none of them
    raises :class:`perfsuite.errors.JobError` listing what was found. One candidate is the criterion;
    of several, :class:`LossPick` chooses while the script runs.
    """
    import torch
    from torch import nn

    modules: list[Any] = []
    paths: dict[int, str] = {}
    optimizers: list[Any] = []
    scalers: list[Any] = []
    seen: set[int] = set()
    queue: deque[tuple[Any, int, str]] = deque(
        (v, 0, k) for f in frames for k, v in list(f.f_locals.items()) if not k.startswith("__")
    )
    skip: tuple[type, ...] = (torch.Tensor, str, bytes, int, float, type, types.ModuleType)
    skip += (torch.utils.data.DataLoader, torch.utils.data.Dataset)
    while queue:
        obj, depth, path = queue.popleft()
        if id(obj) in seen or obj is None or isinstance(obj, skip):
            continue
        seen.add(id(obj))
        if isinstance(obj, nn.Module):
            modules.append(obj)
            paths[id(obj)] = path
        elif isinstance(obj, torch.optim.Optimizer):
            optimizers.append(obj)
        elif isinstance(obj, torch.amp.GradScaler):
            scalers.append(obj)
        elif depth < SEARCH_DEPTH:
            queue.extend((child, depth + 1, p) for child, p in _children(obj, path))
    inner = {id(sub) for m in modules for sub in m.modules() if sub is not m}
    roots = [m for m in modules if id(m) not in inner]
    trained = {id(p) for opt in optimizers for group in opt.param_groups for p in group["params"]}

    def overlap(m: Any) -> tuple[int, int]:
        params = list(m.parameters())
        return sum(id(p) in trained for p in params), len(params)

    with_params = [m for m in roots if any(True for _ in m.parameters())]
    model = max(with_params, key=overlap) if with_params else None
    optimizer = None
    if model is not None and optimizers:
        mine = {id(p) for p in model.parameters()}
        optimizer = max(optimizers, key=lambda o: sum(id(p) in mine for g in o.param_groups for p in g["params"]))
    elif optimizers:
        optimizer = optimizers[0]

    everything: list[Any] = []  # every module found, nested ones after their root, each once
    for root in roots:
        for name, sub in root.named_modules():
            if id(sub) not in paths or sub is root:
                paths.setdefault(id(sub), f"{paths[id(root)]}.{name}" if name else paths[id(root)])
            if all(sub is not m for m in everything):
                everything.append(sub)
    untrained = [m for m in everything if m is not model and overlap(m)[0] == 0]
    losses = [m for m in untrained if is_loss(m)]
    found = Found(model, optimizer, scalers[0] if scalers else None, None, losses, paths)
    if criterion_name is not None:
        named = [m for m in untrained if criterion_name in (type(m).__name__, paths[id(m)])]
        if not named:
            raise JobError(_no_match(criterion_name, found, untrained))
        found.losses = named
    if len(found.losses) == 1:
        found.criterion = found.losses[0]
        found.why = "named by --criterion" if criterion_name is not None else "the only loss module"
    return found


def _no_match(name: str, found: Found, modules: list[Any]) -> str:
    if found.losses:
        seen = "loss modules found: " + ", ".join(found.listing())
    else:
        classes = sorted({type(m).__name__ for m in modules})
        seen = "no loss module found; modules outside the model: " + (", ".join(classes[:20]) or "none")
    return (
        f"--criterion {name} matched no module the script holds ({seen}); name one of those by its class "
        "or its path, or leave --criterion out to take the one that receives the labels"
    )


def _is_labels(t: Any) -> bool:
    import torch

    return isinstance(t, torch.Tensor) and not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool)


class LossPick:
    """Several candidate loss modules: hook them all while the warm-up runs, then pick the one the labels reach.

    A call receives the labels when its target (second argument, or ``target=``/``labels=``...) is an
    integer tensor (class indices). The hooks read dtypes only: no sync, no copy.
    """

    def __init__(self, found: Found, named: bool) -> None:
        self.found, self.named = found, named
        self.order: list[int] = []  # candidate indices in the order they first received labels
        self.calls = 0
        self._hooks = contextlib.ExitStack()
        for i, module in enumerate(found.losses):
            handle = module.register_forward_pre_hook(functools.partial(self._seen, i), with_kwargs=True)
            self._hooks.callback(handle.remove)

    def _seen(self, index: int, module: Any, args: Any, kwargs: Any) -> None:
        self.calls += 1
        target = args[1] if len(args) > 1 else next((kwargs[k] for k in _TARGET_KWARGS if k in kwargs), None)
        if target is None or not _is_labels(target) or target.dim() < 1:
            return
        if index not in self.order:
            self.order.append(index)

    def choose(self) -> Any:
        """Remove the hooks; set ``found.criterion`` (or leave it None) and ``found.why``; return the criterion."""
        self._hooks.close()
        found, n = self.found, len(self.found.losses)
        receivers = [found.losses[i] for i in self.order]
        if not receivers:
            what = "none of them received an integer label tensor" if self.calls else "none of them was called"
            if self.named:
                found.criterion = found.losses[0]
                found.why = f"named by --criterion, the first of {n} such; {what} in the warm-up"
            else:
                found.why = f"{what} in the warm-up, so none is hooked"
            return found.criterion
        if not self.named:  # the innermost: drop a receiver that holds another receiver
            receivers = [m for m in receivers if not any(o is not m and _holds(m, o) for o in receivers)] or receivers
        found.criterion = receivers[0]
        found.why = (
            f"{'named by --criterion; ' if self.named else ''}received the labels first in a warm-up step, "
            f"of {len(self.order)} of the {n} candidate loss modules that did"
        )
        return found.criterion

    def close(self) -> None:
        self._hooks.close()


def ignore_index_of(module: Any) -> int | None:
    """The loss's ``ignore_index``: its own, else the one its nested loss modules agree on."""
    own = getattr(module, "ignore_index", None)
    if isinstance(own, int):
        return own
    inner = {getattr(m, "ignore_index", None) for m in module.modules() if m is not module and is_loss(m)}
    inner.discard(None)
    return next(iter(inner)) if len(inner) == 1 and isinstance(next(iter(inner)), int) else None


def _holds(outer: Any, inner: Any) -> bool:
    return any(sub is inner for sub in outer.modules() if sub is not outer)

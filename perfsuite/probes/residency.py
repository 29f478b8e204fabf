"""Which tensors of a run live on the device: exact on CUDA, and on a CPU run the ones a GPU run would put there.

A host read (``.item()``, ``bool(t)``, ``.cpu()``) is a sync only when its
tensor is on the device, and a copy is host->device only when its source is on
the host. On CUDA the tensor's own device says which. On a CPU run every tensor
is a host tensor, so perfsuite follows where each tensor *would* be in a GPU
run of the same code, in the observed steps only:

* on the device from the start: the model's parameters and buffers (and the
  declared loss module's, and a Job's GPU augmentation or batch mix when it is
  a module: its constants are buffers moved there at start-up);
* put there by the step: the result of ``.to(<the run's device>)``, and of any
  torch function called with ``device=<the run's device>``
  (``torch.tensor(data, device=d)``, ``torch.zeros(n, device=d)``, ...), when
  the step's own code makes the call (torch's own code names ``device="cpu"``
  when it means the host: an optimizer's step counter);
* computed there: every output of an operation with an input on the device,
  and every tensor an operation writes (``exp_avg.lerp_(grad)``, ``out=``)
  when an input is on the device. A TorchDispatchMode sees each operation
  after autograd, so gradients made by the backward pass are followed too.

Everything else stays on the host: the loader's batch before ``.to``, the
optimizer's step counters (a CPU tensor on CUDA too, unless ``capturable``),
tensors built without a device. ``.cpu()`` of a device tensor gives a host
tensor. Two CPU-run limits, documented for users: ``x.to(device)`` with the
device being the CPU cannot be told from a read-back ``x.to("cpu")``, so a
``.to`` to the CPU is taken as a host->device copy; and a tensor put on the
device before the observed steps (an accumulator built at start-up with
``device=``) is followed only once an operation in an observed step writes it
from a device tensor.

Which host tensors a GPU run would hold in pinned (page-locked) memory is
followed the same way, since a copy from pinned memory with
``non_blocking=True`` is the only host-to-device copy that does not stall the
host (:mod:`perfsuite.probes.synckinds`): on CUDA, ``Tensor.is_pinned()``
answers; on a CPU run, where torch pins nothing, the batches of a DataLoader
built with ``pin_memory=True`` (:meth:`Residency.mark_pinned`, called as the
batch is fetched), the result of ``.pin_memory()`` and tensors made with
``pin_memory=True``. A CPU build of torch refuses ``.pin_memory()`` (there is
no accelerator to pin for); in the observed steps the model returns an alias
of the tensor, marked pinned, in its place.

On a CPU run ``.to(device)`` returns its input itself when nothing changes; a
GPU run returns a new device tensor and the host tensor stays where it was. To
keep that distinction, such a ``.to`` (and such a ``.cpu()``) returns an alias
of its input (a view: same storage, same values, same autograd graph), made
with every mode off so that no probe counts it as the step's work.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

_SHARED_KEY = "residency"


class Residency:
    """Where the run's tensors live (see the module docstring); shared by the probes of one run."""

    def __init__(self, device: str, roots: Callable[[], Iterable[Any]] = tuple) -> None:
        import torch
        from torch.utils.weak import WeakTensorKeyDictionary

        self.device = torch.device(device)
        self.cuda = self.device.type != "cpu"
        self._on_device: Any = WeakTensorKeyDictionary()
        self._pinned: Any = WeakTensorKeyDictionary()
        self._can_pin = torch.accelerator.is_available()
        self._depth = 0
        self._stack: contextlib.ExitStack | None = None
        self._roots: Callable[[], Iterable[Any]] | None = roots  # read at the first observed step

    def add_module(self, module: Any) -> None:
        """Mark a module's parameters and buffers as device tensors (a CPU run's model is on "the device")."""
        if self.cuda or module is None or not hasattr(module, "parameters"):
            return
        for tensor in (*module.parameters(), *module.buffers()):
            self._on_device[tensor] = True

    def on_device(self, tensor: Any) -> bool:
        """Is this tensor on the device (on a CPU run: would a GPU run have it there)?"""
        if self.cuda:
            return bool(tensor.device.type != "cpu")
        return tensor in self._on_device

    def is_pinned(self, tensor: Any) -> bool:
        """Is this host tensor in pinned memory (on a CPU run: would a GPU run have pinned it)?"""
        if self.cuda or (tensor not in self._pinned and self._can_pin):
            return bool(tensor.is_pinned())  # really pinned (a CPU run on a machine with a GPU pins for real)
        return tensor in self._pinned

    def mark_pinned(self, batch: Any) -> None:
        """A batch of a DataLoader built with ``pin_memory=True``: on a CPU run, every tensor in it (through
        lists, tuples, dicts and dataclass-like objects) is taken as pinned, as the loader's pinning thread would
        have made it on a GPU run."""
        if self.cuda:
            return
        import torch

        seen: set[int] = set()

        def walk(value: Any, depth: int) -> None:
            if isinstance(value, torch.Tensor):
                self._pinned[value] = True
            elif depth < 6 and id(value) not in seen:
                seen.add(id(value))
                if isinstance(value, dict):
                    items: Iterable[Any] = value.values()
                elif isinstance(value, (list, tuple)):
                    items = value
                else:
                    items = getattr(value, "__dict__", {}).values()
                for item in items:
                    walk(item, depth + 1)

        walk(batch, 0)

    def is_run_device(self, where: Any) -> bool:
        """Does ``where`` (a device, a string, a tensor) name the run's device type?"""
        import torch

        if isinstance(where, torch.Tensor):
            where = where.device
        try:
            return torch.device(where).type == self.device.type
        except (TypeError, RuntimeError):
            return False

    @contextlib.contextmanager
    def tracking(self) -> Iterator[None]:
        """Follow tensors through one observed step (re-entrant: probes sharing it push its modes once)."""
        if self.cuda:  # a tensor's own device answers every question
            yield
            return
        self._depth += 1
        if self._roots is not None:  # the model as it is now (a script's is found once its loop runs)
            for module in self._roots():
                self.add_module(module)
            self._roots = None
        if self._depth == 1:
            stack = contextlib.ExitStack()
            stack.enter_context(self._dispatch_mode())
            stack.enter_context(self._function_mode())
            self._stack = stack
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0 and self._stack is not None:
                stack, self._stack = self._stack, None
                stack.close()

    # -- the modes (CPU runs only) -------------------------------------------------------------------------

    def _mark(self, value: Any) -> None:
        """Mark a tensor, or the tensors of a list/tuple (an op's outputs, a foreach op's arguments)."""
        import torch

        if isinstance(value, torch.Tensor):
            self._on_device[value] = True
        elif isinstance(value, (list, tuple)):
            for item in value:
                self._mark(item)

    def _mark_pinned_out(self, value: Any) -> None:
        import torch

        if isinstance(value, torch.Tensor):
            self._pinned[value] = True

    def _any_on_device(self, values: Any) -> bool:
        """Does any tensor among ``values`` (one level of lists/tuples inside, as ops take them) live on the device?"""
        import torch

        on_device = self._on_device
        for value in values:
            items = value if isinstance(value, (list, tuple)) else (value,)
            if any(isinstance(v, torch.Tensor) and v in on_device for v in items):
                return True
        return False

    def _dispatch_mode(self) -> Any:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        residency = self
        copies = {torch.ops.aten.copy_.default}
        writes: dict[Any, tuple[tuple[int, str, bool], ...]] = {}  # per op: the arguments it writes

        def written(func: Any) -> tuple[tuple[int, str, bool], ...]:
            found = writes.get(func)
            if found is None:
                found = tuple(
                    (i, a.name, a.kwarg_only)
                    for i, a in enumerate(func._schema.arguments)
                    if a.alias_info is not None and a.alias_info.is_write
                )
                writes[func] = found
            return found

        class FollowDevice(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                out = func(*args, **kwargs)
                if func in copies:  # a copy leaves its destination where it was: host.copy_(device) is a read-back
                    return out
                if residency._any_on_device(args) or (kwargs and residency._any_on_device(kwargs.values())):
                    residency._mark(out)
                    for i, name, kwarg_only in written(func):
                        residency._mark(kwargs.get(name) if kwarg_only else (args[i] if i < len(args) else None))
                return out

        return FollowDevice()

    def _function_mode(self) -> Any:
        import torch
        from torch.overrides import TorchFunctionMode

        from perfsuite.probes.base import unobserved
        from perfsuite.probes.sites import Sites

        residency, sites = self, Sites()

        def from_step() -> bool:
            return sites.find(sys._getframe(2))[1]  # the step's own code made the call, not torch's

        def alias(t: Any) -> Any:
            with unobserved():
                return t.view_as(t)

        class DeviceSources(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                source = args[0] if args and isinstance(args[0], torch.Tensor) else None
                if func is torch.Tensor.pin_memory and source is not None:
                    out = alias(source) if not torch.accelerator.is_available() else func(*args, **kwargs)
                    residency._pinned[out] = True  # what a GPU run pins (a CPU build of torch refuses to)
                    return out
                if kwargs.get("pin_memory") is True and not torch.accelerator.is_available():
                    kwargs = {**kwargs, "pin_memory": False}  # torch.empty(n, pin_memory=True): pinned on a GPU run
                    out = func(*args, **kwargs)
                    residency._mark_pinned_out(out)
                    return out
                was_on_device = source is not None and residency.on_device(source)
                out = func(*args, **kwargs)
                if func is torch.Tensor.to and source is not None:
                    dest = destination(args, kwargs)
                    if dest is not None and residency.is_run_device(dest) and (was_on_device or from_step()):
                        if out is source and not was_on_device:
                            out = alias(out)  # a GPU run returns a new device tensor; the host one stays put
                        residency._mark(out)
                elif func is torch.Tensor.cpu and source is not None and was_on_device and out is source:
                    out = alias(out)  # the host copy a GPU run would make: not a device tensor
                elif "device" in kwargs and residency.is_run_device(kwargs["device"]) and from_step():
                    residency._mark(out)
                return out

        return DeviceSources()


def destination(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The device a ``Tensor.to(...)`` call names (a device, a string, another tensor's device), or None."""
    import torch

    for arg in (*args[1:], kwargs.get("device"), kwargs.get("other")):
        if isinstance(arg, (str, torch.device)):
            return arg
        if isinstance(arg, torch.Tensor):
            return arg.device
    return None


def residency_for(ctx: Any) -> Residency:
    """The run's one Residency, made on first use; its roots (the model, the loss module) are read at the first
    observed step, from the context."""
    shared = getattr(ctx, "shared", None)
    if shared is not None and _SHARED_KEY in shared:
        return shared[_SHARED_KEY]

    def roots() -> list[Any]:
        # The modules a GPU run moves to the device at start-up: the model, the loss module, and a GPU
        # augmentation or batch mix (their constants are buffers: a CPU run cannot see them move there).
        job = getattr(ctx, "job", None)
        pipeline = getattr(ctx, "pipeline", None)
        found = [getattr(pipeline, name, None) for name in ("model", "gpu_augment", "batch_mix")]
        if job is not None and getattr(job, "job", None) is not None:
            found += [getattr(job.job, "criterion", None), getattr(job.job, "gpu_transform", None)]
        return [r for r in found if r is not None]

    residency = Residency(ctx.device, roots)
    if shared is not None:
        shared[_SHARED_KEY] = residency
    return residency

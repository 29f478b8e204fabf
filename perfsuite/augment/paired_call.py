"""A Dataset's paired transform, found by what it does: the call inside ``dataset[i]`` that takes the image and
the mask together and returns them together.

Names are a guess (real repositories keep it in ``self.trans_train``, ``self.t``, ``aug``, a module-level
function or a method), so ``dataset[i]`` runs once under :func:`sys.setprofile`: every Python call inside it
whose arguments hold one RGB image and one integer mask (a dict, a tuple, two arguments or ``image=``/``mask=``
keywords: :func:`perfsuite.augment.sample_adapter.interface_of`) and whose return value holds both again is a
*paired call*. The outermost one is the transform (a ``Compose`` rather than its flip); ``--transform NAME``
picks another by name. Its arguments are copied at the call (a transform may change a dict or an array in
place), and the callable is found again from the frame (``self``'s method, the module's function, or the one
function object that runs that code), so the check can call it again with painted images.
"""

from __future__ import annotations

import gc
import inspect
import os
import site
import sys
import sysconfig
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import CodeType, FrameType, MethodType
from typing import Any

from perfsuite.augment.sample_adapter import (
    ADAPTER_ADVICE,
    CannotAdapt,
    Interface,
    _describe,
    _is_image,
    _is_mask,
    interface_of,
)

_PACKAGE = str(Path(__file__).resolve().parents[1]) + os.sep
_PATHS = sysconfig.get_paths()
_LIBRARY_DIRS = [
    *(_PATHS.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")),
    *site.getsitepackages(),
    site.getusersitepackages(),
]
_LIBRARIES = tuple({str(Path(p).resolve()) + os.sep for p in _LIBRARY_DIRS if p})
CO_VARARGS, CO_VARKEYWORDS = inspect.CO_VARARGS, inspect.CO_VARKEYWORDS


def qualname(code: CodeType, owner: Any = None) -> str:
    """The function's qualified name (``HorizontalFlip.__call__``; on Python 3.10, which has no ``co_qualname``,
    from the class of the object it is bound to)."""
    if hasattr(code, "co_qualname"):
        return str(code.co_qualname)
    return f"{type(owner).__name__}.{code.co_name}" if owner is not None else code.co_name


def is_perfsuite(filename: str) -> bool:
    return filename.startswith(_PACKAGE)


def is_user_code(filename: str) -> bool:
    """The user's own files: neither perfsuite, the standard library, nor an installed package."""
    if filename.startswith("<") or is_perfsuite(filename):
        return False
    return not os.path.abspath(filename).startswith(_LIBRARIES)


@dataclass(frozen=True)
class Site:
    """A place in the user's code: file, line and the function's qualified name."""

    file: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{Path(self.file).name}:{self.line} ({self.function})"


@dataclass
class PairedCall:
    """One call that took the image and mask together and returned them together."""

    fn: Callable[..., Any] | None  # calls it again as the Dataset did (None: no callable was found for the code)
    code: CodeType
    interface: Interface  # the user-level arguments, image and mask copied at the call
    depth: int  # frames below dataset[i]'s first
    defined: Site  # the function's def line
    called_from: Site | None  # the line that called it (the caller's frame)
    name: str  # how the report names it: FaceMask.trans_train (Compose.__call__), face_dataset:augment
    module: str
    dataset: str  # the class of the Dataset whose __getitem__ made the call
    parent: int = 0  # the serial of the frame that made the call (siblings share it)
    inside: str | None = None  # an enclosing call that got the image and mask but is none perfsuite adapts
    returned: Any = None  # what it returned (the replay reads the mask it gave)
    returned_line: int = 0  # the line it returned from

    def matches(self, wanted: str) -> bool:
        """``--transform NAME``: an attribute/method name, or ``module:function`` (module by name or file stem)."""
        if ":" in wanted:
            module, function = wanted.split(":", 1)
            stem = Path(self.defined.file).stem
            in_module = module in (self.module, stem) or self.module.endswith("." + module)
            return (in_module and function in (qualname(self.code), self.code.co_name)) or wanted in _words(self.name)
        return wanted in _words(self.name) or wanted == self.code.co_name


def _words(name: str) -> set[str]:
    """The names ``--transform`` may give for a call named ``FaceMask.trans_train (Compose.__call__)``: the
    attribute (``trans_train``, ``FaceMask.trans_train``) or the class whose ``__call__`` runs (``Compose``)."""
    head, _, inner = name.partition(" (")
    words = {head, head.rsplit(".", 1)[-1], head.rsplit(":", 1)[-1]}
    for part in (head, inner.rstrip(")")):
        if part.endswith(".__call__"):
            words.add(part[: -len(".__call__")])
    return words


@dataclass
class _Open:
    frame: FrameType
    depth: int
    call: PairedCall | None
    serial: int = 0
    refused: str | None = None  # it got an image and a mask, in a layout perfsuite does not adapt (why)


def _ambiguous(values: list[Any]) -> bool:
    """Some image and some mask among the arguments (and in their dicts, lists, tuples)."""
    flat: list[Any] = []
    for v in values:
        if isinstance(v, dict):
            flat += list(v.values())
        elif isinstance(v, (list, tuple)) and len(v) < 16:
            flat += list(v)
        else:
            flat.append(v)
    return any(_is_image(v) for v in flat) and any(_is_mask(v) and not _is_image(v) for v in flat)


class Chain:
    """Paired calls one caller makes in turn (``img, lb = self.resize(img, lb); img, lb = self.aug(img, lb)``):
    checked as one transform, each call given what the one before returned."""

    def __init__(self, calls: list[PairedCall]) -> None:
        self.calls = calls

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        first = self.calls[0]
        assert first.fn is not None
        out = first.fn(*args, **kwargs)
        for before, call in zip(self.calls, self.calls[1:]):
            assert call.fn is not None
            image, mask = before.interface.result(out)
            out = call.interface.call_with(call.fn, image, mask)
        image, mask = self.calls[-1].interface.result(out)
        return first.interface.pack(image, mask)


def _arguments(frame: FrameType) -> tuple[list[Any], dict[str, Any]]:
    """The positional and keyword arguments the frame was called with (read at its 'call' event)."""
    code, local = frame.f_code, frame.f_locals
    n, k = code.co_argcount, code.co_kwonlyargcount
    names = code.co_varnames
    positional = [local[v] for v in names[:n] if v in local]
    keywords = {v: local[v] for v in names[n : n + k] if v in local}
    at = n + k
    if code.co_flags & CO_VARARGS:
        positional += list(local.get(names[at], ()))
        at += 1
    if code.co_flags & CO_VARKEYWORDS:
        keywords.update(local.get(names[at], {}))
    return positional, keywords


def _callable_of(frame: FrameType, positional: list[Any]) -> tuple[Callable[..., Any] | None, list[Any], Any]:
    """(the callable that runs this frame's code, the arguments it takes, the object it is bound to or None)."""
    code = frame.f_code
    if positional:
        owner = positional[0]
        try:
            attr = inspect.getattr_static(owner if isinstance(owner, type) else type(owner), code.co_name)
        except AttributeError:
            attr = None
        func = getattr(attr, "__func__", attr)
        if getattr(func, "__code__", None) is code and not isinstance(attr, staticmethod):
            bound = owner if code.co_name == "__call__" else getattr(owner, code.co_name)
            return bound, positional[1:], owner
    glob = frame.f_globals.get(code.co_name)
    if getattr(glob, "__code__", None) is code:
        return glob, positional, None
    functions = [r for r in gc.get_referrers(code) if inspect.isfunction(r) and r.__code__ is code]
    if len(functions) == 1 and positional and code.co_varnames[:1] == ("self",):  # super().__call__(...)
        return MethodType(functions[0], positional[0]), positional[1:], positional[0]
    if len(functions) == 1:
        return functions[0], positional, None
    return None, positional, None


def _copied(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copied(v) if _image_like(v) else v for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [_copied(v) if _image_like(v) else v for v in value]
        return items if isinstance(value, list) else tuple(items)
    if hasattr(value, "clone") and callable(value.clone):
        return value.clone()
    if hasattr(value, "copy") and callable(value.copy):
        return value.copy()
    return value


def _image_like(value: Any) -> bool:
    return hasattr(value, "shape") or (type(value).__module__.startswith("PIL.") and hasattr(value, "mode"))


def _has_image_like(values: Iterator[Any]) -> bool:
    for v in values:
        if _image_like(v):
            return True
        if isinstance(v, dict) and any(_image_like(x) for x in v.values()):
            return True
        if isinstance(v, (list, tuple)) and len(v) < 16 and any(_image_like(x) for x in v):
            return True
    return False


def _global_name(caller: FrameType | None, bound: Any) -> str | None:
    """``module:NAME`` when the object called is a global of the calling module (``AUG = Compose([...])``), so
    ``--transform NAME`` can name it; None otherwise."""
    if caller is None:
        return None
    names = [k for k, v in caller.f_globals.items() if v is bound and not k.startswith("__")]
    if not names:
        return None
    module = str(caller.f_globals.get("__name__", "?"))
    return f"{Path(caller.f_code.co_filename).stem if module == '__main__' else module}:{names[0]}"


def _holder(frame: FrameType | None, bound: Any, fn: Any) -> tuple[str, str | None]:
    """(the class of the Dataset whose ``__getitem__`` made the call, ``Dataset.attr`` when the callable or the
    object it is bound to is that Dataset's attribute or method)."""
    while frame is not None and frame.f_code.co_name != "__getitem__":
        frame = frame.f_back
    if frame is None:
        return "?", None
    dataset = frame.f_locals.get(frame.f_code.co_varnames[0]) if frame.f_code.co_varnames else None
    kind = type(dataset).__name__
    attrs = vars(dataset) if hasattr(dataset, "__dict__") else {}
    for key, value in attrs.items():
        if value is bound or value is fn or (inspect.ismethod(value) and value == fn):
            return kind, f"{kind}.{key}"
    if bound is dataset and fn is not None:
        return kind, f"{kind}.{getattr(fn, '__name__', '?')}"
    return kind, None


@dataclass
class Seen:
    """What one traced ``dataset[i]`` showed: every paired call, and the calls made directly in ``__getitem__``."""

    dataset: str
    index: int
    paired: list[PairedCall] = field(default_factory=list)
    direct: list[str] = field(default_factory=list)  # 'name(arg kinds)' of the calls __getitem__ made itself

    def outermost(self) -> PairedCall | None:
        return min(self.paired, key=lambda c: c.depth) if self.paired else None


class _Profiler:
    """The sys.setprofile function: a stack of open Python frames; paired calls recorded at their return."""

    def __init__(self, seen: Seen, watch: Callable[[PairedCall, FrameType], None] | None = None) -> None:
        self.seen, self.watch = seen, watch
        self.stack: list[_Open] = []
        self.serial = 0

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            self.stack.append(self._enter(frame))
        elif event == "return" and self.stack:
            opened = self.stack.pop()
            if opened.call is not None and opened.frame is frame:
                self._leave(opened.call, arg, frame)

    def _enter(self, frame: FrameType) -> _Open:
        self.serial += 1
        opened = self._open(frame)
        opened.serial = self.serial
        return opened

    def _inside(self) -> str | None:
        """Why the outermost enclosing call (below ``__getitem__``) that got the image and mask is not adapted."""
        why = None
        for opened in reversed(self.stack):
            if opened.frame.f_code.co_name == "__getitem__":
                break
            why = opened.refused or why
        return why

    def _open(self, frame: FrameType) -> _Open:
        depth = len(self.stack)
        code = frame.f_code
        if is_perfsuite(code.co_filename) or code.co_name.startswith("<") and code.co_name != "<lambda>":
            return _Open(frame, depth, None)
        positional, keywords = _arguments(frame)
        if (
            depth >= 1
            and self.stack[-1].frame.f_code.co_name == "__getitem__"
            and is_user_code(code.co_filename)
            and len(self.seen.direct) < 12
        ):
            shown = [_describe(v) for v in positional[1 if code.co_varnames[:1] == ("self",) else 0 :]]
            shown += [f"{k}={_describe(v)}" for k, v in keywords.items()]
            self.seen.direct.append(f"{qualname(code)}({', '.join(shown)})")
        if not _has_image_like(iter([*positional, *keywords.values()])):
            return _Open(frame, depth, None)
        guess = positional[1:] if code.co_varnames[:1] in (("self",), ("cls",)) else positional
        try:  # the cheap test first: most calls with an array argument are no paired transform
            interface = interface_of(tuple(guess), dict(keywords))
        except CannotAdapt as exc:
            refused = str(exc) if _ambiguous([*guess, *keywords.values()]) else None
            return _Open(frame, depth, None, refused=refused)
        fn, args, bound = _callable_of(frame, positional)
        if len(args) != len(guess):
            try:
                interface = interface_of(tuple(args), dict(keywords))
            except CannotAdapt:
                return _Open(frame, depth, None)
        copied = Interface(
            interface.style,
            interface.image_at,
            interface.mask_at,
            tuple(_copied(a) if isinstance(a, (dict, list, tuple)) or _image_like(a) else a for a in args),
            {k: _copied(v) if _image_like(v) else v for k, v in keywords.items()},
        )
        caller = frame.f_back
        called_from = Site(caller.f_code.co_filename, caller.f_lineno, qualname(caller.f_code)) if caller else None
        module = str(frame.f_globals.get("__name__", "?"))
        dataset, holder = _holder(caller, bound, fn)
        what = f"{type(bound).__name__}.__call__" if code.co_name == "__call__" else qualname(code, bound)
        if holder is not None:
            name = holder if holder.endswith("." + code.co_name) else f"{holder} ({what})"
        elif bound is None:
            name = f"{Path(code.co_filename).stem if module == '__main__' else module}:{qualname(code)}"
        elif (named := _global_name(caller, bound)) is not None:  # AUG = Compose([...]) at module level: AUG(...)
            name = f"{named} ({what})"
        else:
            name = what
        defined = Site(code.co_filename, code.co_firstlineno, qualname(code, bound))
        parent = self.stack[-1].serial if self.stack else 0
        inside = self._inside()
        call = PairedCall(fn, code, copied, depth, defined, called_from, name, module, dataset, parent, inside)
        return _Open(frame, depth, call)

    def _leave(self, call: PairedCall, returned: Any, frame: FrameType) -> None:
        try:
            image, mask = call.interface.result(returned)
        except CannotAdapt:
            return
        if not (_is_image(image) and _is_mask(mask)):
            return
        call.returned, call.returned_line = returned, frame.f_lineno
        self.seen.paired.append(call)
        if self.watch is not None:
            self.watch(call, frame)


def profiling_allowed() -> Any:
    """The profile function in place (to restore after), or CannotAdapt when one perfsuite cannot put back."""
    previous = sys.getprofile()
    if previous is not None and not callable(previous):
        raise CannotAdapt(
            f"a profiler ({type(previous).__name__}) is running: perfsuite check traces dataset[i] with "
            "sys.setprofile and could not put it back; run the check without it"
        )
    return previous


def trace_item(dataset: Any, index: int, watch: Callable[..., None] | None = None) -> Seen:
    """Run ``dataset[index]`` under the profiler; what it showed."""
    seen = Seen(type(dataset).__name__, index)
    profiler = _Profiler(seen, watch)
    previous = profiling_allowed()
    sys.setprofile(profiler)
    try:
        dataset[index]
    finally:
        sys.setprofile(previous)
    return seen


def choose(seen: Seen, wanted: str | None) -> PairedCall:
    """The transform: the outermost paired call (the calls its caller makes in turn at that depth, chained), or the
    one ``--transform`` names. CannotAdapt says what was seen."""
    if wanted is not None:
        named = [c for c in seen.paired if c.matches(wanted)]
        if named and min(named, key=lambda c: c.depth).fn is not None:
            return min(named, key=lambda c: c.depth)
        shown = "; ".join(dict.fromkeys(c.name for c in seen.paired)) or "none"
        raise CannotAdapt(
            f"--transform {wanted}: no call of that name inside {seen.dataset}[{seen.index}] took the image and the "
            f"mask together and returned them together; the calls that did: {shown}"
        )
    first = seen.outermost()
    if first is not None and first.inside is not None:
        raise CannotAdapt(
            f"{first.inside.split('; ' + ADAPTER_ADVICE)[0]}; inside it, {first.name} takes and returns the image and "
            f"mask, but checking it alone would leave out the rest: name it with --transform {_short(first)} to "
            "check that step alone, or " + ADAPTER_ADVICE
        )
    turn = [c for c in seen.paired if first is not None and c.depth == first.depth and c.parent == first.parent]
    if first is None or any(c.fn is None for c in turn):
        if first is not None:
            bad = next(c for c in turn if c.fn is None)
            why = f"{bad.name} ({bad.defined}) took and returned both, but perfsuite cannot call it again"
        else:
            why = "calls made in __getitem__: " + (", ".join(seen.direct) or "none")
        raise CannotAdapt(
            f"{seen.dataset}[{seen.index}] made no call that takes an image and a mask together and returns them "
            f"together ({why}); name it with --transform NAME (an attribute, or module:function), or " + ADAPTER_ADVICE
        )
    if len(turn) == 1:
        return first
    return replace(first, fn=Chain(turn), name=" -> ".join(c.name for c in turn))


def _short(call: PairedCall) -> str:
    """The shortest name ``--transform`` takes for ``call`` (its attribute or class, never ``__call__``)."""
    return sorted((w for w in _words(call.name) if not w.startswith("__")), key=len)[0]


def others(seen: Seen, chosen: PairedCall) -> list[str]:
    """The other paired calls at the chosen one's depth, made by another caller (left out), for the report."""
    return list(
        dict.fromkeys(
            c.name
            for c in seen.paired
            if c.depth == chosen.depth and c.parent != chosen.parent and c.code is not chosen.code
        )
    )

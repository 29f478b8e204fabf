"""Where a tensor operation comes from: the first frame outside torch and outside perfsuite's harness.

A sync or a copy is reported at the line of the step's own code that issued
it (the user's ``train.py:57``), not at torch's internals nor at perfsuite's
runner. ``find`` also says whether that line issued the call *directly*
(only torch's routing files in between) or through torch's own code (an
optimizer reading its step counter, ``clip_grad_norm_`` checking its norm).

A line number does not survive an edit above it, so each site found also keeps
what does (:meth:`Sites.identity`): the function it sits in and its
whitespace-normalised source text. The judge matches sites between two
revisions by those (:mod:`perfsuite.judge.sites`), never by line.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.machinery
import io
import linecache
import os
import sys
import tokenize
import warnings
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from perfsuite.core.source_paths import LIBRARY_ROOTS, library_relative, source_path

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
        self.probes_dir = os.path.dirname(probes_pkg.__file__) + os.sep
        self.warnings_py = os.path.dirname(warnings.__file__) + os.sep + "warnings.py"
        driver = os.path.join(package, "harness", "driver.py")
        # where the driver opens and closes the probes' watchers: a torch context manager (a profiler) exited
        # there has no probe frame between torch and the driver
        self.bookkeeping = frozenset({(driver, "_open_observed"), (driver, "_close_observed")})
        self.harness = (
            self.probes_dir,
            os.path.join(package, "harness", "runner.py"),
            os.path.join(package, "harness", "script", "drive.py"),  # a script's steps (perfsuite exec)
            os.path.join(package, "jobs", "contract.py"),
            self.warnings_py,
            contextlib.__file__,
        )
        # what find_users never takes for the user's code: torch, the harness, the standard library, packages
        self.not_users = (self.torch_dir, *self.harness, *LIBRARY_ROOTS)
        # where perfsuite's own code calls into the user's: find_users looks no further out
        self.boundary = tuple(p for p in self.harness if p not in (self.warnings_py, contextlib.__file__))
        self._origin: dict[str, tuple[str, str]] = {}  # site -> (absolute path, function's qualified name)
        self._users: dict[str, bool] = {}  # path -> whether find_users takes it as the user's code
        self._library: dict[str, bool] = {}  # path -> whether find passes it over for a user frame further out
        self.package = package + os.sep

    def find(self, frame: Any) -> tuple[str, bool]:
        """(site "path:line", issued directly by that site rather than by torch internals or a library).

        The user's own frame first: a frame of the standard library or an installed package (CPython's
        ``multiprocessing/queues.py:122``, a package's augmentation) is passed over while a frame of the user's
        code calls it from further out, and is the site only when none does (the walk stops where perfsuite's
        harness called in: a queue's feeder thread has no user frame).
        """
        direct, context = True, None  # context: the innermost library frame met, with what direct was there
        while frame is not None:
            path = frame.f_code.co_filename
            if path.startswith(self.torch_dir):
                if path[len(self.torch_dir) :] not in _PLUMBING:
                    direct = False
            elif path.startswith(self.harness):
                if context is not None and path.startswith(self.boundary):
                    break
            elif self._is_library(path):
                context = context or (frame, direct)
                direct = False
            else:
                return self._site(frame), direct
            frame = frame.f_back
        if context is not None:
            return self._site(context[0]), context[1]
        return "<unknown>", direct

    def _is_library(self, path: str) -> bool:
        """The standard library's or an installed package's file, not perfsuite's own (installed or not)."""
        known = self._library.get(path)
        if known is None:
            known = path.startswith(LIBRARY_ROOTS) and not path.startswith(self.package)
            self._library[path] = known
        return known

    def _site(self, frame: Any) -> str:
        """``path:line`` for a frame, remembering its file and function for :meth:`identity`."""
        path = frame.f_code.co_filename
        site = f"{_short(path)}:{frame.f_lineno}"
        if site not in self._origin:
            linecache.checkcache(path)  # the file as it is now: a script edited between two runs
            code = frame.f_code
            self._origin[site] = (path, getattr(code, "co_qualname", code.co_name))
        return site

    def find_users(self, frame: Any, callee: str = "") -> tuple[str, str]:
        """(site, what the site called) for work done deep inside libraries: the innermost frame that is neither
        torch, perfsuite's harness, the standard library nor an installed package (a Dataset's
        ``img.resize(...)`` line, not PIL's own), and the callable that line called (``callee`` when the frame
        itself is that line: a C call). The walk stops where perfsuite's harness called in (the loader replay):
        with no user code below it, the site is the library line the harness called (torch's
        ``default_collate``)."""
        called, below = callee, None  # below: the innermost frame seen that is not perfsuite's own
        while frame is not None:
            code = frame.f_code
            path = code.co_filename
            if path.startswith(self.boundary):  # the replay (or the runner) called into the loader here
                break
            ours = self._users.get(path)
            if ours is None:
                ours = not (path.startswith(self.not_users) or path.startswith("<"))
                self._users[path] = ours
            if ours:
                return self._site(frame), called
            called = f"{frame.f_globals.get('__name__', '?')}.{getattr(code, 'co_qualname', code.co_name)}"
            below, frame = frame, frame.f_back
        if below is None:
            return "<unknown>", callee
        # no user code between: the library callable the loader was given (torch's default_collate), at its line
        return f"{_short(below.f_code.co_filename)}:{below.f_lineno}", called

    def issued_by_probe(self, frame: Any) -> bool:
        """Whether the innermost frame outside torch (and the warnings machinery) is a perfsuite probe's own code.

        Such a call is the measurement's, not the step's: a probe reading what it collected as its watcher
        closes (seen on an H100: one sync per step at the driver's line that closes the watchers). contextlib's
        frames are passed over, and the driver's opening and closing of the watchers counts as a probe's.
        """
        while frame is not None:
            path = frame.f_code.co_filename
            if not path.startswith(self.torch_dir) and path not in (self.warnings_py, contextlib.__file__):
                return path.startswith(self.probes_dir) or (path, frame.f_code.co_name) in self.bookkeeping
            frame = frame.f_back
        return False

    def identity(self, site: str) -> dict[str, str]:
        """``{"function": ..., "code": ...}`` for a site :meth:`find` returned: what survives lines moving above it.

        Empty when unknown (``<unknown>``, a site never found, source not readable): the site is then matched
        by its line alone.
        """
        origin = self._origin.get(site)
        if origin is None:
            return {}
        path, function = origin
        code = normalise(linecache.getline(path, int(site.rsplit(":", 1)[1])))
        return {"function": function, "code": code} if code else {}


@dataclass(frozen=True)
class SiteCount:
    """One counter's count at one site: ``aten::zero_`` at ``train.py:54``, 12 per step.

    ``per`` is what the count is divided by: ``step`` (the step's own work: ops, bytes, FLOPs, syncs) or
    ``sample`` (the loader's work per sample). ``function`` and ``code`` are what survives an edit above the
    line (:meth:`Sites.identity`).
    """

    op: str
    site: str
    count: float
    per: str = "step"
    function: str = ""
    code: str = ""

    def to_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"op": self.op, "site": self.site, f"per_{self.per}": self.count}
        if self.function and self.code:
            entry.update(function=self.function, code=self.code)
        return entry


def count_of(entry: Mapping[str, Any]) -> float:
    """A site entry's count, per step or per sample (whichever it records)."""
    value = entry.get("per_step", entry.get("per_sample", 0.0))
    return float(value or 0.0)


def per_of(entry: Mapping[str, Any]) -> str:
    """``step`` or ``sample``: what a site entry's count is per."""
    return "sample" if "per_sample" in entry and "per_step" not in entry else "step"


def site_counts(
    counts: Mapping[tuple[str, str], float], divisor: float, sites: Sites | None, per: str = "step"
) -> list[SiteCount]:
    """(op, site) totals as typed per-step (or per-sample) counts with their identity, largest first."""
    out = []
    for (op, site), n in counts.items():
        if not n:
            continue
        identity = sites.identity(site) if sites is not None else {}
        value = round(n / max(divisor, 1), 6)
        out.append(SiteCount(op, site, value, per, identity.get("function", ""), identity.get("code", "")))
    return sorted(out, key=lambda c: (-c.count, c.op, line_of(c.site)))


def site_detail(counts: Iterable[SiteCount]) -> dict[str, Any]:
    """``{"sites": [...], "by_site": {line-free label: count}}``: what a metric's detail keeps of its sites."""
    entries = [c.to_dict() for c in counts]
    return {"sites": entries, "by_site": by_identity(entries)}


def code_site(op: str, path: str, line: int, function: str, count: float) -> SiteCount:
    """A site known by file and line rather than by a live frame (a compiled function's ``def`` line)."""
    linecache.checkcache(path)
    return SiteCount(op, f"{_short(path)}:{line}", count, "step", function, normalise(linecache.getline(path, line)))


# Where each DataLoader was built (the user's ``DataLoader(...)`` line), recorded by the hook on its constructor
# (:func:`note_built_loaders`), whoever built it and whenever: a script, a Job factory, or a module that builds a
# ready-made Job before perfsuite runs it.
_BUILT_AT: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()
_HOOKED = "__perfsuite_notes_built__"  # set on the hooked constructor: the hook is installed once
_DATALOADER_MODULE = "torch.utils.data.dataloader"


def record_built(obj: Any, frame: Any, sites: Sites) -> None:
    """Remember the line (with its identity) that built ``obj``: the first frame outside torch and the harness."""
    if obj in _BUILT_AT:  # a subclass's __init__ calling DataLoader.__init__: the outermost call is the user's
        return
    site = sites.find(frame)[0]
    with contextlib.suppress(TypeError):  # an object that cannot be weakly referenced: not recorded
        _BUILT_AT[obj] = {"site": site, **sites.identity(site)}


def _hook(loader_class: Any) -> None:
    """Wrap ``loader_class.__init__`` once so that each construction notes its line; nothing else changes."""
    construct = loader_class.__init__
    if getattr(construct, _HOOKED, False):
        return
    sites: list[Sites] = []  # made at the first construction (torch is imported by then)
    harness = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "harness") + os.sep

    @functools.wraps(construct)  # inspect.signature still reads torch's (perfsuite.harness.script.loader_args binds it)
    def noted_init(loader: Any, *args: Any, **kwargs: Any) -> None:
        frame: Any = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename.startswith(harness):  # another hook of the harness
            frame = frame.f_back
        if frame is not None:
            if not sites:
                sites.append(Sites())
            record_built(loader, frame, sites[0])
        construct(loader, *args, **kwargs)

    setattr(noted_init, _HOOKED, True)
    loader_class.__init__ = noted_init


class _AfterDataLoaderImport(importlib.abc.MetaPathFinder):
    """Hooks the DataLoader class as its module is first imported (perfsuite is imported before torch is)."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != _DATALOADER_MODULE:
            return None
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)  # once: the class is hooked from here on
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run_module = loader.exec_module

        def exec_then_hook(module: Any) -> None:
            run_module(module)
            _hook(module.DataLoader)

        loader.exec_module = exec_then_hook
        return spec


def note_built_loaders() -> None:
    """From now on, each ``DataLoader(...)`` notes the line that builds it (:func:`built_at`).

    Installed when perfsuite is imported (``perfsuite/__init__.py``), so a ready-made ``Job`` whose module
    imports perfsuite and then builds its DataLoader is seen as well as a factory's or a script's: a loader
    keeps no record of where it was built, and once built its line cannot be found. torch is not imported for
    this: while torch's DataLoader module is not loaded, an import hook waits for it (one name compared per
    import). A loader built before perfsuite was imported is not seen: its settings findings name no line.
    The hook only notes the caller's frame (a weak reference to the loader); what the loader does is unchanged.
    """
    module = sys.modules.get(_DATALOADER_MODULE)
    if module is not None and hasattr(module, "DataLoader"):
        _hook(module.DataLoader)
    elif not any(isinstance(f, _AfterDataLoaderImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterDataLoaderImport())


@contextlib.contextmanager
def noting_built_loaders() -> Any:
    """Each ``DataLoader(...)`` built while open (and after: :func:`note_built_loaders`) notes its line."""
    note_built_loaders()
    yield


def built_at(obj: Any) -> dict[str, str]:
    """``{"site": "train.py:72", "function": ..., "code": ...}`` where ``obj`` was built; {} when not seen."""
    try:
        return dict(_BUILT_AT.get(obj) or {})
    except TypeError:
        return {}


def normalise(line: str) -> str:
    """A source line as its site's identity: without its comment, whitespace collapsed (re-indenting it, or
    rewording its comment, is no change)."""
    text = line.strip()
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                text = text[: token.start[1]]
                break
    except (tokenize.TokenError, SyntaxError):  # a line of a longer statement: its comment, if any, stays
        pass
    return " ".join(text.split())


def _short(path: str) -> str:
    """A site's file: relative to its project's root or from its package on, never to the working directory
    (:func:`perfsuite.core.source_paths.source_path`)."""
    return source_path(path)


def short_path(where: str) -> str:
    """``.../site-packages/kornia/x.py:98`` -> ``kornia/x.py:98``: the package, not the virtualenv.

    Sites are recorded so (:func:`_short`); a result recorded before, or on another machine, may still hold an
    absolute path: a library folder of this interpreter is cut by where it is, another machine's by its name.
    """
    if os.path.isabs(where) and library_relative(where) is not None:
        return library_relative(where) or where
    for marker in ("site-packages/", "dist-packages/"):
        if marker in where:
            return where.split(marker, 1)[1]
    return where


def line_of(site: str) -> tuple[str, int]:
    """``("train.py", 97)`` from ``"train.py:97"``; ``(site, 0)`` when it has no line (``<unknown>``)."""
    path, _, line = site.rpartition(":")
    return (path, int(line)) if path and line.isdigit() else (site, 0)


def has_identity(entry: Mapping[str, Any]) -> bool:
    """Whether a site entry can be matched without its line: it records its function and code, or has no line."""
    return bool(entry.get("function") and entry.get("code")) or line_of(str(entry.get("site", "")))[1] == 0


def labelled(sites: Iterable[Mapping[str, Any]], by_line: bool = False) -> list[tuple[str, Mapping[str, Any]]]:
    """Each site entry with its label, unique per entry: ``Tensor.item (read) in train.py step(): loss.item()``.

    The label holds no line number, so it survives an edit above the site, and no virtualenv (a library's
    file from its package on: the committed exact file keeps these labels); the same code twice in one
    function is told apart by its order (``#2``). ``by_line``: label by ``op at path:line`` instead (entries recorded
    before sites kept their function and code).
    """
    entries = sorted((e for e in sites if isinstance(e, Mapping)), key=lambda e: line_of(str(e.get("site", ""))))
    out: list[tuple[str, Mapping[str, Any]]] = []
    seen: dict[str, int] = {}
    for entry in entries:
        op, site = str(entry.get("op", "?")), str(entry.get("site", "<unknown>"))
        if entry.get("kind"):  # a sync's kind (perfsuite.probes.synckinds): a blocking copy is not a read
            op = f"{op} ({entry['kind']})"
        if by_line or not has_identity(entry) or line_of(site)[1] == 0:
            label = f"{op} at {site}"
        else:
            label = f"{op} in {short_path(line_of(site)[0])} {entry['function']}(): {entry['code']}"
        seen[label] = seen.get(label, 0) + 1
        out.append((label if seen[label] == 1 else f"{label} #{seen[label]}", entry))
    return out


def by_identity(sites: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Per-step count by line-free label (:func:`labelled`), largest first: what the exact file keeps."""
    pairs = [(label, count_of(entry)) for label, entry in labelled(sites)]
    return dict(sorted(pairs, key=lambda kv: (-kv[1], kv[0])))

"""Where a script builds its DataLoaders, with which arguments, and the same script run with other arguments.

``perfsuite doctor -- python train.py`` names its fix at the line that builds the training
loader (``train.py:88 DataLoader(num_workers=8)``) and measures it by running the script
again, unchanged, with perfsuite setting that loader's arguments. :class:`LoaderCalls` wraps
``DataLoader.__init__`` while the script runs (the class attribute, put back however the
script ends): it records each DataLoader's call site (the first frame outside torch and
perfsuite) and the arguments the script passed, and for a loader built at the
:class:`Override`'s site, replaces those arguments before torch sees them. Everything else
the script does is left as it is.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfsuite.core.source_paths import source_path
from perfsuite.core.user_frames import PERFSUITE_DIR
from perfsuite.errors import PerfsuiteError

# The arguments perfsuite may set on the training loader (batch_size only where the script gives no batch_sampler).
SETTABLE = ("num_workers", "persistent_workers", "pin_memory", "prefetch_factor", "batch_size")
_PACKAGE = PERFSUITE_DIR + os.sep  # the package, wherever it lies


@dataclass(frozen=True)
class Site:
    """A line of the user's code: the file (absolute) and line number."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{_short(self.file)}:{self.line}"

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Site:
        return cls(str(data["file"]), int(data["line"]))


def _short(path: str) -> str:
    """The path relative to its project's root (:func:`perfsuite.core.source_paths.source_path`): the same from
    every working directory."""
    try:
        return source_path(path)
    except ValueError:  # another drive
        return path


@dataclass
class Construction:
    """One DataLoader the script built: where, and the arguments it passed by name (positional ones named)."""

    site: Site | None
    given: dict[str, Any] = field(default_factory=dict)
    overridden: dict[str, Any] = field(default_factory=dict)

    def call(self, args: Mapping[str, Any] | None = None) -> str:
        """``train.py:88 DataLoader(num_workers=8, ...)``: the arguments asked about, as the script gives them."""
        shown = {k: self.given.get(k, _DEFAULTS.get(k)) for k in (args or {})} if args else self.knobs()
        inner = ", ".join(f"{k}={v!r}" for k, v in shown.items())
        return f"{self.site} DataLoader({inner})" if self.site else f"DataLoader({inner})"

    def knobs(self) -> dict[str, Any]:
        return {k: self.given[k] for k in SETTABLE if k in self.given}


_DEFAULTS: dict[str, Any] = {
    "num_workers": 0,
    "persistent_workers": False,
    "pin_memory": False,
    "prefetch_factor": None,
    "batch_size": 1,
}


@dataclass(frozen=True)
class Override:
    """Set ``args`` on every DataLoader the script builds at ``site``."""

    site: Site
    args: Mapping[str, Any]

    def __post_init__(self) -> None:
        unknown = sorted(set(self.args) - set(SETTABLE))
        if unknown:
            raise PerfsuiteError(f"cannot set {', '.join(unknown)} on a script's loader; perfsuite sets {SETTABLE}")

    def to_dict(self) -> dict[str, Any]:
        return {"site": self.site.to_dict(), "args": dict(self.args)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Override:
        return cls(Site.from_dict(data["site"]), dict(data["args"]))

    def describe(self, given: Mapping[str, Any] | None = None) -> str:
        """``train.py:88 DataLoader(num_workers=8 -> 2, persistent_workers=False -> True)``."""
        given = given or {}
        parts = []
        for k, v in self.args.items():
            before = given.get(k, _DEFAULTS.get(k))
            parts.append(f"{k}={v!r}" if before == v else f"{k}={before!r} -> {v!r}")
        return f"{self.site} DataLoader({', '.join(parts)})"


def apply(arguments: dict[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` (the call's, by name) with ``args`` set, kept valid for torch: what was changed, by name."""
    changed = dict(args)
    if "batch_size" in changed and arguments.get("batch_sampler") is not None:
        raise PerfsuiteError(
            "the script's loader takes a batch_sampler, so its batch size is the sampler's: perfsuite cannot set it"
        )
    arguments.update(changed)
    if int(arguments.get("num_workers") or 0) == 0:  # torch refuses these without workers
        for name, off in (("persistent_workers", False), ("prefetch_factor", None)):
            if arguments.get(name):
                arguments[name] = changed[name] = off
    return changed


def _caller(frame: Any) -> Site | None:
    """The first frame outside torch and perfsuite: the user's line that built the loader."""
    import torch

    torch_dir = str(Path(torch.__file__).resolve().parent) + os.sep
    while frame is not None:
        path = frame.f_code.co_filename
        real = os.path.abspath(path)
        if not real.startswith((_PACKAGE, torch_dir)) and not path.startswith("<"):
            return Site(real, frame.f_lineno)
        frame = frame.f_back
    return None


class LoaderCalls:
    """Records every DataLoader the script builds (and sets the override's arguments); see the module docstring."""

    def __init__(self, override: Override | None = None) -> None:
        self.override = override
        self.built: dict[int, Construction] = {}  # id(loader) -> how it was built
        self._keep: list[Any] = []  # the loaders themselves, so an id is never reused while recorded
        self.applied = 0

    def of(self, loader: Any) -> Construction | None:
        return self.built.get(id(loader))

    @contextlib.contextmanager
    def installed(self) -> Iterator[LoaderCalls]:
        from torch.utils.data import DataLoader

        original = DataLoader.__init__
        signature = inspect.signature(original)
        calls = self

        def recording_init(loader: Any, *args: Any, **kwargs: Any) -> None:
            site = _caller(sys._getframe(1))
            try:
                bound = signature.bind(loader, *args, **kwargs)
            except TypeError:  # let torch say what is wrong with the call
                original(loader, *args, **kwargs)
                return
            arguments = dict(bound.arguments)
            arguments.pop("self", None)
            extra = arguments.pop("kwargs", {}) if "kwargs" in arguments else {}
            given = {**arguments, **extra}
            record = Construction(site, {k: v for k, v in given.items() if k != "dataset"})
            if calls.override is not None and site == calls.override.site:
                record.overridden = apply(given, calls.override.args)
                calls.applied += 1
            calls.built[id(loader)] = record
            calls._keep.append(loader)
            dataset = given.pop("dataset")
            original(loader, dataset, **given)

        DataLoader.__init__ = recording_init  # type: ignore[method-assign,assignment]
        try:
            yield self
        finally:
            DataLoader.__init__ = original  # type: ignore[method-assign]

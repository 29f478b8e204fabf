"""Where a flip-pair violation came from: the line of the user's transform that mirrored without the swap.

The check knows which sample and seed broke (``missing swap`` or ``swap without flip``), not which of the
transform's steps did it. So that one call is replayed (the same painted image, the same seed) and watched:

* every paired call inside it (:mod:`perfsuite.augment.paired_call`): its mask in and its mask out;
* every line of the user's own functions (:func:`sys.settrace`, never inside the standard library or
  installed packages): each integer-mask local before and after the line.

The first mask that is the previous one mirrored with a declared pair kept (``missing swap``), or one with a
declared pair swapped and not mirrored (``swap without flip``), is where it happened: a local's line, else the
``return`` line of the paired call (``return dict(im=im.flip(), lb=lb.flip())``). Nothing found: the transform
itself is named.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any

import numpy as np

from perfsuite.augment.painting import encode, palette_for
from perfsuite.augment.paired_call import PairedCall, Seen, Site, _Profiler, is_user_code, profiling_allowed, qualname
from perfsuite.augment.sample_adapter import SampleAdapter, _is_mask, mask_hw

Pairs = tuple[tuple[int, int], ...]
CAUSES = ("missing swap", "swap without flip")


@dataclass(frozen=True)
class Found:
    """The step that did it, and the declared pairs it left unswapped (or swapped)."""

    site: Site
    pairs: Pairs


def _pairs_text(pairs: Pairs) -> str:
    return ", ".join(f"{a}:{b}" for a, b in pairs)


def _swapped(mask: np.ndarray, pairs: Pairs) -> np.ndarray:
    out = mask.copy()
    for a, b in pairs:
        out[mask == a], out[mask == b] = b, a
    return out


def did_it(cause: str, before: np.ndarray, after: np.ndarray, pairs: Pairs) -> Pairs:
    """The declared pairs ``before -> after`` shows the cause on (empty: it does not show it)."""
    if before.shape != after.shape or before.ndim != 2:
        return ()
    mirrored = before[:, ::-1]
    if cause == "missing swap":
        if np.array_equal(mirrored, before):
            return ()
        target = mirrored
    else:
        target = before
    paired = np.isin(target, [v for p in pairs for v in p])
    if not paired.any() or not np.array_equal(after[~paired], target[~paired]):
        return ()
    swapped = _swapped(target, pairs)
    if not ((after == target) | (after == swapped))[paired].all():
        return ()
    if cause == "missing swap":
        kept = paired & (after == target) & (target != swapped)
        return tuple(p for p in pairs if np.isin(target[kept], p).any())
    moved = paired & (after == swapped) & (target != swapped)
    return tuple(p for p in pairs if np.isin(target[moved], p).any())


def _self(frame: FrameType) -> Any:
    return frame.f_locals.get("self") if frame.f_code.co_varnames[:1] == ("self",) else None


def _as_mask(value: Any) -> np.ndarray | None:
    try:
        if not _is_mask(value):
            return None
        arr = np.asarray(mask_hw(value.detach().cpu() if hasattr(value, "detach") else value))
    except Exception:  # noqa: BLE001 - a local that only looks like a mask is not evidence
        return None
    return arr if arr.ndim == 2 else None


def _masks_in(local: dict[str, Any]) -> list[tuple[str, Any]]:
    """The frame's locals, and the values of its dicts, lists and tuples (a ``**data`` holds ``data['mask']``)."""
    out: list[tuple[str, Any]] = []
    for name, value in local.items():
        if isinstance(value, dict):
            out += [(f"{name}[{k!r}]", v) for k, v in value.items()]
        elif isinstance(value, (list, tuple)) and len(value) <= 8:
            out += [(f"{name}[{k}]", v) for k, v in enumerate(value)]
        else:
            out.append((name, value))
    return out


@dataclass(frozen=True)
class _Hit:
    found: Found
    frame: int  # id() of the frame it was seen in
    ancestors: frozenset[int]  # id()s of the frames that called it, alive when it was seen
    step: bool  # that frame is a paired call (a transform step), not a helper it called


def _ancestors(frame: FrameType) -> frozenset[int]:
    out, f = set(), frame.f_back
    while f is not None:
        out.add(id(f))
        f = f.f_back
    return frozenset(out)


def _choose(hits: list[_Hit]) -> Found | None:
    """The hit that names the fix: of those that show the most pairs, the first, unless it is in a helper (a
    function that does not take and return the image and mask): then the line in its caller that the helper's
    result changed, up to the transform step that called it."""
    if not hits:
        return None
    most = max(len(h.found.pairs) for h in hits)
    best = [h for h in hits if len(h.found.pairs) == most]
    chosen = best[0]
    for later in best[1:]:
        if chosen.step:
            break
        if later.frame in chosen.ancestors:
            chosen = later
    return chosen.found


class _Lines:
    """The settrace function: in the user's frames, each mask local compared with the frame's earlier masks."""

    def __init__(self, cause: str, pairs: Pairs, hits: list[_Hit], profiler: _Profiler) -> None:
        self.cause, self.pairs, self.hits, self.profiler = cause, pairs, hits, profiler
        self.state: dict[int, tuple[list[int], dict[str, tuple[int, np.ndarray]]]] = {}

    def __call__(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if event != "call" or not is_user_code(frame.f_code.co_filename):
            return None
        self.state[id(frame)] = ([frame.f_lineno], {})
        return self._local

    def _local(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        last, masks = self.state.get(id(frame), ([frame.f_lineno], {}))
        if event in ("line", "return"):
            for name, value in _masks_in(frame.f_locals):
                arr = _as_mask(value)
                if arr is None:
                    continue
                old = masks.get(name)
                if old is not None and old[0] == id(value) and np.array_equal(old[1], arr):
                    continue
                for _, before in masks.values():
                    pairs = did_it(self.cause, before, arr, self.pairs)
                    if pairs:
                        where = Site(frame.f_code.co_filename, last[0], qualname(frame.f_code, _self(frame)))
                        step = any(o.frame is frame and o.call is not None for o in self.profiler.stack)
                        self.hits.append(_Hit(Found(where, pairs), id(frame), _ancestors(frame), step))
                        break
                masks[name] = (id(value), arr.copy())
        last[0] = frame.f_lineno
        if event == "return":
            self.state.pop(id(frame), None)
        return self._local


def locate(
    adapter: SampleAdapter, masks: np.ndarray, seed: int, sample: int | None, cause: str | None, pairs: Pairs
) -> Found | None:
    """Replay sample ``sample`` of ``adapter(encode(masks), masks, seed)`` and find the step that did ``cause``."""
    if sample is None or cause not in CAUSES or not pairs:
        return None
    hits: list[_Hit] = []

    def watch(call: PairedCall, frame: FrameType) -> None:
        try:
            before = _as_mask(call.interface.mask)
            after = _as_mask(call.interface.result(call.returned)[1])
        except Exception:  # noqa: BLE001 - a call whose output cannot be read is no evidence
            return
        if before is not None and after is not None:
            shown = did_it(cause, before, after, pairs)
            if shown:
                found = Found(Site(call.code.co_filename, call.returned_line, call.defined.function), shown)
                hits.append(_Hit(found, id(frame), _ancestors(frame), True))

    images = encode(masks, palette_for(masks))
    profiler = _Profiler(Seen("replay", sample), watch)
    lines = _Lines(cause, pairs, hits, profiler)
    previous_profile, previous_trace = profiling_allowed(), sys.gettrace()
    sys.setprofile(profiler)
    sys.settrace(lines)
    try:
        adapter.call_sample(images, sample, seed)
    finally:
        sys.settrace(previous_trace)
        sys.setprofile(previous_profile)
    return _choose(hits)


def fix_text(cause: str, found: Found | None, transform: PairedCall, pairs: Pairs = ()) -> str:
    """The cause in the user's terms, at the line that did it (else in the transform perfsuite checked); printed
    after ``cause: <cause>`` (a leading "in" reads after a comma, the rest after a colon)."""
    if found is not None:
        if cause == "missing swap":
            return f"flip without the left/right swap of {_pairs_text(found.pairs)} at {found.site}"
        return f"left/right swap of {_pairs_text(found.pairs)} without a flip at {found.site}"
    where = f"{transform.name}, defined at {transform.defined}"
    if cause == "missing swap" and pairs:
        return f"flip without the left/right swap of {_pairs_text(pairs)} somewhere in {where}"
    if cause == "swap without flip" and pairs:
        return f"left/right swap of {_pairs_text(pairs)} without a flip somewhere in {where}"
    return f"in {where}"

"""Call sites matched between base and head by what survives an edit: their function and source text.

A line inserted above three periodic ``.item()`` reads moves each of them down
by one. Matched by ``path:line``, each read looked gone at its old line and new
at the next one, and these ties (six changes of the same size) filled the list
while the one real new ``.cpu()`` below them was cut off. Here a site is
matched by its label (:func:`perfsuite.probes.sites.labelled`: op, file,
function, normalised code), so a site whose lines moved is the same site, and
what changed is listed in a fixed order: new and gone sites first, then counts
that moved, each group by size of change, then by op, file and line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from perfsuite.probes.sites import count_of, has_identity, labelled, line_of, per_of, short_path
from perfsuite.probes.synckinds import site_op


@dataclass(frozen=True)
class SiteChange:
    """One site whose per-step count differs between base and head (``new``, ``gone`` or ``count``)."""

    label: str
    op: str
    site: str  # where it is now (head), or where it was when gone; the label alone when no entry says where
    base: float
    head: float
    every: int | None = None
    was: str | None = None  # base's site, when a matched site's line moved
    per: str = "step"  # what the counts are per: a step, or a sample of the loader's

    @property
    def kind(self) -> str:
        return "new" if not self.base else "gone" if not self.head else "count"

    @property
    def delta(self) -> float:
        return self.head - self.base

    def order(self) -> tuple[Any, ...]:
        path, line = line_of(self.site)
        return (self.kind == "count", -abs(self.delta), self.op, path, line, self.label)

    def __str__(self) -> str:
        where = f"{self.op} at {short_path(self.site)}" if self.site else self.label
        notes = [f"every {self.every} steps"] if self.every and self.every > 1 else []
        if self.kind != "count":
            notes.append(self.kind)
        elif self.was and self.was != self.site:
            notes.append(f"was at {short_path(self.was)}")
        size = f"{self.delta:+.0f}" if abs(self.delta) >= 1000 else f"{self.delta:+.3g}"  # bytes, pixels: exact
        return f"{where} {size}/{self.per}" + (f" ({', '.join(notes)})" if notes else "")


def _side(detail: Mapping[str, Any], by_line: bool) -> dict[str, tuple[float, Mapping[str, Any] | None]]:
    """label -> (per step, the site entry) from a probe's ``sites``, or from a file's line-free ``by``."""
    sites = detail.get("sites")
    if isinstance(sites, list):
        return {label: (count_of(e), e) for label, e in labelled(sites, by_line)}
    by = detail.get("by_site", detail.get("by"))
    return {str(k): (float(v), None) for k, v in by.items()} if isinstance(by, Mapping) else {}


def site_changes(base_detail: Mapping[str, Any], head_detail: Mapping[str, Any]) -> list[SiteChange]:
    """Every site whose count changed, matched without line numbers where both sides allow it, in a fixed order.

    Either side is a sync probe's detail (``sites``) or a committed file's breakdown (``{"by": ...}``). A Result
    recorded before sites kept their function and code is matched by line (both sides then), as it always was.
    """
    entries = [e for d in (base_detail, head_detail) for e in d.get("sites") or () if isinstance(e, Mapping)]
    # A file's breakdown was labelled entry by entry (by_identity): a side of sites then is too.
    both = all(isinstance(d.get("sites"), list) for d in (base_detail, head_detail))
    by_line = both and not all(has_identity(e) for e in entries)
    before, after = _side(base_detail, by_line), _side(head_detail, by_line)
    out = []
    for label in set(before) | set(after):
        b, b_entry = before.get(label, (0.0, None))
        h, h_entry = after.get(label, (0.0, None))
        if b == h:
            continue
        entry = h_entry or b_entry
        every = entry.get("every") if entry is not None else None
        out.append(
            SiteChange(
                label,
                site_op(entry) if entry is not None else "",
                str(entry.get("site", "")) if entry is not None else "",
                b,
                h,
                every if isinstance(every, int) else None,
                str(b_entry["site"]) if b_entry is not None and h_entry is not None else None,
                per_of(entry) if entry is not None else "step",
            )
        )
    return sorted(out, key=SiteChange.order)


def describe(changes: Sequence[SiteChange], top: int = 3) -> str:
    """The first ``top`` changes, comma-separated (new and gone sites lead: see :func:`site_changes`)."""
    return ", ".join(str(c) for c in changes[:top])

"""Do the catch table's recorded call sites still point at the code? (issue 33 item 5)

The catch table is re-judged from recorded Results, so its messages name the
sync sites those Results recorded: ``Tensor.item at perfsuite/pipeline.py:144``
went on being printed long after the layout moved that file. This check reads
every recorded site in the project's own files and says which no longer hold
their call: the file is gone, the line is past its end, or the line does not
hold the op (its recorded code, when the probe kept it, or the op's call).
Sites in installed libraries (named from their package on, or absolute) are not the
project's code and are left alone: their lines move with the library's version.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from perfsuite.core.results import Metric, Result
from perfsuite.core.source_paths import LIBRARY_ROOTS
from perfsuite.probes.sites import line_of, normalise

# What a line must hold to issue each op whose call is not spelled ``.name(`` (``Tensor.item`` -> ``.item(``).
_SPELLED = {
    "Tensor.__format__": ("print(", "format(", "{"),
    "Tensor.__repr__": ("print(", "repr(", "{"),
    "Tensor.__bool__": ("bool(", "if ", "while ", "assert ", " and ", " or ", "not "),
    "Tensor.__int__": ("int(",),
    "Tensor.__float__": ("float(", "%"),
    "Tensor.__index__": ("[", "range("),
    "Tensor.__getitem__[bool mask]": ("[",),
    "Tensor.__setitem__[bool mask]": ("[",),
    "torch.where(cond)": ("where(",),
    "Tensor.to(cpu)": (".to(",),
}


def holds(op: str, line: str, code: str | None = None) -> bool:
    """Whether a source ``line`` can be the site of ``op``: its recorded ``code`` exactly, or the op's call."""
    if code:
        return normalise(line) == code
    spelled = _SPELLED.get(op)
    if spelled is None:
        owner, _, name = op.partition(".")
        spelled = (f".{name}(",) if owner == "Tensor" else (f"{name}(",)
    return any(s in line for s in spelled)


def _sync_metrics(results: Mapping[str, Result]) -> list[tuple[str, Metric]]:
    """Every recorded syncs_per_step: each Result's, then each of its ranks' (``fault:x rank 1``)."""
    out = []
    for key in sorted(results):
        out.append((key, results[key].metric("syncs_per_step")))
        out += [(f"{key} rank {r.rank}", r.metric("syncs_per_step")) for r in results[key].ranks]
    return out


def _library_file(site_path: str, file: Path) -> bool:
    """A site in an installed package or the standard library: named from its package on (``kornia/x.py``),
    found under this interpreter's library folders, not in the project (perfsuite.core.source_paths)."""
    return not file.is_file() and any(os.path.isfile(os.path.join(lib, site_path)) for lib in LIBRARY_ROOTS)


def stale_sites(results: Mapping[str, Result], root: Path) -> list[str]:
    """One line per recorded sync site in ``root``'s files that the code there no longer holds."""
    problems = []
    for key, metric in _sync_metrics(results):
        for entry in metric.detail.get("sites") or [] if metric.available else []:
            site, op = str(entry.get("site", "")), str(entry.get("op", ""))
            path, line = line_of(site)
            file = root / path
            if not line or Path(path).is_absolute() or "site-packages" in path or _library_file(path, file):
                continue
            if not file.is_file():
                problems.append(f"{key}: {op} at {site}: {path} does not exist")
                continue
            lines = file.read_text(encoding="utf-8").splitlines()
            if line > len(lines):
                problems.append(f"{key}: {op} at {site}: {path} has {len(lines)} lines")
            elif not holds(op, lines[line - 1], entry.get("code")):
                problems.append(f"{key}: {op} at {site}: the line holds {lines[line - 1].strip()[:80]!r}")
    return problems

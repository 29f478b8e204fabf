"""The history's order: the newest commit's first-parent line from git, oldest first; never commit times.

Commit times tie (commits made within one second, a scripted import, a rebase) and run backwards (a
cherry-pick keeps its author's clock), so a history sorted by them drew one change of a counter as five
change points (0, 1, 0, 1, 0, 1) and called an older commit "the newest". Ancestry does neither, and it is
the order ``perfsuite bisect`` walks (``git rev-list --first-parent``), so the two name the same commit.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

from perfsuite.tools.history.store import Entry, HistoryError


def first_parent_line(repo: Path, newest: str = "HEAD") -> list[str]:
    """Full shas of ``newest`` and its first parents, oldest first (``git rev-list --first-parent``)."""
    proc = subprocess.run(
        ["git", "-C", str(repo), "rev-list", "--first-parent", "--topo-order", newest, "--"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        why = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "not a git repository"
        raise HistoryError(
            f"cannot read the ancestry of {newest!r} in {repo} ({why}): the history is ordered by it, not by "
            "commit times; pass --repo DIR, a clone that holds the recorded commits, and --commit REV, the newest"
        )
    return proc.stdout.split()[::-1]


def rank_of(line: Sequence[str]) -> dict[str, int]:
    """Each sha's place on the line (0: the oldest)."""
    return {sha: i for i, sha in enumerate(line)}


def off_line(entries: Iterable[Entry], line: Sequence[str]) -> list[str]:
    """One line per commit recorded but not on ``line`` (another branch, a rewritten commit), left out of the plots."""
    rank = rank_of(line)
    counts: dict[str, int] = {}
    for e in entries:
        if e.commit not in rank:
            counts[e.commit] = counts.get(e.commit, 0) + 1
    return [
        f"{sha[:10]}: {n} run(s) left out: not on the first-parent line of the newest commit"
        for sha, n in sorted(counts.items())
    ]

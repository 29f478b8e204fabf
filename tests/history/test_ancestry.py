"""History in ancestry order on a planted repository whose twelve commits share one timestamp: the summary and
the dashboard name the one commit that changed syncs_per_step, as bisect does (before: sorted by commit time,
one change drew as five change points and an older commit was called the newest)."""

from __future__ import annotations

import io
import random
import re
import subprocess
from contextlib import redirect_stdout
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_store import result

from perfsuite.cli.main import main
from perfsuite.core.results import Metric
from perfsuite.tools.history.bisect import bisect
from perfsuite.tools.history.store import HistoryStore, commit_info

ONE_SECOND = "2026-01-01T00:00:00 +0000"
CULPRIT = 7  # commit 7 adds a per-step .item()


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_DATE": ONE_SECOND, "GIT_COMMITTER_DATE": ONE_SECOND, "PATH": "/usr/bin:/bin"}
    cmd = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout.strip()


def run_at(i: int):
    r = result(0.0 if i < CULPRIT else 1.0, workload="train.py")
    sites = [{"op": "Tensor.item", "site": "train.py:30", "function": "main", "code": "loss.item()", "per_step": 1.0}]
    r.metrics["syncs_per_step"] = Metric("syncs_per_step", 0 if i < CULPRIT else 1, detail={"sites": sites[: i >= 7]})
    r.metrics["flops_per_step"] = Metric("flops_per_step", 1.58e9, "FLOP/step")
    return r


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> tuple[Path, list[str], Path]:
    repo = tmp_path_factory.mktemp("repo")
    _git(repo, "init", "-q")
    shas = []
    for i in range(1, 13):
        (repo / "train.py").write_text(f"# version {i}\n")
        _git(repo, "add", "train.py")
        _git(repo, "commit", "-qm", f"commit {i}" + (": read the loss every step" if i == CULPRIT else ""))
        shas.append(_git(repo, "rev-parse", "HEAD"))
    assert len({commit_info(repo, sha)[1] for sha in shas}) == 1  # one timestamp for all twelve
    store = HistoryStore(repo.parent / "history")
    order = list(range(1, 13))
    random.Random(3).shuffle(order)  # recorded out of order: neither time nor recording order is ancestry
    for i in order:
        sha, when, subject = commit_info(repo, shas[i - 1])
        store.record(run_at(i), sha, when, subject)
    return repo, shas, store.root


def cli(*argv: str) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(list(argv)) == 0
    return out.getvalue()


def test_the_summary_names_the_one_commit_that_changed_and_the_true_newest(planted) -> None:
    repo, shas, history = planted
    text = cli("history", "summary", "--history", str(history), "--repo", str(repo), "--last", "20")
    culprit = shas[CULPRIT - 1][:10]
    moved = [line for line in text.splitlines() if line.startswith("- ")]
    assert moved == [
        f"- `{culprit}` commit 7: read the loss every step: syncs_per_step 0 -> 1 syncs/step: "
        f"{moved[0].split('syncs/step: ', 1)[1]}"
    ]
    assert f"the newest commit (`{shas[-1][:10]}` commit 12)" in text
    assert "1.58 GFLOP/step" in text and "e+" not in text


class Page(HTMLParser):
    """The dashboard's DOM, as far as the assertions need it: figures in order, texts by class."""

    def __init__(self) -> None:
        super().__init__()
        self.figures: list[str] = []
        self.texts: dict[str, list[str]] = {}
        self.changepoints = 0
        self._class: str | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "figure":
            self.figures.append(a["data-metric"])
        if tag == "line" and a.get("class") == "changepoint":
            self.changepoints += 1
        self._class = a.get("class") if tag == "text" else None

    def handle_data(self, data: str) -> None:
        if self._class:
            key = self._class.split()[-1]
            self.texts.setdefault(key, []).append(f"{len(self.figures) - 1}:{data}")


def test_the_dashboard_puts_the_change_first_labels_it_and_names_its_axes(planted, tmp_path: Path) -> None:
    repo, shas, history = planted
    out = tmp_path / "page.html"
    cli("history", "show", "--history", str(history), "--repo", str(repo), "--out", str(out))
    text = out.read_text(encoding="utf-8")
    page = Page()
    page.feed(text)
    assert page.figures[0] == "syncs_per_step" and len(page.figures) == 2  # the series that changed comes first
    assert page.changepoints == 1
    [label] = page.texts["cplabel"]  # short hash and subject, on the plot of syncs_per_step
    assert label.startswith(f"0:{shas[CULPRIT - 1][:7]} commit 7: read the")
    ticks = [t.split(":", 1)[1] for t in page.texts["xtick"] if t.startswith("0:")]
    assert ticks == [shas[i][:7] for i in (0, 2, 3, 5, 6, 8, 9, 11)]  # eight commits named, oldest left
    assert all("commit (12, oldest to newest" in t for t in page.texts["xlabel"])
    assert [t.split(":", 1)[1] for t in page.texts["ylabel"]] == ["syncs/step", "FLOP/step"]
    assert any(t.endswith("1.58 GFLOP") for t in page.texts["ytick"])  # the unit's prefix on the ticks
    assert not re.search(r"\de[+-]\d", text)


def test_bisect_names_the_same_commit(planted) -> None:
    repo, shas, _ = planted
    index = {sha: i for i, sha in enumerate(shas, start=1)}
    found = bisect(repo, shas[0], shas[-1], "syncs_per_step", lambda sha: run_at(index[sha]))
    assert found is not None and found.commit == shas[CULPRIT - 1]
    assert "syncs_per_step 0 -> 1 syncs/step" in found.describe("syncs_per_step")


def test_without_the_clone_the_history_is_not_drawn_in_another_order(planted, tmp_path: Path, capsys) -> None:
    _, _, history = planted
    assert main(["history", "summary", "--history", str(history), "--repo", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "the history is ordered by it, not by commit times" in err and "--repo DIR" in err


def test_runs_of_commits_off_the_line_are_left_out_and_named(planted, tmp_path: Path, capsys) -> None:
    repo, shas, history = planted
    text = cli("history", "summary", "--history", str(history), "--repo", str(repo), "--commit", shas[8])
    assert f"the newest commit (`{shas[8][:10]}` commit 9)" in text
    err = capsys.readouterr().err
    assert err.count("not on the first-parent line") == 3 and shas[11][:10] in err  # commits 10-12

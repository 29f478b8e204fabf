"""Call sites keep their identity when lines above them move (issue 31 item 6).

Sites are matched between base and head by op, file, function and normalised code, never by line;
what changed is listed new and gone first, then counts that moved, in one fixed order.
"""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path
from types import SimpleNamespace

import pytest
from fixed_fingerprint import FP

from perfsuite.core.knobs import Knobs
from perfsuite.core.results import Metric, Result
from perfsuite.judge.causes import movers
from perfsuite.judge.engine import compare_results
from perfsuite.judge.exact import check_exact, exact_breakdown, exact_values
from perfsuite.judge.sites import site_changes
from perfsuite.judge.verdict import Outcome
from perfsuite.probes.base import WindowTimings
from perfsuite.probes.sites import by_identity, labelled
from perfsuite.probes.syncs import SyncProbe


def site(op: str, line: int, code: str, per_step: float, every: int | None = None, function: str = "main") -> dict:
    entry = {"op": op, "site": f"train.py:{line}", "per_step": per_step, "function": function, "code": code}
    if every:
        entry["every"] = every
    return entry


def periodic(shift: int) -> list[dict]:
    """Three reads every 10 steps (an evaluation's), ``shift`` lines down."""
    return [
        site("Tensor.item", 80 + shift, "correct += (pred == y).sum().item()", 0.1, 10, "evaluate"),
        site("Tensor.item", 81 + shift, "seen += y.numel().item()", 0.1, 10, "evaluate"),
        site("Tensor.tolist", 90 + shift, "preds = logits.argmax(1).tolist()", 0.1, 10),
    ]


def syncs_result(sites: list[dict]) -> Result:
    detail = {"observed_steps": 10, "sites": sites, "by": by_identity(sites)}
    metric = Metric("syncs_per_step", sum(s["per_step"] for s in sites), "syncs/step", detail=detail)
    return Result(
        workload="w",
        scale="smoke",
        knobs={},
        metrics={"syncs_per_step": metric},
        samples={},
        fingerprint=FP,
        batch_size=8,
        steps=10,
        warmup=0,
    )


BASE = periodic(0)
HEAD = [*periodic(1), site("Tensor.cpu", 130, "host = logits.detach().cpu()", 1.0)]


def test_a_line_inserted_above_sites_leaves_only_the_new_site_named():
    (verdict,) = compare_results(syncs_result(BASE), syncs_result(HEAD), "t")
    assert verdict.outcome is Outcome.REGRESSED
    assert verdict.message == "syncs_per_step 0.3 -> 1.3 (exact): Tensor.cpu at train.py:130 +1/step (new)"
    assert verdict.cause == "host syncs: Tensor.cpu at train.py:130 +1/step (new)"
    for moved in (80, 81, 90, 91, 82):  # the periodic sites' old and new lines: none named
        assert f"train.py:{moved}" not in verdict.message + str(verdict.cause)


def test_the_order_is_the_same_whatever_order_the_sites_arrive_in():
    rng = random.Random(0)
    head = [*periodic(1), site("Tensor.cpu", 130, "host = logits.detach().cpu()", 1.0)]
    head[0] = {**head[0], "per_step": 0.3}  # three counts that moved, by the same amount each
    head[1] = {**head[1], "per_step": 0.3}
    head[2] = {**head[2], "per_step": 0.3}
    seen = set()
    for _ in range(8):
        b, h = BASE[:], head[:]
        rng.shuffle(b), rng.shuffle(h)
        seen.add(movers({"sites": b}, {"sites": h}, top=4))
    assert seen == {
        "Tensor.cpu at train.py:130 +1/step (new), "
        "Tensor.item at train.py:81 +0.2/step (every 10 steps, was at train.py:80), "
        "Tensor.item at train.py:82 +0.2/step (every 10 steps, was at train.py:81), "
        "Tensor.tolist at train.py:91 +0.2/step (every 10 steps, was at train.py:90)"
    }


def test_new_and_gone_sites_come_before_bigger_count_changes():
    base = [site("Tensor.item", 10, "loss.item()", 1.0), site("Tensor.cpu", 20, "x.cpu()", 0.5)]
    head = [site("Tensor.item", 12, "loss.item()", 9.0), site("Tensor.tolist", 30, "y.tolist()", 0.1)]
    changes = site_changes({"sites": base}, {"sites": head})
    assert [(c.kind, c.op) for c in changes] == [
        ("gone", "Tensor.cpu"),
        ("new", "Tensor.tolist"),
        ("count", "Tensor.item"),
    ]
    assert str(changes[0]) == "Tensor.cpu at train.py:20 -0.5/step (gone)"


def test_the_same_code_twice_in_one_function_is_told_apart_by_its_order():
    twice = [site("Tensor.item", 10, "loss.item()", 1.0), site("Tensor.item", 14, "loss.item()", 1.0)]
    labels = [label for label, _ in labelled(twice)]
    assert labels == [
        "Tensor.item in train.py main(): loss.item()",
        "Tensor.item in train.py main(): loss.item() #2",
    ]
    moved_once = [site("Tensor.item", 11, "loss.item()", 1.0), site("Tensor.item", 15, "loss.item()", 1.0)]
    assert site_changes({"sites": twice}, {"sites": moved_once}) == []
    (gone,) = site_changes({"sites": twice}, {"sites": moved_once[:1]})
    assert gone.kind == "gone"


def test_moving_sites_is_no_change_but_editing_their_code_is():
    assert site_changes({"sites": BASE}, {"sites": periodic(4)}) == []
    edited = [{**BASE[0], "code": "correct += (pred == y).sum().item() # checked"}, *BASE[1:]]
    assert [c.kind for c in site_changes({"sites": BASE}, {"sites": edited})] == ["gone", "new"]


def test_results_recorded_before_sites_kept_their_code_are_matched_by_line_as_before():
    old = [{k: v for k, v in s.items() if k not in ("function", "code")} for s in BASE]
    same = site_changes({"sites": old}, {"sites": BASE})
    assert same == []  # one side without code: both sides by line, and these lines are the same
    shifted = site_changes({"sites": old}, {"sites": periodic(1)})
    assert {c.kind for c in shifted} == {"new", "gone"}  # by line, a shift reads as one gone and one new each


def test_an_edit_above_sites_leaves_the_exact_file_unchanged_and_a_new_site_is_named_from_it():
    base, head = syncs_result(BASE), syncs_result(periodic(7))
    assert exact_breakdown(base) == exact_breakdown(head) and exact_values(base) == exact_values(head)
    assert check_exact(exact_values(base), head, "t", "the file", breakdown=exact_breakdown(base)) == [
        v for v in check_exact(exact_values(base), head, "t", "the file") if v.outcome is Outcome.UNCHANGED
    ]
    (verdict,) = check_exact(exact_values(base), syncs_result(HEAD), "t", "the file", breakdown=exact_breakdown(base))
    assert verdict.outcome is Outcome.REGRESSED
    assert "Tensor.cpu at train.py:130 +1/step (new)" in verdict.message
    assert "train.py:81" not in verdict.message and "train.py:91" not in verdict.message


def test_a_file_breakdown_matches_a_head_whose_site_has_no_readable_code():
    unread = {"op": "Tensor.item", "site": "generated.py:3", "per_step": 1.0}  # source not on disk
    recorded = exact_breakdown(syncs_result([*BASE, unread]))["syncs_per_step"]
    assert "Tensor.item at generated.py:3" in recorded
    assert site_changes({"by": recorded}, {"sites": [*periodic(2), unread]}) == []


def test_a_library_sites_label_holds_its_package_path_not_the_virtualenvs():
    entry = {
        "op": "Tensor.__bool__",
        "site": "/home/ci/.venv/lib/python3.11/site-packages/kornia/mix/base.py:146",
        "per_step": 1.0,
        "function": "MixBase.forward",
        "code": "if not bool(to_apply.any()):",
    }
    assert by_identity([entry]) == {
        "Tensor.__bool__ in kornia/mix/base.py MixBase.forward(): if not bool(to_apply.any()):": 1.0
    }


# ----------------------------------------------------------------------------- the probe records what survives

STEP = """import torch


def step(x):
    y = x.pin_memory().to("cpu", non_blocking=True) * 2  # on the device, as a GPU run's pinned batch is
    return float(y.sum().item())
"""


def _load(path: Path, name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sync_detail(step) -> dict:  # type: ignore[no-untyped-def]
    import torch

    probe = SyncProbe()
    probe.setup(SimpleNamespace(device="cpu", observe_steps=2, knobs=Knobs.from_flat()))  # type: ignore[arg-type]
    for _ in range(2):
        with probe.observe():
            step(torch.ones(3))
    probe.stop()
    return probe.metrics(WindowTimings(start_s=0.0, end_s=1.0, steps=2, batch_size=1))[0].detail


@pytest.mark.parametrize("inserted", ["# a comment\n", "import os\n\n\n"])
def test_the_probe_keeps_a_sites_function_and_code_so_an_edit_above_it_changes_no_label(tmp_path, inserted):
    for side, text in (("a", STEP), ("b", inserted + STEP)):
        (tmp_path / side).mkdir()
        (tmp_path / side / "mod.py").write_text(text)
    before = _sync_detail(_load(tmp_path / "a" / "mod.py", "site_identity_a").step)
    after = _sync_detail(_load(tmp_path / "b" / "mod.py", "site_identity_b").step)
    (b,), (a,) = before["sites"], after["sites"]
    assert (b["op"], b["function"], b["code"]) == ("Tensor.item", "step", "return float(y.sum().item())")
    assert (a["function"], a["code"]) == (b["function"], b["code"])
    line = int(STEP.splitlines().index("    return float(y.sum().item())")) + 1
    assert b["site"].endswith(f"mod.py:{line}")
    assert a["site"].endswith(f"mod.py:{line + inserted.count(chr(10))}")
    assert [k.replace("/b/", "/a/") for k in after["by"]] == list(before["by"]) != []
    same_file = [{**a, "site": a["site"].replace("/b/", "/a/")}]  # the same file at two revisions
    assert site_changes({"sites": before["sites"]}, {"sites": same_file}) == []


def test_a_call_whose_innermost_caller_is_a_probe_is_the_measurements_own_not_the_steps() -> None:
    """On an H100 a probe's read as its watcher closed was counted as a sync of the step, at the driver's line."""
    import os
    import sys

    from perfsuite.probes.sites import Sites

    sites = Sites()

    def frame_from(path: str) -> object:
        scope: dict = {"sys": sys}
        exec(compile("def where():\n    return sys._getframe(0)\n", path, "exec"), scope)
        return scope["where"]()

    assert sites.issued_by_probe(frame_from(os.path.join(sites.probes_dir, "labels.py")))
    assert not sites.issued_by_probe(frame_from("/home/user/project/train.py"))
    assert not sites.issued_by_probe(sys._getframe(0))  # this test's own line: a user's
    driver = os.path.join(os.path.dirname(os.path.dirname(sites.probes_dir)), "harness", "driver.py")
    scope: dict = {"sys": sys}
    exec(compile("def _close_observed():\n    return sys._getframe(0)\n", driver, "exec"), scope)
    assert sites.issued_by_probe(scope["_close_observed"]())  # a torch context manager the driver closed

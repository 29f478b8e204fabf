"""Loader settings are exact facts (issue 33 item 4): a change is named by compare, and fails where pinned."""

from __future__ import annotations

import json

import pytest
from fixed_fingerprint import FP

from perfsuite.cli.main import main
from perfsuite.core.results import Metric, Result
from perfsuite.errors import PerfsuiteError
from perfsuite.judge.engine import compare_results
from perfsuite.judge.thresholds import SettingPin, check_thresholds, known_threshold_names, parse_thresholds
from perfsuite.judge.verdict import Outcome

LOADER = {"num_workers": 2, "persistent_workers": False, "pin_memory": False, "prefetch_factor": None}


def result(batch_size: int = 8, sources: dict | None = None, **knobs: object) -> Result:
    return Result(
        workload="train",
        scale="smoke",
        knobs={**LOADER, "batch_size": None, **knobs},
        metrics={"syncs_per_step": Metric("syncs_per_step", 1.0, "syncs/step", detail={"sites": []})},
        samples={},
        fingerprint=FP,
        batch_size=batch_size,
        steps=4,
        warmup=1,
        knob_sources=sources or {},
    )


def settings(verdicts):  # type: ignore[no-untyped-def]
    return {v.metric: v for v in verdicts if v.metric in LOADER or v.metric == "batch_size"}


def test_undoing_a_documented_fix_regresses_and_any_other_change_is_changed():
    by = settings(compare_results(result(), result(num_workers=0, batch_size=16), "t"))
    assert sorted(by) == ["batch_size", "num_workers"]  # prefetch_factor follows from num_workers 0: not twice
    workers = by["num_workers"]
    assert (workers.base, workers.head, workers.outcome, workers.failed) == (2, 0, Outcome.REGRESSED, True)
    assert workers.message.startswith("regressed (setting): DataLoader(num_workers=2 -> 0) undoes a documented fix")
    assert "`perfsuite accept HEAD BASE`" in workers.message
    assert by["batch_size"].outcome is Outcome.CHANGED
    assert by["batch_size"].message.startswith("changed (setting): DataLoader(batch_size=8 -> 16)")
    more = settings(compare_results(result(), result(num_workers=4), "t"))["num_workers"]
    assert more.outcome is Outcome.CHANGED  # 2 -> 4 keeps the fix
    pinned_off = settings(compare_results(result(pin_memory=True), result(pin_memory=False), "t"))["pin_memory"]
    assert pinned_off.outcome is Outcome.REGRESSED


def test_equal_or_unknown_settings_are_not_compared():
    assert settings(compare_results(result(), result(), "t")) == {}
    unknown = {"pin_memory": "not known: the loader was never read"}
    head = result(pin_memory=True, sources=unknown)
    assert settings(compare_results(result(), head, "t")) == {}  # head does not know it: nothing is known to move
    assert "persistent_workers" in settings(compare_results(result(), result(persistent_workers=True), "t"))
    none_to_four = settings(compare_results(result(), result(prefetch_factor=4), "t"))["prefetch_factor"]
    assert none_to_four.message.startswith("changed (setting): DataLoader(prefetch_factor=- -> 4)")  # None: default


def test_a_marker_pins_a_loader_setting_and_fails_any_other_value():
    pins = parse_thresholds({"num_workers": 2, "pin_memory": True, "prefetch_factor": None, "batch_size": 8})
    assert all(isinstance(p, SettingPin) for p in pins)
    verdicts = check_thresholds(result(num_workers=0), "t", pins)
    assert [(v.metric, v.outcome) for v in verdicts] == [
        ("num_workers", Outcome.FAIL),
        ("pin_memory", Outcome.FAIL),
        ("prefetch_factor", Outcome.PASS),
        ("batch_size", Outcome.PASS),
    ]
    assert verdicts[0].message == "num_workers 2 -> 0: pinned to 2"
    assert [v.outcome for v in check_thresholds(result(pin_memory=True), "t", pins)] == [Outcome.PASS] * 4
    unread = check_thresholds(result(sources={"num_workers": "not known"}), "t", pins[:1])
    assert unread[0].outcome is Outcome.UNAVAILABLE  # never a pass for what was not recorded
    assert {"num_workers", "batch_size"} <= set(known_threshold_names())


@pytest.mark.parametrize(
    ("name", "bound", "words"),
    [
        ("num_workers", -1, "an integer >= 0"),
        ("num_workers", True, "an integer >= 0"),
        ("pin_memory", 1, "True or False"),
        ("batch_size", 0, "an integer >= 1"),
        ("batch_size", None, "an integer >= 1"),
    ],
)
def test_a_bad_pin_is_refused_with_what_to_write(name, bound, words):
    with pytest.raises(PerfsuiteError, match=words):
        parse_thresholds({name: bound})


def test_perfsuite_compare_names_the_change_in_markdown_and_json(tmp_path, capsys):
    base, head = tmp_path / "base.json", tmp_path / "head.json"
    base.write_text(result().to_json())
    head.write_text(result(num_workers=0).to_json())
    assert main(["compare", str(base), str(head)]) == 1
    assert "regressed (setting): DataLoader(num_workers=2 -> 0)" in capsys.readouterr().out
    assert main(["compare", str(base), str(head), "--json"]) == 1
    (named,) = [v for v in json.loads(capsys.readouterr().out)["results"] if v["metric"] == "num_workers"]
    assert (named["base"], named["head"], named["outcome"]) == (2, 0, "regressed")


# ----------------------------------------------------------------------------- the committed exact file pins them


def test_the_exact_file_pins_the_settings_it_recorded(tmp_path):
    from perfsuite.judge.exact import ExactBaselines, check_exact, exact_values
    from perfsuite.judge.settings import loader_settings

    base = result()
    store = ExactBaselines(tmp_path, "cpu__torch-2.13")
    store.record("t", exact_values(base), settings=loader_settings(base))
    store.save()
    assert json.loads(store.path.read_text())["settings"] == {"t": {**LOADER, "batch_size": 8}}
    loaded = ExactBaselines.open(tmp_path, "cpu__torch-2.13")
    pinned = loaded.expected_settings("t")

    def check(head: Result):  # type: ignore[no-untyped-def]
        return check_exact(loaded.expected("t"), head, "t", "the file", "update it", settings=pinned)

    assert [v.outcome for v in check(result())] == [Outcome.UNCHANGED]  # syncs_per_step only
    changed = [v for v in check(result(num_workers=0)) if v.metric == "num_workers"]
    message = (
        "regressed (setting): num_workers 2 -> 0 (loader setting pinned in the file) undoes a documented fix: "
        "batches load in worker processes beside the step, not between steps in the training process, see PyTorch "
        'docs, "torch.utils.data" (https://pytorch.org/docs/stable/data.html); if intended, update it: `update it`'
    )
    assert [(v.outcome, v.message) for v in changed] == [(Outcome.REGRESSED, message)]
    unknown = check(result(sources={"pin_memory": "not known"}))
    assert [v.outcome for v in unknown if v.metric == "pin_memory"] == [Outcome.UNAVAILABLE]
    unpinned = check_exact(loaded.expected("t"), result(num_workers=0), "t", "the file")  # a file without settings
    assert [v.metric for v in unpinned] == ["syncs_per_step"]


def test_a_bad_pinned_setting_in_the_exact_file_is_an_error_naming_it(tmp_path):
    from perfsuite.errors import BaselineError
    from perfsuite.judge.exact import ExactBaselines

    path = tmp_path / "cpu__torch-2.13.json"
    path.write_text(
        json.dumps({"schema_version": 2, "tests": {"t": {}}, "settings": {"t": {"num_workers": "two"}}}), "utf-8"
    )
    with pytest.raises(BaselineError, match=r"settings\['t'\]\['num_workers'\] = 'two' must be an integer >= 0"):
        ExactBaselines.open(tmp_path, "cpu__torch-2.13")

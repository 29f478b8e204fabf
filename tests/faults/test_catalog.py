"""The fault catalog, the decision rules on hand-made results, and the docs' catch table (no runs here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfsuite.core import metrics
from perfsuite.core.knobs import Knobs
from perfsuite.core.results import Fingerprint, Metric, Result
from perfsuite.errors import KnobError, PerfsuiteError
from perfsuite.harness.faults.catalog import FAULTS, REFERENCES, get_fault, mutation
from perfsuite.tools import catch

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "tests" / "faults" / "data" / "catch_results.json"
ISSUE_FAULTS = (
    "cpu_augmentation",
    "num_workers_0",
    "too_few_workers",
    "pin_memory_off",
    "blocking_copies",
    "persistent_workers_off",
    "prefetch_too_low",
    "amp_bool",
    "amp_off",
    "compile_off",
    "tf32_cudnn_off",
    "host_read_every_step",
    "unfused_optimizer",
    "eval_every_epoch",
    "batch_too_small",
    "seed_label_augment",
    "images_only_cutmix",
    "images_only_mixup",
)


def test_the_catalog_holds_every_fault_the_issue_names() -> None:
    assert set(ISSUE_FAULTS) <= set(FAULTS)


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_each_fault_applies_to_its_reference_and_changes_it(name: str) -> None:
    fault = FAULTS[name]
    base = REFERENCES[fault.reference].knobs()
    assert fault.applies_to(base) is None
    changed = fault.apply(base)
    assert changed != base or fault.mutation is not None, f"{name} changes nothing"
    assert fault.seed and fault.breaks and fault.cause and fault.signal
    if fault.device == "gpu":
        assert fault.why_device, f"{name} is gpu-only: say why a CPU cannot show it"
    assert metrics.get(fault.signal).name == fault.signal  # the engine judges it by its declared kind


def test_a_fault_refuses_a_baseline_without_what_it_removes() -> None:
    missing = FAULTS["amp_off"].applies_to(Knobs.from_flat(amp=None))
    assert missing and "amp='bf16'" in missing
    with pytest.raises(PerfsuiteError, match="needs a baseline with amp="):
        catch.spec_for(REFERENCES["compiled"], fault=FAULTS["amp_off"])


def test_amp_bool_follows_the_seed_code_path_and_the_knob_refuses_the_bool() -> None:
    base = REFERENCES["step"].knobs()
    assert FAULTS["amp_bool"].apply(base).step.amp is None  # 'amp: true' == 'bf16' is False: FP32
    with pytest.raises(KnobError, match="silently trains in FP32"):
        base.replace(**FAULTS["amp_bool"].refused)


def test_plugin_inject_hook_reads_the_catalog() -> None:
    from perfsuite.plugin.settings import fault_transform

    knobs = fault_transform(("num_workers_0", "host_read_every_step"))(REFERENCES["cuda"].knobs())
    assert knobs.loader.num_workers == 0 and knobs.step.log_interval == 1
    with pytest.raises(PerfsuiteError, match="unknown fault"):
        fault_transform(("no_such_fault",))


def test_mutation_combines_code_faults_only() -> None:
    assert mutation(["amp_off", "num_workers_0"]) is None
    mutate = mutation(["images_only_cutmix"])

    class P:
        batch_mix = None

    p = P()
    mutate(p)
    assert type(p.batch_mix).__name__ == "ImagesOnlyCutMix"
    with pytest.raises(PerfsuiteError, match="unknown fault"):
        get_fault("nope")


# --------------------------------------------------------------------------- decisions on hand-made results


def _result(values: dict, step_ms=(10.0,) * 12, batch=8, samples=None, **knobs) -> Result:
    ms = {"step_ms": Metric("step_ms", sorted(step_ms)[len(step_ms) // 2]), **values}
    return Result(
        "w",
        "smoke",
        {"amp": None, "compile": None, **knobs},
        ms,
        {"step_ms": list(step_ms), **(samples or {})},
        Fingerprint.collect("cpu"),
        batch,
        12,
        1,
    )


def test_sync_rule_names_the_new_call_site() -> None:
    base = _result(
        {
            "syncs_per_step": Metric(
                "syncs_per_step",
                1.0,
                detail={
                    "sites": [{"op": "Tensor.__bool__", "site": "/x/site-packages/kornia/a.py:9", "per_step": 1.0}]
                },
            )
        }
    )
    head = _result(
        {
            "syncs_per_step": Metric(
                "syncs_per_step",
                2.0,
                detail={
                    "sites": [
                        {"op": "Tensor.__bool__", "site": "/x/site-packages/kornia/a.py:9", "per_step": 1.0},
                        {"op": "Tensor.item", "site": "perfsuite/harness/pipeline.py:144", "per_step": 1.0},
                    ]
                },
            )
        }
    )
    c = catch.decide(FAULTS["host_read_every_step"], base, head)
    assert c.caught and "Tensor.item at perfsuite/harness/pipeline.py:144 +1/step" in c.message
    assert "kornia" not in c.message
    assert not catch.decide(FAULTS["host_read_every_step"], base, base).caught


def test_amp_rule_is_the_engines_exact_rule() -> None:
    on = _result({"amp_lowp_frac": Metric("amp_lowp_frac", 1.0), "amp_engaged": Metric("amp_engaged", True)})
    off = _result({"amp_lowp_frac": Metric("amp_lowp_frac", 0.0), "amp_engaged": Metric("amp_engaged", False)})
    c = catch.decide(FAULTS["amp_off"], on, off)
    assert c.caught and c.message.startswith("AMP not engaged: amp_lowp_frac 1 -> 0 (exact)")
    assert not catch.decide(FAULTS["amp_off"], on, on).caught
    assert not catch.decide(FAULTS["amp_off"], off, off).caught  # nothing to lose: not a catch


def test_throughput_rule_compares_per_sample_times() -> None:
    base = _result({}, step_ms=[10.0 + 0.1 * i for i in range(12)])
    small = _result({}, step_ms=[5.0 + 0.05 * i for i in range(12)], batch=2)  # twice as slow per sample
    same = _result({}, step_ms=[10.0 + 0.1 * i for i in range(12)])
    assert catch.decide(FAULTS["batch_too_small"], base, small).caught
    assert not catch.decide(FAULTS["batch_too_small"], base, same).caught


def test_epoch_stall_rule_looks_at_the_epoch_start_fetches() -> None:
    def run(stalls):
        return _result(
            {"epoch_start_cpu_ms": Metric("epoch_start_cpu_ms", stalls[0])}, samples={"epoch_fetch_cpu_ms": stalls}
        )

    base, slow = run([60.0, 61.0, 59.0, 60.5, 62.0, 58.0]), run([300.0, 310.0, 290.0, 305.0, 299.0, 301.0])
    c = catch.decide(FAULTS["persistent_workers_off"], base, slow)
    assert c.caught and "epoch_start_cpu_ms median" in c.message and "forked again every epoch" in c.message
    assert not catch.decide(FAULTS["persistent_workers_off"], base, base).caught


# --------------------------------------------------------------------------- the recorded self-test and README


def _report() -> catch.CatchReport:
    if not RESULTS.is_file():
        pytest.fail(f"{RESULTS} is missing; run `python scripts/catch_table.py --run`")
    return catch.CatchReport.load(RESULTS)


def test_recorded_self_test_covers_the_catalog_and_catches_every_cpu_fault() -> None:
    report = _report()
    assert set(report.catches) == set(FAULTS)
    for name, fault in FAULTS.items():
        c = report.catches[name]
        if fault.device == "gpu" and report.device == "cpu":
            assert c.caught is None and c.message.startswith(catch.NOT_HERE)
        else:
            assert c.caught is True, f"{name}: {c.message}"


def test_recorded_self_test_ran_the_references_of_this_catalog() -> None:
    report = _report()
    for name, recorded in report.references.items():
        assert recorded == catch.describe_reference(REFERENCES[name]), (
            f"reference {name} changed since the self-test was recorded; run `python scripts/catch_table.py --run`"
        )


def test_recorded_aa_has_5_runs_of_each_reference_and_no_false_alarm() -> None:
    report = _report()
    used = {f.reference for f in FAULTS.values() if catch.runnable(f, report.device)}
    assert set(report.aa) == used
    assert report.aa_runs >= 5
    assert report.false_alarms == 0, json.dumps([a["alarms"] for a in report.aa.values()], indent=1)


def test_the_table_and_the_engine_agree_on_every_recorded_result() -> None:
    """Engine parity: every recorded catch and A/A record is what the shipped engine says today."""
    report = _report()
    again = catch.rejudge(report)
    for name, recorded in report.catches.items():
        if recorded.caught is not None:
            assert again.catches[name] == recorded, f"{name}: the engine now says {again.catches[name].message}"
    assert again.aa == report.aa


def test_the_docs_catch_table_is_the_generated_one() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("catch_table", ROOT / "scripts" / "catch_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--check"]) == 0, "docs/catch.md's catch table is stale: run `python scripts/catch_table.py`"


def test_table_marks_gpu_faults_not_verified_and_splices_between_markers() -> None:
    report = catch.CatchReport(
        machine="m",
        device="cpu",
        catches={
            "pin_memory_off": catch.Catch("pin_memory_off", "samples_per_s", "gpu", None, f"{catch.NOT_HERE} (why)")
        },
    )
    table = catch.render_table(report)
    row = next(line for line in table.splitlines() if line.startswith("| `pin_memory_off`"))
    assert catch.NOT_HERE in row and "| yes |" not in row
    readme = catch.splice("# perfsuite\n", table)
    assert catch.current_table(readme) == table
    assert catch.current_table(catch.splice(readme, "new\n")) == "new\n"
    assert readme.startswith("# perfsuite\n")


def _catch_table_module():  # type: ignore[no-untyped-def]
    import importlib.util

    spec = importlib.util.spec_from_file_location("catch_table", ROOT / "scripts" / "catch_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_recorded_site_in_this_repository_still_holds_its_call() -> None:
    from perfsuite.tools.catch_sites import stale_sites

    report = _report()
    assert stale_sites(report.results, ROOT) == []
    checked = [
        s["site"]
        for r in report.results.values()
        for s in r.metric("syncs_per_step").detail.get("sites", [])
        if s["site"].startswith("perfsuite/")
    ]
    assert "perfsuite/harness/pipeline.py" in " ".join(checked)  # the check has the project's own sites to read
    ranks = [r for result in report.results.values() for r in result.ranks if r.metric("syncs_per_step").available]
    assert any(r.metric("syncs_per_step").detail.get("sites") for r in ranks)  # and each rank's, read too


@pytest.mark.parametrize(
    ("site", "words"),
    [
        ("perfsuite/pipeline.py:144", "perfsuite/pipeline.py does not exist"),
        ("perfsuite/harness/pipeline.py:99999", "lines"),
        ("perfsuite/harness/pipeline.py:1", "the line holds"),
    ],
)
@pytest.mark.slow
def test_the_table_check_and_rewrite_fail_when_a_recorded_site_and_the_code_disagree(
    tmp_path, capsys, site, words
) -> None:
    report = _report()
    entry = next(s for s in report.results["fault:host_read_every_step"].metric("syncs_per_step").detail["sites"])
    entry["site"] = site
    stale = tmp_path / "catch_results.json"
    report.save(stale)
    page = tmp_path / "catch.md"
    page.write_text((ROOT / "docs" / "catch.md").read_text())
    module = _catch_table_module()
    for argv in (["--check"], []):
        assert module.main([*argv, "--results", str(stale), "--page", str(page)]) == 1
        err = capsys.readouterr().err
        assert f"fault:host_read_every_step: Tensor.item at {site}" in err and words in err
        assert "--run --faults host_read_every_step" in err
    assert page.read_text() == (ROOT / "docs" / "catch.md").read_text()  # nothing rewritten from stale records


def test_a_site_holds_its_recorded_code_or_else_its_ops_call() -> None:
    from perfsuite.tools.catch_sites import holds

    assert holds("Tensor.item", "    total += loss.item()  # read")
    assert not holds("Tensor.item", "    _rank()")
    assert holds("Tensor.__format__", '    print(f"loss {loss}")')
    assert holds("torch.nonzero", "idx = torch.nonzero(mask)")
    assert holds("Tensor.item", "  x = a.item()  # c", code="x = a.item()")
    assert not holds("Tensor.item", "y = b.item()", code="x = a.item()")  # another read on the recorded line

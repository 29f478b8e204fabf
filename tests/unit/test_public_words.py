"""No internal word in what perfsuite prints (issue 56): a user has never seen the "seed" documents the project
was built from, so no verdict, report, help text or refusal names "the seeds" or a seed document by number; each
fix is named with its public source instead."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from perfsuite.core.results import Result
from perfsuite.judge.settings import SETTINGS, pinned_changes, setting_changes
from perfsuite.judge.verdict import Outcome

DATA = Path(__file__).resolve().parents[1] / "data"
# "the seeds", "seeds' fix", "seed 000", "seeds 000, 002", "(seed 003)", "seed NNN": never "--seed 0" (an RNG seed)
INTERNAL = re.compile(r"\bthe seeds\b|\bseeds'|\bseeds? (?:\d{3}|NNN)\b|\bseed (?:document|report)", re.IGNORECASE)


def internal(text: str) -> list[str]:
    return [line for line in text.splitlines() if INTERNAL.search(line)]


def test_the_pattern_catches_the_old_wording_and_spares_an_rng_seed() -> None:
    assert internal("regressed (setting): DataLoader(num_workers=2 -> 0) undoes the seeds' fix (seeds 000, 002)")
    assert internal("gray_classifier    seed 002  128x128 grayscale")
    assert not internal("--seed SEED  seeds the ABBA/BAAB order; -1 is not a seed: write --seed 0")


def _result(**knobs: object) -> Result:
    base = Result.from_json((DATA / "results" / "base.json").read_text(encoding="utf-8"))
    return dataclasses.replace(base, knobs={**base.knobs, **knobs})


def _undone() -> dict[str, tuple[object, object]]:
    """For each setting with a documented fix: a (fixed, undone) pair of values."""
    values: dict[str, tuple[object, object]] = {
        "num_workers": (2, 0),
        "amp": ("bf16", None),
        "compile": ("default", None),
    }
    for s in SETTINGS:
        if s.fixed is not None and s.name not in values:
            values[s.name] = (True, False)
    return values


def test_every_setting_finding_names_its_fix_by_a_public_source_never_the_seeds() -> None:
    messages = []
    for name, (fixed, undone) in _undone().items():
        verdicts = setting_changes(_result(**{name: fixed}), _result(**{name: undone}), "t")
        verdicts += pinned_changes({name: fixed}, _result(**{name: undone}), "t", "the file", "update")
        found = [v for v in verdicts if v.metric == name and v.outcome is Outcome.REGRESSED]
        assert found, name
        messages += [v.message for v in found]
    assert not internal("\n".join(messages))
    assert all("https://pytorch.org/" in m for m in messages if "undoes a documented fix" in m)
    assert sum("undoes a documented fix" in m for m in messages) >= len(_undone())


def test_compare_run_list_and_the_commands_help_name_no_seed_document(capsys: pytest.CaptureFixture[str]) -> None:
    from perfsuite.cli.main import build_parser, main
    from perfsuite.report import terminal
    from perfsuite.report.compare import judge_paths
    from perfsuite.report.verdicts import format_markdown

    verdicts, heads = judge_paths(
        DATA / "results" / "base.json", DATA / "results" / "head_slow.json", 1.05, 0.01, False
    )
    printed = [format_markdown(verdicts), terminal.to_text(terminal.verdicts_report(verdicts, width=100), 100)]
    printed += ["\n".join(terminal.run_lines(result)) for result in heads.values()]
    assert main(["list"]) == 0
    printed.append(capsys.readouterr().out)
    parser = build_parser()
    commands = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices
    for name in ("run", "compare", "exec", "doctor", "list", "tune"):
        printed.append(commands[name].format_help())
    assert not internal("\n".join(printed)), internal("\n".join(printed))


def test_the_refusals_a_run_can_print_name_no_seed_document() -> None:
    from perfsuite.augment.mix import _MIXUP_ON_MASKS
    from perfsuite.core.knobs import StepKnobs
    from perfsuite.errors import KnobError

    with pytest.raises(KnobError) as refused:
        StepKnobs(amp=True)  # type: ignore[arg-type]
    assert not internal(str(refused.value)) and not internal(_MIXUP_ON_MASKS)

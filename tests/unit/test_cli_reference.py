"""The command-line reference in docs/cli.md is the one generated from the argparse definitions."""

from __future__ import annotations

from pathlib import Path

from perfsuite.cli import reference
from perfsuite.cli.main import COMMANDS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_the_docs_cli_reference_is_generated_from_the_parser():
    assert reference.main(["--check", str(PAGE)]) == 0, "run `python -m perfsuite.cli.reference --write docs/cli.md`"


def test_every_command_and_every_flag_appears():
    import argparse

    from perfsuite.cli.main import build_parser

    text = reference.render()
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name in COMMANDS:
        assert f"## `perfsuite {name}`" in text
        for action in sub.choices[name]._actions[1:]:  # [0] is -h
            for flag in action.option_strings:
                assert f"`{flag}`" in text, flag


def test_a_stale_page_is_caught(tmp_path):
    stale = tmp_path / "cli.md"
    stale.write_text(f"# x\n\n{reference.START}\nold\n{reference.END}\n")
    assert reference.main(["--check", str(stale)]) == 1
    assert reference.main(["--write", str(stale)]) == 0 and reference.main(["--check", str(stale)]) == 0

"""Bad command-line input exits 2 with a message saying what to write, never a traceback."""

from __future__ import annotations

import pytest

from perfsuite.cli.main import main


@pytest.mark.parametrize(
    ("seed", "message"), [("-1", "-1 is not a seed: seeds are integers >= 0"), ("abc", "'abc' is not a seed")]
)
def test_a_negative_or_non_integer_seed_is_refused(seed: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["run", "gray_classifier", "--device", "cpu", "--seed", seed])
    err = capsys.readouterr().err
    assert info.value.code == 2 and message in err and "Traceback" not in err

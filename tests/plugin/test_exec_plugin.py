"""perf_run(perfsuite.Script([...])) in a user's test: a script that fails fails the test with its own traceback."""

from __future__ import annotations

from perfsuite_pytester import FAST

pytest_plugins = ["pytester"]

BROKEN = """
import torch

def load(batch):
    raise KeyError("label column missing")

for batch in torch.utils.data.DataLoader(torch.randn(8, 2), batch_size=4):
    load(batch)
"""

TEST = """
from pathlib import Path

import perfsuite


def test_script(perf_run):
    perf_run(perfsuite.Script([Path(__file__).with_name("broken.py")]))
"""


def test_a_failing_script_fails_its_test_showing_the_scripts_traceback(pytester):
    pytester.makepyfile(broken=BROKEN, test_it=TEST)
    result = pytester.runpytest_inprocess(*FAST, "test_it.py")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert 'broken.py", line 4, in load' in out and "KeyError: 'label column missing'" in out
    assert "perfsuite: " in out and "raised KeyError" in out
    assert "harness/script/drive.py" not in out and "runpy" not in out  # the script's frames only
    assert "During handling" not in out

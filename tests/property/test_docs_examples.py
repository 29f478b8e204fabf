"""The code in docs/properties.md runs as written: perfsuite's executors checked the documented way pass."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "properties.md"


def test_the_executor_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    example = next(b for b in blocks if "CpuAugment" in b)
    exec(compile(example, str(DOC), "exec"), {})  # raises PropertyViolation or an argument error if it is wrong

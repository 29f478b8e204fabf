"""perfsuite supports what pyproject claims: Python 3.10 reads [tool.perfsuite] through tomli."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from perfsuite.core.toml import tomllib  # tomli on 3.10

ROOT = Path(__file__).resolve().parents[2]


def test_requires_python_and_the_tomli_fallback_agree() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["requires-python"] == ">=3.10"
    assert "tomli>=1.1; python_version < '3.11'" in project["dependencies"]


def test_settings_read_pyproject_on_a_python_without_tomllib(tmp_path: Path) -> None:
    """As on 3.10: importing tomllib fails, tomli (here: tomllib under that name) is there."""
    (tmp_path / "pyproject.toml").write_text('[tool.perfsuite]\nscale = "full"\n', encoding="utf-8")
    code = (
        "import sys, tomllib\n"
        "sys.modules['tomli'] = tomllib\n"
        "sys.modules['tomllib'] = None\n"  # 'import tomllib' now raises ImportError, as on 3.10
        "sys.version_info = (3, 10, 14, 'final', 0)\n"
        "from perfsuite.plugin import settings\n"
        f"print(settings.read_pyproject({str(tmp_path)!r}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "{'scale': 'full'}"

"""One public front: every name perfsuite exports resolves, and the docs name only top-level names."""

from __future__ import annotations

import re
from pathlib import Path

import perfsuite

ROOT = Path(__file__).resolve().parents[2]


def test_every_exported_name_resolves():
    missing = [name for name in perfsuite.__all__ if getattr(perfsuite, name, None) is None]
    assert missing == []


def test_the_guide_and_plugin_docs_use_only_top_level_names():
    for doc in ("docs/own_job.md", "docs/plugin.md"):
        text = (ROOT / doc).read_text()
        used = set(re.findall(r"(?<![.\w-])perfsuite\.([A-Za-z_]\w*)", text)) - {"toml", "workloads", "probes"}
        assert {name for name in used if not hasattr(perfsuite, name)} == set(), doc
        assert not re.findall(r"from perfsuite\.\w", text), doc

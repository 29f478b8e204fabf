"""Command-line pieces for the pytest processes perfsuite starts: `perfsuite ab`'s sides, `perfsuite tune`'s trials."""

from __future__ import annotations


def plugin_args() -> list[str]:
    """``-p perfsuite.plugin.hooks`` unless the environment registers the plugin itself (loading it twice fails)."""
    from importlib.metadata import entry_points

    if any(ep.name == "perfsuite" for ep in entry_points(group="pytest11")):
        return []
    return ["-p", "perfsuite.plugin.hooks"]

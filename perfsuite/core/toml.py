"""TOML parsing on every supported Python: ``tomllib`` from 3.11, the ``tomli`` package on 3.10."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, as the tomli package (a dependency there)
    import tomli as tomllib

__all__ = ["tomllib"]

"""Importing the module registers the workload, so tests can name it: perf_run("example_defects")."""

import my_workload  # noqa: F401

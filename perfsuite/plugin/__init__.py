"""The thin pytest shell: hooks, the ``perf_run`` fixture, settings, the session's judge, xdist."""

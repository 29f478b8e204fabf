"""Reference workloads: one per seed document, each at ``smoke`` and ``full`` scale (registered in
:mod:`perfsuite.jobs.registry`)."""

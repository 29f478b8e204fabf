"""The workload contract: does example_defects give the runner what it relies on? (seconds, on a CPU)

Every workload should have these four checks; inheriting the class is all it takes.
"""

from perfsuite.testing import WorkloadContract


class TestDefectsContract(WorkloadContract):
    workload = "example_defects"

"""What runs: the Job contract, the workload registry, the reference workloads with their data and models.

Jobs know nothing of probes, runs or verdicts.
"""

"""Verdicts from Results: statistics, the decision rules (one engine), causes in the users' terms, exact and
timing baselines. Pure functions over Results: no torch, no pytest, nothing of run.
"""

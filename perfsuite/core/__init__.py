"""The vocabulary every stage shares: knobs, the metric registry, Result, the options table, atomic files.

Imports nothing of perfsuite but :mod:`perfsuite.errors`.
"""

"""The catalogue of planted faults: each known bug of the reported pipelines as a change to a reference run.

``catalog`` holds every fault (its knob change or code mutation, what must catch it, on which device) and
``loader`` the faults planted in the loader's code. The catch table (:mod:`perfsuite.tools.catch`), the plugin's
``--perfsuite-inject`` and the rank launcher use it; a run itself never imports it. It may import the run's
pipeline (:mod:`perfsuite.harness.pipeline`).
"""

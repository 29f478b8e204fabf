"""How a job runs: one driver's phases (set-up, warm-up, the measured window, the speed of light, the probes'
after-window work, the observed steps) over the step boundaries of a Job's loop, and what keeps a run honest and
safe (the clock, the watchdog, interrupts, threads, the DataLoader's workers).

The modules here are the run itself and import nothing of the sub-packages except a user's script's driving
(``runner`` hands a :class:`perfsuite.Script` to :mod:`perfsuite.harness.script.drive`, and ``child`` runs a
script in a fresh process for doctor). The sub-packages sit on
top of it, each for one subsystem (the import contract in pyproject.toml checks the directions):

* :mod:`perfsuite.harness.script.drive`: a user's unchanged training script under the same phases, and the property
  checks on its transform; imports the run, never the ranks.
* :mod:`perfsuite.harness.ranks`: the same run on several ranks under torchrun (DDP), the launcher, its
  supervisor and the merge into one Result; imports the run, the script path and the fault catalogue.
* :mod:`perfsuite.harness.faults.catalog`: the catalogue of planted faults (for the catch table, ``--perfsuite-inject``
  and the rank launcher); imports the run's pipeline. A run never imports it.
"""

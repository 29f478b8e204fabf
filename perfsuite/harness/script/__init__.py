"""A user's training script, run unchanged: its training DataLoader's batches mark the run's steps.

``drive`` runs the script in this process under the driver's phases (``perfsuite exec``, :class:`perfsuite.Script`),
``objects`` finds the loader, model and optimizer it made, ``modules`` sets aside the modules of another folder
its own would shadow while it runs, ``find_loader`` and ``loader_args`` read which
DataLoader is the training one and what it was built with, and ``transform_check`` runs the paired-augmentation
properties on its own transform (``perfsuite check``). It may
import the run's own modules (the driver, the watchdog) and the property checks (:mod:`perfsuite.augment`), never
the runner (which imports it), the ranks or the fault catalogue. A script's run in a fresh process, for doctor, is
:mod:`perfsuite.harness.child`, beside the runner it calls.
"""

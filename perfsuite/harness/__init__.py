"""How a job runs: the training pipeline built from knobs, the runner's phases (warm-up, measured window,
observed steps), the watchdog, and the fault catalog planted into runs.
"""

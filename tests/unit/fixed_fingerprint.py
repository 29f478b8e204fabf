"""One fixed machine fingerprint for the unit tests' hand-made Results (a CPU, torch 2.13, no GPU)."""

from perfsuite.core.results import Fingerprint

FP = Fingerprint(
    device="cpu",
    gpu_model=None,
    gpu_count=0,
    driver=None,
    cuda=None,
    torch="2.13.0",
    kornia=None,
    python="3.11.7",
    cpu_model="Test CPU",
    cpu_cores=2,
    platform="Linux",
)

"""Every reference workload keeps the workload contract (perfsuite.testing.WorkloadContract)."""

from __future__ import annotations

from perfsuite.testing import WorkloadContract


class TestFaceParsing(WorkloadContract):
    workload = "face_parsing"


class TestCaptchaSlider(WorkloadContract):
    workload = "captcha_slider"


class TestGrayClassifier(WorkloadContract):
    workload = "gray_classifier"


class TestSuperResolution(WorkloadContract):
    workload = "super_resolution"

"""Durations in Go's ``time.Duration.String`` form, as kube-scheduler's messages embed them."""

import pytest

from kopf_scheduler.framework.go_duration import go_duration


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (10, "10s"),
        (1.5, "1.5s"),
        (59.999, "59.999s"),
        (60, "1m0s"),
        (90, "1m30s"),
        (120, "2m0s"),
        (900, "15m0s"),
        (3600, "1h0m0s"),
        (3661, "1h1m1s"),
        (0.5, "500ms"),
        (0.001, "1ms"),
        (0.0015, "1.5ms"),
        (1e-6, "1\u00b5s"),
        (2.5e-7, "250ns"),
        (1e-9, "1ns"),
        (-1.5, "-1.5s"),
        (-90, "-1m30s"),
    ],
    ids=lambda v: str(v),
)
def test_go_duration(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text

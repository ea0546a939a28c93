"""Leader election settings: kube-scheduler's defaults and client-go's consistency checks."""

from __future__ import annotations

import pytest

from kopf_scheduler.k8s.leader import LeaderElectionConfig


def test_defaults_are_kube_schedulers() -> None:
    config = LeaderElectionConfig()
    assert (config.namespace, config.name) == ("kube-system", "kopf-scheduler")
    assert (config.lease_duration, config.renew_deadline, config.retry_period) == (15.0, 10.0, 2.0)
    assert config.release_on_cancel
    host, _, suffix = config.identity.rpartition("_")
    assert host and len(suffix) == 36
    assert LeaderElectionConfig().identity != config.identity
    config.validate()


@pytest.mark.parametrize(
    ("durations", "message"),
    [
        pytest.param((10, 10, 2), "lease_duration", id="lease-not-longer-than-deadline"),
        pytest.param((10.9, 10, 2), "lease_duration", id="whole-seconds-recorded"),
        pytest.param((15, 2, 2), "retry_period", id="deadline-within-jittered-retry"),
        pytest.param((15, 10, 0), "greater than zero", id="zero-retry"),
    ],
)
def test_inconsistent_durations_are_refused(durations: tuple[float, float, float], message: str) -> None:
    lease, deadline, retry = durations
    config = LeaderElectionConfig(lease_duration=lease, renew_deadline=deadline, retry_period=retry)
    with pytest.raises(ValueError, match=message):
        config.validate()

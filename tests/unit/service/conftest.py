"""The service sets process-wide state as it starts (``pod_requests.use_feature_gates`` with the gates of
the emulated version, as upstream's components read ``utilfeature.DefaultFeatureGate``): each test here
gets the defaults back afterwards, so a test elsewhere never reads a pod with another test's gates."""

from collections.abc import Iterator

import pytest

from kopf_scheduler.api.feature_gates import DEFAULT_GATES
from kopf_scheduler.framework import pod_requests


@pytest.fixture(autouse=True)
def _default_pod_request_gates() -> Iterator[None]:
    yield
    pod_requests.use_feature_gates(DEFAULT_GATES)

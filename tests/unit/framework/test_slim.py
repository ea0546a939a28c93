"""slim: the scheduler keeps API objects without managedFields, and never changes what it was given."""

from kopf_scheduler.framework.slim import slim
from kopf_scheduler.testing import make_pod


def test_managed_fields_are_dropped_from_a_copy() -> None:
    pod = make_pod().name("p").set("metadata.managedFields", [{"manager": "kubectl"}]).obj()
    kept = slim(pod)
    assert "managedFields" not in kept["metadata"]
    assert kept["metadata"]["name"] == "p" and kept["spec"] == pod["spec"]
    assert pod["metadata"]["managedFields"] == [{"manager": "kubectl"}]


def test_an_object_without_them_is_returned_as_is() -> None:
    pod = make_pod().name("p").obj()
    assert slim(pod) is pod

"""slim and kept: the scheduler keeps API objects without managedFields, with one string of each spelling
(kept), and never changes what it was given."""

import copy
import pickle
import sys

import pytest

from kopf_scheduler.framework.pod_info import PodInfo, PodParseError
from kopf_scheduler.framework.slim import kept, slim
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


def test_kept_is_the_slim_object_with_the_same_content() -> None:
    pod = (
        make_pod()
        .name("p")
        .set("metadata.managedFields", [{"manager": "kubectl"}])
        .set("spec.nodeName", "node-1")
        .obj()
    )
    before = copy.deepcopy(pod)
    out = kept(pod)
    assert out == slim(pod)
    assert pod == before  # the object given is never changed


def test_objects_received_apart_keep_one_string_of_each_spelling() -> None:
    # as from the watch intake's pipe: every pod rebuilt with strings of its own
    first, second = (pickle.loads(pickle.dumps(make_pod().name(n).node("node-1").obj())) for n in "ab")
    assert first["spec"]["nodeName"] is not second["spec"]["nodeName"]
    a, b = kept(first), kept(second)
    key_a = next(k for k in a["metadata"] if k == "namespace")
    key_b = next(k for k in b["metadata"] if k == "namespace")
    assert key_a is key_b
    if sys.version_info[:2] != (3, 12):  # there only keys are shared (its interned strings are immortal)
        assert a["spec"]["nodeName"] is b["spec"]["nodeName"]


def test_a_label_key_that_is_not_a_string_is_still_reported_by_its_field() -> None:
    pod = make_pod().name("p").obj()
    pod["metadata"]["labels"] = {1: "x"}
    with pytest.raises(PodParseError, match=r"^metadata.labels: keys must be strings"):
        PodInfo(kept(pod))

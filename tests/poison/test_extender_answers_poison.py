"""No extender answer stops the scheduler: for any body (JSON of any shape, nesting deeper than Go's decoder
allows, numbers past any range, bytes that are not JSON) ``wire.decode`` and every answer decoder return,
or raise ``WireError``; never another exception."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from poison_strategies import POISON_SETTINGS, answer_bodies

from kopf_scheduler.framework.extenders import wire

DECODERS: dict[str, Callable[[Any], Any]] = {
    "filter": wire.decode_filter_result,
    "prioritize": wire.decode_host_priorities,
    "preempt": wire.decode_preemption_result,
    "bind": lambda doc: wire.decode_error_result(doc, "ExtenderBindingResult"),
}


@pytest.mark.parametrize("verb", sorted(DECODERS))
def test_any_answer_decodes_or_is_a_wire_error(verb: str) -> None:
    decoder = DECODERS[verb]

    @POISON_SETTINGS
    @given(body=answer_bodies)
    def check(body: bytes) -> None:
        try:
            decoder(wire.decode(body))
        except wire.WireError as e:
            assert "\n" not in str(e)

    check()

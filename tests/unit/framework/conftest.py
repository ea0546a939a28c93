"""Fixtures shared by the framework's unit tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kopf_scheduler.framework.extenders import ExtenderTransport


@pytest.fixture
async def transport() -> AsyncIterator[ExtenderTransport]:
    """The HTTP transport extenders share, closed after the test."""
    t = ExtenderTransport()
    yield t
    await t.close()

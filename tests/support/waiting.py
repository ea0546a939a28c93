"""Waiting in an async test for something the event loop brings about."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def until(check: Callable[[], object], timeout: float = 5.0) -> None:
    """Returns once ``check()`` is true; fails the test (``TimeoutError``) after ``timeout`` seconds."""
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.005)

"""Relaying bytes both ways between two streams, as an HTTP CONNECT proxy does once the tunnel is up."""

from __future__ import annotations

import asyncio


async def splice(
    client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
) -> None:
    """Copies each side's bytes to the other until both ends close; a side that ends closes the other."""

    async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        except ConnectionError:
            pass
        finally:
            dst.close()

    await asyncio.gather(pipe(client[0], upstream[1]), pipe(upstream[0], client[1]))

"""Light background traffic through the demo gateway, so the pages have something live:

    python -m demo.traffic --gateway http://127.0.0.1:8080 --rate 4

`rate` requests a second to `/user-app/hello` (and some to `/order-app/hello`): most plain,
some with the reference design's header (`gray: gray-996`), some from user 1001 (gray once
an operator puts that user on the policy's user list, `X-User-No` by default), a few with
the header of the demo's lanes (`x-lane: feature-x`, `x-lane: feature-y`), so the traffic
split has lanes to show. Answers are not checked: errors are part of the picture (V2's
injected error rate).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import random

import httpx

log = logging.getLogger(__name__)

# (weight, path, headers)
KINDS: list[tuple[int, str, dict[str, str]]] = [
    (5, "/user-app/hello", {}),
    (2, "/user-app/hello", {"gray": "gray-996"}),
    (2, "/user-app/hello", {"X-User-No": "1001"}),
    (1, "/order-app/hello", {}),
    (1, "/order-app/hello", {"gray": "gray-996"}),
    (1, "/user-app/hello", {"x-lane": "feature-x"}),
    (1, "/user-app/hello", {"x-lane": "feature-y"}),
]


async def _one(client: httpx.AsyncClient, path: str, headers: dict[str, str]) -> None:
    try:
        await client.get(path, headers=headers)
    except httpx.HTTPError as exc:
        log.debug("%s: %r", path, exc)


async def run(gateway: str, rate: float) -> None:
    weights = [kind[0] for kind in KINDS]
    pending: set[asyncio.Task] = set()
    async with httpx.AsyncClient(base_url=gateway, timeout=5.0) as client:
        while True:
            _, path, headers = random.choices(KINDS, weights)[0]
            task = asyncio.create_task(_one(client, path, headers))
            pending.add(task)
            task.add_done_callback(pending.discard)
            await asyncio.sleep(random.expovariate(rate))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m demo.traffic", description=__doc__)
    parser.add_argument("--gateway", required=True, help="e.g. http://127.0.0.1:8080")
    parser.add_argument("--rate", type=float, default=4.0, help="requests per second")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run(args.gateway, args.rate))


if __name__ == "__main__":
    main()

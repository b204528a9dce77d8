"""One instance of a service on a call path, for the lane tests, run as a real process:

    python -m dataplane.sdk.tests.hop_app SERVICE VERSION PORT REGISTRY_URL [DOWNSTREAM]

(the registry's accessToken in REGISTRY_ACCESS_TOKEN). It serves `GET /{SERVICE}/hop` with
what it received of the gateway's route and how it went on: `{"service", "version", "flag",
"lane", "received": {the route's headers as they came}, "downstream": the answer of
`GET /{DOWNSTREAM}/hop` on an instance its SDK balancer picked by the route (or
`{"error"}`), `{}` without a downstream}`. `GET /{SERVICE}/-/ready` answers once it serves.
The test registers the instance itself.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import uvicorn

from dataplane.registry_client import NamingClient
from dataplane.sdk.balancer import NoInstance, ServiceBalancer
from dataplane.sdk.flag import current_flag, current_lane
from dataplane.sdk.middleware import GrayFlagASGIMiddleware

ROUTE_HEADERS = ("x-gray-status", "x-gray-lane", "x-gray-versions", "baggage")


class HopApp:
    def __init__(self, service: str, version: str, downstream: ServiceBalancer | None):
        self.service, self.version, self.downstream = service, version, downstream

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["path"] == f"/{self.service}/-/ready":
            await _answer(send, {})
            return
        headers = {name.decode(): value.decode() for name, value in scope["headers"]}
        answer = {
            "service": self.service,
            "version": self.version,
            "flag": current_flag(),
            "lane": current_lane(),
            "received": {name: headers.get(name) for name in ROUTE_HEADERS},
            "downstream": await self._downstream(),
        }
        await _answer(send, answer)

    async def _downstream(self) -> dict[str, Any]:
        if self.downstream is None:
            return {}
        try:
            response = await self.downstream.request("GET", f"/{self.downstream.service}/hop")
        except NoInstance as exc:
            return {"error": str(exc)}
        return response.json()

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if self.downstream is not None:
                    await self.downstream.start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.downstream is not None:
                    await self.downstream.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return


async def _answer(send: Any, body: dict[str, Any]) -> None:
    payload = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})  # fmt: skip
    await send({"type": "http.response.body", "body": payload})


if __name__ == "__main__":
    service, version, port, registry_url = sys.argv[1:5]
    downstream = None
    if len(sys.argv) > 5:
        registry = NamingClient(registry_url, access_token=os.environ["REGISTRY_ACCESS_TOKEN"])
        downstream = ServiceBalancer(registry, sys.argv[5], prod="V1", gray="V2", refresh_s=0.5)
    app = GrayFlagASGIMiddleware(HopApp(service, version, downstream))
    uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning", lifespan="on")

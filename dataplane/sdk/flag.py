"""The gray route of the request being served (the reference design's GrayFlagRequestHolder),
in a context variable: each asyncio task and each thread sees its own request's route.

A route is what the gateway decided where the request entered (docs/gateway-protocol.md,
"Lanes on the wire"): its flag (`X-Gray-Status`), its lane under GRAY (`X-Gray-Lane`) and what
it asks for at each later hop (`X-Gray-Versions`). Every hop passes all three on unchanged,
and the SDK's balancer and Celery router follow them.

asyncio copies the context into every task it creates (`asyncio.create_task`) and into
`asyncio.to_thread`; a plain thread or a `concurrent.futures` pool does not, so work handed to
one goes through `run_with_flag` / `ContextThreadPoolExecutor`. Outgoing calls send the route
on in those headers and, beside them, as the W3C baggage entries `graylane.gray` and
`graylane.lane` (see `outgoing_headers`).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

from routing_engine import FLAGS, GRAY, GRAY_STATUS_HEADER
from routing_engine.hops import (
    BAGGAGE_FLAG_KEY,
    BAGGAGE_LANE_KEY,
    LANE_HEADER,
    VERSIONS_HEADER,
    HopVersions,
    parse,
)
from routing_engine.lanes import lane_name_problem

P = ParamSpec("P")
T = TypeVar("T")

HEADER = GRAY_STATUS_HEADER
BAGGAGE_HEADER = "baggage"
BAGGAGE_KEY = BAGGAGE_FLAG_KEY
# RFC 9110 allows several header lines for one list header; W3C baggage caps a header at 8192.
MAX_BAGGAGE_LENGTH = 8192


@dataclass(frozen=True, slots=True)
class Route:
    """A request's flag; under GRAY its lane (None: the gray lane, as a gateway that names no
    lane means); and the `X-Gray-Versions` value it came with (None: none came, and each hop
    decides by its own configured versions), as received, to be sent on as it is."""

    flag: str
    lane: str | None = None
    versions: str | None = None
    # `versions` parsed, once: what the balancer and the Celery router read.
    hops: HopVersions | None = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "hops", None if self.versions is None else parse(self.versions))


_route: contextvars.ContextVar[Route | None] = contextvars.ContextVar(
    "graylane_gray_route", default=None
)


def current_route() -> Route | None:
    """The route of the request being served, or None outside a request (or when the caller
    sent no flag)."""
    return _route.get()


def current_flag() -> str | None:
    """ALL, PROD, GRAY, or None outside a request (or when the caller sent none)."""
    route = _route.get()
    return None if route is None else route.flag


def current_lane() -> str | None:
    """The lane of a GRAY request when it names one ("gray" for the gray lane), else None."""
    route = _route.get()
    return None if route is None else route.lane


def _text(value: str | bytes | None) -> str | None:
    return value.decode("latin-1") if isinstance(value, bytes) else value


def parse_flag(value: str | bytes | None) -> str | None:
    """A valid flag from a header value (case and spaces ignored), else None."""
    text = _text(value)
    if text is None:
        return None
    flag = text.strip().upper()
    return flag if flag in FLAGS else None


def parse_lane(value: str | bytes | None) -> str | None:
    """A lane name from a header value (spaces ignored), else None."""
    text = _text(value)
    if text is None:
        return None
    lane = text.strip()
    return lane if lane_name_problem(lane) is None else None


def _from_baggage(value: str | bytes | None, key: str) -> str | None:
    """The value of our entry `key` in a W3C `baggage` header value: `k=v;props, k2=v2`."""
    text = _text(value)
    if not text:
        return None
    for member in text.split(","):
        name, _, rest = member.partition("=")
        if name.strip() == key:
            return rest.split(";", 1)[0]
    return None


def flag_from_baggage(value: str | bytes | None) -> str | None:
    """Our flag entry of a W3C `baggage` header value."""
    return parse_flag(_from_baggage(value, BAGGAGE_KEY))


def route_from(
    status: str | bytes | None,
    lane: str | bytes | None,
    versions: str | bytes | None,
    baggage: str | bytes | None,
) -> Route | None:
    """The route a request carries, from its `X-Gray-Status`, `X-Gray-Lane`,
    `X-Gray-Versions` and `baggage` values (None for those absent). The headers, which the
    gateway sets, win over baggage, which another hop's OpenTelemetry propagation may have
    carried alone; flag and lane are read from the same one, so a lane never comes from
    elsewhere than its flag."""
    flag = parse_flag(status)
    if flag is None:
        flag = flag_from_baggage(baggage)
        lane = _from_baggage(baggage, BAGGAGE_LANE_KEY)
    if flag is None:
        return None
    return Route(flag, parse_lane(lane) if flag == GRAY else None, _text(versions) or None)


def route_of(headers: Mapping[str, str]) -> Route | None:
    """The route a request carries; `headers` must have lower-case names."""
    return route_from(
        headers.get(HEADER.lower()),
        headers.get(LANE_HEADER.lower()),
        headers.get(VERSIONS_HEADER.lower()),
        headers.get(BAGGAGE_HEADER),
    )


@contextlib.contextmanager
def use_route(route: Route | None) -> Iterator[None]:
    """The route of the code inside, restored on leaving (also on error)."""
    token = _route.set(route)
    try:
        yield
    finally:
        _route.reset(token)


def use_flag(flag: str | None) -> contextlib.AbstractContextManager[None]:
    """The flag of the code inside (no lane: the gray lane; no versions: each hop's own)."""
    return use_route(None if flag is None else Route(flag))


def set_route(route: Route | None) -> contextvars.Token:
    """For callers with a start and an end hook (Celery's signals): reset with `reset_route`."""
    return _route.set(route)


def reset_route(token: contextvars.Token) -> None:
    _route.reset(token)


def _with_baggage(existing: str | None, route: Route) -> str:
    ours = f"{BAGGAGE_KEY}={route.flag}"
    if route.lane is not None:
        ours += f",{BAGGAGE_LANE_KEY}={route.lane}"
    members = [m.strip() for m in (existing or "").split(",") if m.strip()]
    kept = [
        m for m in members if m.partition("=")[0].strip() not in (BAGGAGE_KEY, BAGGAGE_LANE_KEY)
    ]
    joined = ",".join([*kept, ours])
    return joined if len(joined) <= MAX_BAGGAGE_LENGTH else ours


def outgoing_headers(headers: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The headers to add to an outgoing call so the route goes on: ours, and our baggage
    entries merged into any `baggage` the call already has (other entries kept). Empty when
    there is no route, or when the caller set `X-Gray-Status` itself (an explicit choice
    wins)."""
    route = _route.get()
    if route is None:
        return {}
    present = {name.lower(): value for name, value in (headers or {}).items()}
    if HEADER.lower() in present:
        return {}
    return route_headers(route, present.get(BAGGAGE_HEADER))


def route_headers(route: Route, baggage: str | None = None) -> dict[str, str]:
    """`X-Gray-Status`, `X-Gray-Lane` and `X-Gray-Versions` of `route` (the last two when it
    has them), and `baggage` with our entries set to it (others kept)."""
    headers = {HEADER: route.flag, BAGGAGE_HEADER: _with_baggage(baggage, route)}
    if route.lane is not None:
        headers[LANE_HEADER] = route.lane
    if route.versions is not None:
        headers[VERSIONS_HEADER] = route.versions
    return headers


def run_with_flag(function: Callable[P, T]) -> Callable[P, T]:
    """`function` bound to the caller's context (its route included), to run in another
    thread: `threading.Thread(target=run_with_flag(work))`."""
    context = contextvars.copy_context()

    @functools.wraps(function)
    def bound(*args: P.args, **kwargs: P.kwargs) -> T:
        return context.run(function, *args, **kwargs)

    return bound


class ContextThreadPoolExecutor(ThreadPoolExecutor):
    """A ThreadPoolExecutor whose tasks run in the context of the code that submitted them, as
    `asyncio.to_thread` does; also usable as `loop.run_in_executor`'s executor."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        context = contextvars.copy_context()
        return super().submit(context.run, fn, *args, **kwargs)

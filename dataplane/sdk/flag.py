"""The gray flag of the request being served (the reference design's GrayFlagRequestHolder),
in a context variable: each asyncio task and each thread sees its own request's flag.

asyncio copies the context into every task it creates (`asyncio.create_task`) and into
`asyncio.to_thread`; a plain thread or a `concurrent.futures` pool does not, so work handed to
one goes through `run_with_flag` / `ContextThreadPoolExecutor`. Outgoing calls send the flag
on in `X-Gray-Status` and, beside it, as the W3C baggage entry `graylane.gray` (see
`outgoing_headers`).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from routing_engine import FLAGS, GRAY_STATUS_HEADER

P = ParamSpec("P")
T = TypeVar("T")

HEADER = GRAY_STATUS_HEADER
BAGGAGE_HEADER = "baggage"
BAGGAGE_KEY = "graylane.gray"
# RFC 9110 allows several header lines for one list header; W3C baggage caps a header at 8192.
MAX_BAGGAGE_LENGTH = 8192

_flag: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "graylane_gray_flag", default=None
)


def current_flag() -> str | None:
    """ALL, PROD, GRAY, or None outside a request (or when the caller sent none)."""
    return _flag.get()


def parse_flag(value: str | bytes | None) -> str | None:
    """A valid flag from a header value (case and spaces ignored), else None."""
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    flag = value.strip().upper()
    return flag if flag in FLAGS else None


def flag_from_baggage(value: str | bytes | None) -> str | None:
    """Our entry of a W3C `baggage` header value: `k=v;props, k2=v2`."""
    if not value:
        return None
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    for member in value.split(","):
        key, _, rest = member.partition("=")
        if key.strip() == BAGGAGE_KEY:
            return parse_flag(rest.split(";", 1)[0])
    return None


def flag_of(headers: Mapping[str, str]) -> str | None:
    """The flag a request carries: `X-Gray-Status` (what the gateway sets) wins over baggage,
    which another hop's OpenTelemetry propagation may have carried alone. `headers` must have
    lower-case names."""
    return parse_flag(headers.get(HEADER.lower())) or flag_from_baggage(headers.get(BAGGAGE_HEADER))


@contextlib.contextmanager
def use_flag(flag: str | None) -> Iterator[None]:
    """The flag of the code inside, restored on leaving (also on error)."""
    token = _flag.set(flag)
    try:
        yield
    finally:
        _flag.reset(token)


def set_flag(flag: str | None) -> contextvars.Token:
    """For callers with a start and an end hook (Celery's signals): reset with `reset_flag`."""
    return _flag.set(flag)


def reset_flag(token: contextvars.Token) -> None:
    _flag.reset(token)


def _with_baggage(existing: str | None, flag: str) -> str:
    members = [m for m in (existing or "").split(",") if m.strip()]
    members = [m for m in members if m.partition("=")[0].strip() != BAGGAGE_KEY]
    members.append(f"{BAGGAGE_KEY}={flag}")
    joined = ",".join(m.strip() for m in members)
    return joined if len(joined) <= MAX_BAGGAGE_LENGTH else f"{BAGGAGE_KEY}={flag}"


def outgoing_headers(headers: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The headers to add to an outgoing call so the flag goes on: ours, and our baggage entry
    merged into any `baggage` the call already has (other entries kept). Empty when there is
    no flag, or when the caller set `X-Gray-Status` itself (an explicit choice wins)."""
    flag = _flag.get()
    if flag is None:
        return {}
    present = {name.lower(): value for name, value in (headers or {}).items()}
    if HEADER.lower() in present:
        return {}
    return flag_headers(flag, present.get(BAGGAGE_HEADER))


def flag_headers(flag: str, baggage: str | None = None) -> dict[str, str]:
    """`X-Gray-Status: flag`, and `baggage` with our entry set to it (others kept)."""
    return {HEADER: flag, BAGGAGE_HEADER: _with_baggage(baggage, flag)}


def run_with_flag(function: Callable[P, T]) -> Callable[P, T]:
    """`function` bound to the caller's context (flag included), to run in another thread:
    `threading.Thread(target=run_with_flag(work))`."""
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

"""Answers while the database or Redis is unavailable: 503 with Retry-After when nothing was
saved, never a 500 (events.outages says which errors mean an outage).

One middleware covers every view, DRF's (whose exception handler leaves these errors to
Django), the embedded registry's and the pages: its process_exception gets what a view
raised. A write must never answer 503 for a change it saved, or a client that sends it
again applies it twice. So for a request that may write (any method but GET, HEAD, OPTIONS)
the middleware watches the SQL it runs (`execute_wrapper`): once a transaction that wrote
has committed (`transaction.on_commit`), an outage met after that is answered 200, saying
that the change was saved and to read it again, and logged as an error: views build their
answer without the database or Redis once they committed where they can, and what follows
a commit is best effort (events.after_commit), so this is a safety net. And if the COMMIT
itself got no answer (the database went away at that instant), PostgreSQL is asked, once
it answers again, whether that transaction committed: saved (200), or not (503); if it does
not answer within events.outages.COMMIT_OUTCOME_WAIT_SECONDS, 504 says that nobody knows.
"""

import functools
import logging
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from django.db import connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.http import HttpRequest, HttpResponse

from events.outages import (
    RETRY_AFTER_SECONDS,
    commit_failed_on,
    committed_after_all,
    transaction_id,
    unavailable,
    unavailable_detail,
)
from graylane.api_errors import error_response

log = logging.getLogger(__name__)

READS = ("GET", "HEAD", "OPTIONS")
WRITE_STATEMENTS = ("INSERT", "UPDATE", "DELETE", "REPLACE")
# The request's _CommitWatch, kept on the request between the middleware's two halves.
_WATCH = "_graylane_commit_watch"


class _CommitWatch:
    """An execute wrapper: whether a transaction that wrote has been committed, and, on
    PostgreSQL, the id of the transaction that writes and has not committed yet (`open`, by
    connection alias): if its COMMIT gets no answer, the database can say later whether it
    committed (txid_status).

    The change a request asks for is written by a transaction (use cases write in
    `transaction.atomic`); a statement on its own, in autocommit, is bookkeeping that is no
    part of it (a token's time of last use), and does not count."""

    def __init__(self) -> None:
        self.saved = False
        self.open: dict[str, int] = {}

    def __call__(
        self,
        execute: Callable[..., Any],
        sql: str,
        params: Any,
        many: bool,
        context: dict[str, Any],
    ) -> Any:
        result = execute(sql, params, many, context)
        if not self.saved and sql.lstrip()[:7].upper().startswith(WRITE_STATEMENTS):
            self._wrote(context["connection"])
        return result

    def _wrote(self, connection: BaseDatabaseWrapper) -> None:
        if not connection.in_atomic_block:
            return
        # Once per transaction: its commit hooks (Django's list) hold ours from the first
        # write on, and a rollback drops them.
        # (savepoint ids, function, robust): the stubs leave out `robust`, hence the index.
        if any(self._is_mark(hook[1]) for hook in connection.run_on_commit):
            return
        xid = transaction_id(connection)
        if xid is not None:
            self.open[connection.alias] = xid
        transaction.on_commit(
            functools.partial(self._committed, connection.alias), using=connection.alias
        )

    def _is_mark(self, func: Callable[[], object]) -> bool:
        return isinstance(func, functools.partial) and func.func == self._committed

    def _committed(self, alias: str) -> None:
        self.saved = True
        self.open.pop(alias, None)


class OutageMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method in READS:
            return self.get_response(request)
        watch = _CommitWatch()
        setattr(request, _WATCH, watch)
        with ExitStack() as stack:
            for alias in connections:
                stack.enter_context(connections[alias].execute_wrapper(watch))
            return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        cause = unavailable(exception)
        if cause is None:
            return None
        where = f"{request.method} {request.path}"
        watch: _CommitWatch | None = getattr(request, _WATCH, None)
        if watch is not None and watch.saved:
            log.error(
                "%s: saved, then %s was unavailable for the answer.",
                where,
                cause,
                exc_info=exception,
            )
            return _saved(request, cause)
        alias = commit_failed_on(exception)
        xid = watch.open.get(alias) if watch is not None and alias is not None else None
        if alias is not None and xid is not None:
            log.warning(
                "%s: the COMMIT got no answer (%s); asking whether it committed.",
                where,
                exception,
            )
            committed = committed_after_all(alias, xid)
            if committed:
                return _saved(request, cause)
            if committed is None:
                detail = (
                    "The database went away while the change was being committed, and is not "
                    "back: whether it was saved is unknown. Read it before you send it again."
                )
                return error_response(request, 504, {"detail": detail})
        log.warning("%s: 503, %s is unavailable (%s).", where, cause, exception)
        detail = unavailable_detail(cause, writes=watch is not None)
        response = error_response(request, 503, {"detail": detail})
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response


def _saved(request: HttpRequest, cause: str) -> HttpResponse:
    detail = f"Saved, but {cause} was unavailable for the answer: read it again."
    return error_response(request, 200, {"detail": detail})

"""Answers while the database or Redis is unavailable: 503 with Retry-After when nothing was
saved, never a 500 (events.outages says which errors mean an outage).

One middleware covers every view, DRF's (whose exception handler leaves these errors to
Django), the embedded registry's and the pages: its process_exception gets what a view
raised. A write must never answer 503 for a change it saved, or a client that sends it
again applies it twice. So for a request that may write (any method but GET, HEAD, OPTIONS)
the middleware watches the SQL it runs (`execute_wrapper`): a statement that writes counts
as saved when it is committed (at once in autocommit, else when its transaction commits:
`transaction.on_commit`). An outage met after that is answered 200, saying that the change
was saved and to read it again, and logged as an error: views build their answer without
the database or Redis once they committed, and what follows a commit is best effort
(events.after_commit), so this is a safety net.
"""

import logging
from contextlib import ExitStack

from django.db import connections, transaction

from events.outages import RETRY_AFTER_SECONDS, unavailable, unavailable_detail
from graylane.api_errors import error_response

log = logging.getLogger(__name__)

READS = ("GET", "HEAD", "OPTIONS")
WRITE_STATEMENTS = ("INSERT", "UPDATE", "DELETE", "REPLACE")


class _CommitWatch:
    """An execute wrapper: whether a statement that writes has been committed."""

    def __init__(self) -> None:
        self.saved = False

    def __call__(self, execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if not self.saved and sql.lstrip()[:7].upper().startswith(WRITE_STATEMENTS):
            connection = context["connection"]
            if connection.in_atomic_block:
                transaction.on_commit(self._committed, using=connection.alias)
            else:
                self.saved = True
        return result

    def _committed(self) -> None:
        self.saved = True


class OutageMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.method in READS:
            return self.get_response(request)
        request.commit_watch = watch = _CommitWatch()
        with ExitStack() as stack:
            for alias in connections:
                stack.enter_context(connections[alias].execute_wrapper(watch))
            return self.get_response(request)

    def process_exception(self, request, exception):
        cause = unavailable(exception)
        if cause is None:
            return None
        watch = getattr(request, "commit_watch", None)
        if watch is not None and watch.saved:
            log.error(
                "%s %s: saved, then %s was unavailable for the answer.",
                request.method,
                request.path,
                cause,
                exc_info=exception,
            )
            detail = f"Saved, but {cause} was unavailable for the answer: read it again."
            return error_response(request, 200, {"detail": detail})
        log.warning(
            "%s %s: 503, %s is unavailable (%s).", request.method, request.path, cause, exception
        )
        writes = watch is not None
        response = error_response(
            request, 503, {"detail": unavailable_detail(cause, writes=writes)}
        )
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response

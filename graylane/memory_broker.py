"""The Celery broker of the default mode (no Redis): kombu's in-memory transport, woken
when a message is queued instead of polled.

kombu's in-memory transport has no blocking read: its worker looks at the queues every
`polling_interval`. Polled every 10 ms, an idle server spent ~40 % of a core on it
(measured); polled every second, a gateway delivery would wait up to a second. Here the
worker sleeps until a message is queued in this process (the only place they can come
from: the in-memory broker is not shared between processes).
"""

import threading
from queue import Empty
from time import monotonic

from kombu.transport import memory

_queued = threading.Event()


class Channel(memory.Channel):
    def _put(self, queue, message, **kwargs):
        super()._put(queue, message, **kwargs)
        _queued.set()

    def _put_fanout(self, exchange, message, routing_key=None, **kwargs):
        super()._put_fanout(exchange, message, routing_key, **kwargs)
        _queued.set()


class Transport(memory.Transport):
    Channel = Channel
    driver_type = driver_name = "graylane-memory"

    def drain_events(self, connection, timeout=None):
        deadline = None if timeout is None else monotonic() + timeout
        while True:
            # Cleared before looking, so a message queued after the look still wakes us.
            _queued.clear()
            try:
                self.cycle.get(self._deliver, timeout=timeout)
                return
            except Empty:
                remaining = None if deadline is None else deadline - monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError() from None
                _queued.wait(remaining)

"""The default mode's broker (graylane/memory_broker.py): a queued message wakes the
worker at once, and an idle worker sleeps instead of polling."""

import threading
import time

from kombu import Connection, Exchange, Queue

from graylane.memory_broker import Transport

QUEUE = Queue("graylane-test", Exchange("graylane-test"), routing_key="graylane-test")


def test_a_message_queued_by_another_thread_wakes_the_consumer_at_once():
    received_at = []
    connection = Connection(transport=Transport)
    consumer = connection.Consumer(
        QUEUE, callbacks=[lambda *_: received_at.append(time.monotonic())]
    )
    with connection, consumer:
        producer = connection.Producer()
        published_at = []

        def publish_later():
            time.sleep(0.3)  # while the consumer waits: what a wake-up is for
            published_at.append(time.monotonic())
            producer.publish("hello", exchange=QUEUE.exchange, routing_key="graylane-test")

        threading.Thread(target=publish_later).start()
        connection.drain_events(timeout=5)
    [published], [received] = published_at, received_at
    # kombu's own in-memory transport looks every second: its next look, 0.7 s after this
    # message, would deliver it. Woken by the message, it takes a millisecond or so.
    assert 0 <= received - published < 0.5, f"woken {received - published:.3f} s after it"


def test_an_idle_consumer_sleeps_until_its_timeout():
    connection = Connection(transport=Transport)
    with connection, connection.Consumer(QUEUE, callbacks=[]):
        started_cpu, started = time.thread_time(), time.monotonic()
        try:
            connection.drain_events(timeout=0.5)
        except TimeoutError:
            pass
        else:
            raise AssertionError("nothing was queued: drain_events must time out")
        waited, cpu = time.monotonic() - started, time.thread_time() - started_cpu
    assert waited >= 0.5
    assert cpu < 0.05, f"{cpu:.3f} s of CPU while waiting: it polls"

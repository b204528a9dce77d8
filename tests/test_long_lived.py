"""The garbage collector of a server process sized for the long polls it holds
(graylane/long_lived.py): a new generation answers and renews every held poll at once, and
the youngest generation must have room for all of them, or each generation's burst of new
polls is walked by collections that free nothing (bench/fleet.py measures what it costs)."""

import asyncio
import gc

import pytest

from gateways.protocol.wakeup import GenerationWatch
from graylane import long_lived


@pytest.fixture
def thresholds():
    before = gc.get_threshold()
    gc.set_threshold(long_lived.YOUNG_COLLECTION_THRESHOLD, 7, 9)
    yield
    gc.set_threshold(*before)


def test_the_youngest_generation_grows_with_the_held_polls_and_keeps_its_size(thresholds):
    long_lived.size_for_held_polls(10)  # a few: the floor holds
    assert gc.get_threshold() == (long_lived.YOUNG_COLLECTION_THRESHOLD, 7, 9)

    long_lived.size_for_held_polls(5_000)
    young, middle, oldest = gc.get_threshold()
    per_poll = long_lived.TRACKED_PER_HELD_POLL * long_lived.HELD_POLLS_HEADROOM
    assert young == 5_000 * per_poll > long_lived.YOUNG_COLLECTION_THRESHOLD
    assert (middle, oldest) == (7, 9)  # the older generations keep their own

    # The same generation announced again (over Redis) to the polls already renewed.
    long_lived.size_for_held_polls(40)
    assert gc.get_threshold()[0] == 5_000 * per_poll


def test_a_huge_fleet_never_makes_the_youngest_generation_unbounded(thresholds):
    long_lived.size_for_held_polls(10_000_000)
    assert gc.get_threshold()[0] == long_lived.MAX_YOUNG_COLLECTION_THRESHOLD


def test_an_announcement_says_how_many_pollers_it_wakes():
    told = []

    async def scenario():
        watch = GenerationWatch()
        ticket = watch.ticket()
        waits = [asyncio.ensure_future(watch.wait(ticket, 5)) for _ in range(7)]
        await asyncio.sleep(0)  # every poll is waiting
        watch.waking = told.append
        watch.announce(None)
        await asyncio.gather(*waits)
        watch.announce(None)  # nobody waits any more

    asyncio.run(scenario())
    assert told == [7, 0]

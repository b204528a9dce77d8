"""The call batcher on its own: which calls share a trip to the database, and what each
caller gets back. The database work is a plain function here, so each trip is visible."""

import asyncio

import pytest

from gateways.protocol.call_batch import Ack, CallBatcher, Poll


class Trips:
    """Answers each call with its key, recording the batches; `gate` holds a trip open."""

    def __init__(self):
        self.batches: list[list] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def __call__(self, calls: list) -> list:
        self.batches.append([call.key for call in calls])
        await self.gate.wait()
        return [f"answer to {call.key}" for call in calls]


def run(coroutine):
    return asyncio.run(coroutine)


def test_calls_made_in_one_turn_share_one_trip():
    async def scenario():
        trips = Trips()
        batcher = CallBatcher(trips)
        answers = await asyncio.gather(*(batcher.submit(Poll(f"k{n}")) for n in range(20)))
        return trips, answers

    trips, answers = run(scenario())
    assert trips.batches == [[f"k{n}" for n in range(20)]]
    assert answers == [f"answer to k{n}" for n in range(20)]


def test_calls_arriving_during_a_trip_wait_together_for_the_next():
    async def scenario():
        trips = Trips()
        trips.gate.clear()
        batcher = CallBatcher(trips)
        first = asyncio.ensure_future(batcher.submit(Poll("first")))
        await asyncio.sleep(0)  # the first trip leaves
        later = [asyncio.ensure_future(batcher.submit(Ack(f"k{n}", "gw", 1))) for n in range(5)]
        await asyncio.sleep(0)
        assert trips.batches == [["first"]], "the later calls wait for the trip in flight"
        trips.gate.set()
        return trips, await first, await asyncio.gather(*later)

    trips, first, later = run(scenario())
    assert trips.batches == [["first"], [f"k{n}" for n in range(5)]]
    assert first == "answer to first"
    assert later == [f"answer to k{n}" for n in range(5)]


def test_a_rare_call_is_not_held_back():
    async def scenario():
        trips = Trips()
        batcher = CallBatcher(trips)
        one = await batcher.submit(Poll("a"))
        two = await batcher.submit(Poll("b"))
        return trips, one, two

    trips, one, two = run(scenario())
    assert trips.batches == [["a"], ["b"]]
    assert (one, two) == ("answer to a", "answer to b")


def test_a_failed_trip_fails_its_own_calls_only():
    calls = 0

    async def flaky(batch):
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionError("database went away")
        return [call.key for call in batch]

    async def scenario():
        batcher = CallBatcher(flaky)
        failed = await asyncio.gather(
            batcher.submit(Poll("x")), batcher.submit(Poll("y")), return_exceptions=True
        )
        return failed, await batcher.submit(Poll("z"))

    failed, after = run(scenario())
    assert all(isinstance(error, ConnectionError) for error in failed)
    assert after == "z", "the next call gets a trip of its own"


def test_a_caller_that_went_away_does_not_disturb_the_others():
    async def scenario():
        trips = Trips()
        trips.gate.clear()
        batcher = CallBatcher(trips)
        leaving = asyncio.ensure_future(batcher.submit(Poll("leaving")))
        staying = asyncio.ensure_future(batcher.submit(Poll("staying")))
        await asyncio.sleep(0)
        leaving.cancel()
        trips.gate.set()
        with pytest.raises(asyncio.CancelledError):
            await leaving
        return await staying

    assert run(scenario()) == "answer to staying"

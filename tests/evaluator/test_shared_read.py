"""evaluator.core.shared_read: one read for the callers that arrive together, each read after
its caller arrived."""

from __future__ import annotations

import asyncio
import threading

import pytest

from evaluator.core.shared_read import SharedRead


def test_concurrent_callers_share_reads_and_each_gets_its_key() -> None:
    reads: list[frozenset[int]] = []

    def read(keys: frozenset[int]) -> dict[int, int]:
        reads.append(keys)
        return {k: 10 * k for k in keys if k != 3}

    shared = SharedRead(read)

    async def callers() -> list[int | None]:
        return await asyncio.gather(*(shared.get(k % 5) for k in range(200)))

    values = asyncio.run(callers())
    assert values == [None if k % 5 == 3 else 10 * (k % 5) for k in range(200)]
    assert len(reads) <= 2  # the first caller's read, then one for everyone who came meanwhile
    assert shared.reads == len(reads)


def test_a_caller_gets_a_value_read_after_it_arrived() -> None:
    """A change committed before a call is in its answer, even while an older read is running."""
    value = [0]
    started, release = threading.Event(), threading.Event()

    def read(_keys: frozenset[None]) -> dict[None, int]:
        seen = value[0]
        if seen == 0:  # the first read stalls after reading, until the change below is made
            started.set()
            release.wait(10)
        return {None: seen}

    shared = SharedRead(read)

    async def scenario() -> tuple[int | None, int | None]:
        first = asyncio.ensure_future(shared.get(None))
        await asyncio.to_thread(started.wait, 10)
        value[0] = 1  # "commits" while the first read is in flight
        second = asyncio.ensure_future(shared.get(None))
        await asyncio.sleep(0)
        release.set()
        return await first, await second

    assert asyncio.run(scenario()) == (0, 1)


def test_the_waiters_of_a_failed_read_see_its_failure_and_the_next_read_runs() -> None:
    calls = [0]

    def read(_keys: frozenset[str]) -> dict[str, int]:
        calls[0] += 1
        if calls[0] == 1:
            raise RuntimeError("database gone")
        return {"k": 1}

    shared = SharedRead(read)

    async def scenario() -> tuple[list[object], int | None]:
        answers = await asyncio.gather(*(shared.get("k") for _ in range(3)),
                                       return_exceptions=True)  # fmt: skip
        return answers, await shared.get("k")

    answers, after = asyncio.run(scenario())
    assert isinstance(answers[0], RuntimeError)  # the first caller's read failed
    assert answers[1:] == [1, 1]  # the others arrived during it: the next read served them
    assert after == 1


def test_a_cancelled_caller_leaves_the_read_to_the_others() -> None:
    gate = threading.Event()

    def read(_keys: frozenset[None]) -> dict[None, int]:
        gate.wait(10)
        return {None: 7}

    shared = SharedRead(read)

    async def scenario() -> int | None:
        leaving = asyncio.ensure_future(shared.get(None))
        staying = asyncio.ensure_future(shared.get(None))
        await asyncio.sleep(0.01)
        leaving.cancel()
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await leaving
        return await staying

    assert asyncio.run(scenario()) == 7

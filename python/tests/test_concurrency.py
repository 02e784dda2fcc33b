"""One engine shared by threads, one file shared by processes, and the asyncio flavour."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading

import strata
import strata.aio


def test_threads_share_one_engine(engine):
    errors = []

    def chat(worker: int) -> None:
        try:
            session = engine.session(f"thread-{worker}", "coder")
            for i in range(25):
                session.append({"role": "user", "content": f"worker {worker} says {i}"})
            session.prepare_context()
            assert session.call_tool("memory_grep", {"query": f'"worker {worker} says"', "limit": 50,
                                                     "include_in_context": True})["count"] == 25
        except BaseException as error:  # noqa: BLE001 - reported below, with the worker
            errors.append((worker, error))

    threads = [threading.Thread(target=chat, args=(worker,)) for worker in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert engine.stats()["messages"] == 150


def test_the_gil_is_released_while_strata_works(folded):
    """A Python thread keeps running while another blocks in prepare_context."""
    _, session, _, _ = folded
    ticks = 0
    stop = threading.Event()

    def count() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    counter = threading.Thread(target=count)
    counter.start()
    before = ticks
    for _ in range(20):
        session.call_tool("memory_grep", {"query": "router"})
    during = ticks - before
    stop.set()
    counter.join()
    assert during > 0


def test_a_second_process_writes_the_same_file(db_path):
    with strata.Engine(db_path) as engine:
        session = engine.session("shared", "coder")
        child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
            import strata
            with strata.Engine({str(db_path)!r}) as engine:
                session = engine.session("shared", "coder")
                session.append_many([{{"role": "user", "content": f"child {{i}}"}} for i in range(200)])
                for i in range(50):
                    session.append({{"role": "assistant", "content": f"child single {{i}}"}})
        """)])
        for i in range(100):
            session.append({"role": "user", "content": f"parent {i}"})
        assert child.wait(timeout=120) == 0
        contents = [m["content"] for m in session.messages()]
        assert len(contents) == 350
        assert sum(c.startswith("child") for c in contents) == 250
        seqs = [m["seq"] for m in session.messages()]
        assert seqs == list(range(len(seqs)))


def test_asyncio_bots_await_the_same_calls(db_path):
    async def bot() -> None:
        async with strata.aio.Engine(db_path) as engine:
            session = await engine.session("async", "coder")
            await session.append({"role": "user", "content": "The release train leaves on Thursdays."})
            await session.append_many([{"role": "assistant", "content": f"noted {i}"} for i in range(10)])
            context = await session.prepare_context()
            assert context.tokens["total"] <= context.tokens["budget"]
            answers = await asyncio.gather(*[
                session.call_tool("memory_grep", {"query": "release train", "include_in_context": True})
                for _ in range(8)
            ])
            assert all(answer["count"] == 1 for answer in answers)
            assert (await session.compact())["compaction"]["nodes_created"] == 0
            assert (await engine.stats())["messages"] == 11

    asyncio.run(bot())


def test_the_event_loop_keeps_running_while_strata_works(folded):
    _, session, _, _ = folded
    aio_session = strata.aio.Session(session)

    async def main() -> int:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        ticker = asyncio.create_task(tick())
        for _ in range(10):
            await aio_session.prepare_context()
        ticker.cancel()
        return ticks

    assert asyncio.run(main()) > 10

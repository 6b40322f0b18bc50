"""Every step of a node's shutdown is bounded (finding 11: a node whose log directory went
offline hung in an unbounded close and never exited). A step whose worker thread never
returns is given up after its timeout, with a log line naming it, and reports it did not
finish (so no clean-shutdown marker is written after it)."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from odradek.broker.cluster_node import ClusterNode


def test_a_step_whose_thread_never_returns_is_given_up_and_named(
        caplog: pytest.LogCaptureFixture) -> None:
    never = threading.Event()

    async def run() -> bool:
        # _step uses nothing of the node: called unbound, as the shutdown calls it
        finished = await ClusterNode._step(None, "closing the logs",  # type: ignore[arg-type]
                                           asyncio.to_thread(never.wait), 0.2)
        never.set()  # before asyncio.run's executor shutdown, which joins the thread
        return finished

    with caplog.at_level(logging.WARNING):
        try:
            finished = asyncio.run(run())
        finally:
            never.set()  # let the worker thread end
    assert finished is False
    assert "shutdown: closing the logs did not finish" in caplog.text


def test_a_failed_step_is_logged_and_a_finished_one_reported(
        caplog: pytest.LogCaptureFixture) -> None:
    async def fails() -> None:
        raise OSError(5, "Input/output error")

    async def run() -> tuple[bool, bool]:
        bad = await ClusterNode._step(None, "closing the metadata log",  # type: ignore[arg-type]
                                      fails(), 5.0)
        good = await ClusterNode._step(None, "the quorum",  # type: ignore[arg-type]
                                       asyncio.sleep(0), 5.0)
        return bad, good

    with caplog.at_level(logging.WARNING):
        assert asyncio.run(run()) == (False, True)
    assert "shutdown: closing the metadata log failed" in caplog.text

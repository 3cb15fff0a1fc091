"""The event trigger without a server: a check that hangs or keeps failing ends in an error
event (once, not a storm), and its representation shows no checkpoint store URI."""
from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("airflow")

from airflow_provider_binlog.hooks.binlog import BinlogHook  # noqa: E402
from airflow_provider_binlog.triggers import new_data  # noqa: E402
from airflow_provider_binlog.triggers.new_data import BinlogNewDataTrigger  # noqa: E402


async def _events(trigger, seconds):
    out = []
    run = trigger.run()

    async def collect():
        async for event in run:
            out.append(event.payload)

    task = asyncio.ensure_future(collect())
    await asyncio.sleep(seconds)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return out


@pytest.fixture()
def connected(monkeypatch):
    async def connection(conn_id):
        return object()
    monkeypatch.setattr(BinlogHook, "aget_connection", staticmethod(connection))


def test_a_check_that_keeps_failing_fires_one_error_event(connected, monkeypatch):
    def fail(self, hook, now):
        raise ConnectionRefusedError("the server is down")
    monkeypatch.setattr(BinlogNewDataTrigger, "_check", fail)
    events = asyncio.run(_events(BinlogNewDataTrigger("src", poke_interval=0.05), 0.6))
    assert len(events) == 1
    assert events[0]["status"] == "error" and events[0]["error_type"] == "ConnectionRefusedError"
    assert "the server is down" in events[0]["message"]


def test_a_failure_that_clears_before_the_third_check_fires_nothing(connected, monkeypatch):
    calls = []

    def flaky(self, hook, now):
        calls.append(now)
        if len(calls) <= 2:
            raise ConnectionRefusedError("blip")
        return None
    monkeypatch.setattr(BinlogNewDataTrigger, "_check", flaky)
    assert asyncio.run(_events(BinlogNewDataTrigger("src", poke_interval=0.05), 0.5)) == []
    assert len(calls) >= 4


def test_a_check_that_hangs_counts_as_failed(connected, monkeypatch):
    monkeypatch.setattr(BinlogNewDataTrigger, "_check", lambda self, hook, now: time.sleep(0.5))
    monkeypatch.setattr(BinlogNewDataTrigger, "_check_timeout", lambda self: 0.05)
    events = asyncio.run(_events(BinlogNewDataTrigger("src", poke_interval=0.01), 1.2))
    assert [e["error_type"] for e in events] == ["TimeoutError"]


def test_the_representation_shows_no_store_uri():
    trigger = BinlogNewDataTrigger("src", checkpoint_key="k", checkpoint_store_uri="postgresql://u:pw@db/cp")
    assert "pw" not in repr(trigger) and "k" in repr(trigger)
    assert new_data.ERROR_CHECKS == 3


class _StateStore:
    """The watched asset's state store as Airflow gives it to an event trigger."""

    def __init__(self):
        self.values = {}

    async def aget(self, key, default=None):
        return self.values.get(key, default)

    async def aset(self, key, value):
        self.values[key] = value


def test_a_restarted_watcher_does_not_fire_again_for_the_checkpoint_it_fired_for(connected, monkeypatch):
    def ready(self, hook, now):
        fired = self.gate.observe(now, checkpoint="A", has_new_data=True, ready=True)
        return {"status": "new_data", "start": "A"} if fired else None
    monkeypatch.setattr(BinlogNewDataTrigger, "_check", ready)
    store = _StateStore()
    first = BinlogNewDataTrigger("src", poke_interval=0.05, min_interval=0)
    first.asset_state_store = store
    assert len(asyncio.run(_events(first, 0.3))) == 1
    assert store.values[new_data.GATE_STATE_KEY]["fired_for"] == "A"
    restarted = BinlogNewDataTrigger("src", poke_interval=0.05, min_interval=0)
    restarted.asset_state_store = store
    assert asyncio.run(_events(restarted, 0.3)) == []
    afresh = BinlogNewDataTrigger("src", poke_interval=0.05, min_interval=0)  # no state kept: fires
    assert len(asyncio.run(_events(afresh, 0.3))) == 1

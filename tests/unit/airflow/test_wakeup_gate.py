"""The event trigger's decisions, without a server: one event per checkpoint, none closer than
``min_interval``, repeated after ``refire_after``, thresholds waived after ``max_threshold_wait``."""
from __future__ import annotations

import pytest

pytest.importorskip("airflow")

from airflow_provider_binlog.triggers.new_data import WakeupGate  # noqa: E402


def test_one_event_per_checkpoint_however_many_checks_find_the_same_new_data():
    gate = WakeupGate(min_interval=0, refire_after=600)
    fired = [gate.observe(t, checkpoint="A", has_new_data=True, ready=True) for t in range(0, 300, 5)]
    assert fired.count(True) == 1 and fired[0] is True


def test_the_next_event_comes_when_a_run_has_advanced_the_checkpoint():
    gate = WakeupGate(min_interval=10, refire_after=600)
    assert gate.observe(0, checkpoint="A", has_new_data=True, ready=True)
    assert not gate.observe(5, checkpoint="B", has_new_data=True, ready=True)  # too soon after the last
    assert gate.observe(10, checkpoint="B", has_new_data=True, ready=True)
    assert not gate.observe(20, checkpoint="B", has_new_data=True, ready=True)


def test_an_unchanged_checkpoint_fires_again_after_refire_after():
    gate = WakeupGate(min_interval=0, refire_after=60)
    assert gate.observe(0, checkpoint="A", has_new_data=True, ready=True)
    assert not gate.observe(59, checkpoint="A", has_new_data=True, ready=True)
    assert gate.observe(60, checkpoint="A", has_new_data=True, ready=True)


def test_nothing_fires_without_new_data_or_below_the_thresholds():
    gate = WakeupGate(min_interval=0)
    assert not gate.observe(0, checkpoint="A", has_new_data=False, ready=False)
    assert not gate.observe(1, checkpoint="A", has_new_data=True, ready=False)
    assert gate.fired_at is None


def test_thresholds_are_waived_once_new_data_has_waited_max_threshold_wait():
    gate = WakeupGate(min_interval=0, max_threshold_wait=30)
    assert not gate.thresholds_waived(0)
    gate.observe(0, checkpoint="A", has_new_data=True, ready=False)
    assert not gate.thresholds_waived(29)
    assert gate.thresholds_waived(30)
    gate.observe(31, checkpoint="A", has_new_data=False, ready=False)  # the data went (a run loaded it)
    assert not gate.thresholds_waived(100)
    assert gate.observe(100, checkpoint="A", has_new_data=True, ready=True)
    assert not gate.thresholds_waived(1000)  # after an event the wait starts again


@pytest.mark.parametrize("name, value", [("min_interval", -1), ("refire_after", "x"), ("max_threshold_wait", True)])
def test_bad_settings_are_refused(name, value):
    with pytest.raises(ValueError, match=name):
        WakeupGate(**{name: value})

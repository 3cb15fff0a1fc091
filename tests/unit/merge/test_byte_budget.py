import threading
import time

import pytest

from airflow_provider_binlog.merge.byte_budget import ByteBudget


def test_a_hold_takes_its_bytes_and_gives_them_back_after_the_block():
    budget = ByteBudget(100)
    with budget.hold(30) as held:
        assert held == 30 and budget.free == 70
    assert budget.free == 100


def test_a_hold_larger_than_the_capacity_takes_the_whole_budget():
    budget = ByteBudget(100)
    with budget.hold(500) as held:
        assert held == 100 and budget.free == 0
    assert budget.free == 100


def test_a_hold_waits_while_other_holds_leave_too_few_bytes_free():
    budget = ByteBudget(100)
    order = []
    first_in = threading.Event()
    release = threading.Event()

    def first():
        with budget.hold(80):
            order.append("first in")
            first_in.set()
            release.wait(5)
            order.append("first out")

    def second():
        first_in.wait(5)
        with budget.hold(40):
            order.append("second in")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    first_in.wait(5)
    time.sleep(0.2)  # the second hold is waiting now, not running
    assert order == ["first in"]
    release.set()
    for t in threads:
        t.join(5)
    assert order == ["first in", "first out", "second in"]
    assert budget.free == 100


def test_holds_that_fit_together_run_at_once():
    budget = ByteBudget(100)
    with budget.hold(50), budget.hold(50):
        assert budget.free == 0


def test_a_budget_without_bytes_is_refused():
    with pytest.raises(ValueError, match="positive capacity"):
        ByteBudget(0)

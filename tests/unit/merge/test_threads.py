"""Tables worked on from several driver threads (merge.spark.threads.each_table), without a
Spark session: results keep the order of the tables, the first failure is raised after the
running calls finish, and calls not started by then are not made."""
import threading
import time

import pytest

pytest.importorskip("pyspark")

from airflow_provider_binlog.merge.lake.threads import each_table  # noqa: E402


def test_results_keep_the_order_of_the_items_and_calls_overlap():
    running, most = [0], [0]
    lock = threading.Lock()

    def work(i):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.02 * (5 - i % 5))  # later items finish first
        with lock:
            running[0] -= 1
        return i * i

    assert each_table(work, list(range(10)), 4) == [i * i for i in range(10)]
    assert most[0] == 4


def test_one_thread_is_one_call_after_the_other_in_the_callers_thread():
    threads = []
    assert each_table(lambda i: threads.append(threading.current_thread()) or i, [3, 1, 2], 1) == [3, 1, 2]
    assert threads == [threading.current_thread()] * 3


def test_the_first_failure_is_raised_and_calls_not_started_are_not_made():
    started = []
    release, one_started = threading.Event(), threading.Event()

    def work(i):
        started.append(i)
        if i == 1:
            one_started.set()
        if i == 0:
            one_started.wait(5)
            raise RuntimeError("table 0 failed")
        if i == 1:
            release.wait(5)  # still running when 0 fails: finishes, its result is dropped
        return i

    def fail_then_release(i):
        try:
            return work(i)
        finally:
            if i == 0:
                release.set()

    with pytest.raises(RuntimeError, match="table 0 failed"):
        each_table(fail_then_release, list(range(50)), 2)
    assert sorted(started) == [0, 1]


def test_a_failure_in_a_later_item_is_raised_too():
    with pytest.raises(ValueError, match="7"):
        each_table(lambda i: (_ for _ in ()).throw(ValueError(str(i))) if i == 7 else i, list(range(8)), 3)

"""Statement deadlines (ehrbench.statement_deadline): one watchdog thread interrupts what runs past its time."""

import os
import threading
import time

import duckdb
import pytest

from ehrbench.statement_deadline import interrupt_after, interrupted_after

ENDLESS = "select count(*) from range(1_000_000_000_000) t(i) where i % 7 = 3"


def test_a_duckdb_statement_past_its_deadline_is_interrupted_and_the_deadline_says_so():
    con = duckdb.connect()
    started = time.monotonic()
    with interrupted_after(0.2, con.interrupt) as deadline, pytest.raises(duckdb.InterruptException):
        con.execute(ENDLESS).fetchall()
    assert deadline.fired
    assert time.monotonic() - started < 10
    assert con.execute("select 42").fetchall() == [(42,)]  # the connection runs the next statement


def test_a_statement_that_ends_in_time_is_never_interrupted():
    calls = []
    with interrupted_after(0.05, lambda: calls.append("interrupted")) as deadline:
        pass
    time.sleep(0.3)
    assert calls == [] and not deadline.fired


def test_an_earlier_deadline_added_after_a_later_one_still_fires_on_time():
    fired = threading.Event()
    later = interrupt_after(60, lambda: None)
    started = time.monotonic()
    interrupt_after(0.1, fired.set)
    assert fired.wait(5)
    assert time.monotonic() - started < 2
    later.cancel()


def test_deadlines_fire_in_time_order():
    order = []
    for delay in (0.3, 0.1, 0.2):
        interrupt_after(delay, lambda delay=delay: order.append(delay))
    time.sleep(1.0)
    assert order == [0.1, 0.2, 0.3]


def test_a_thousand_statements_start_no_thread_each():
    interrupt_after(0, lambda: None)  # the watchdog exists
    threads = threading.active_count()
    for _ in range(1000):
        interrupted = interrupt_after(30, lambda: None)
        interrupted.cancel()
    assert threading.active_count() <= threads  # a Timer per statement would have left 1,000 threads waiting


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
def test_a_forked_child_gets_a_watchdog_of_its_own():
    interrupt_after(0, lambda: None)  # the parent's watchdog runs
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if its own deadline fired
        fired = threading.Event()
        interrupt_after(0.05, fired.set)
        os._exit(0 if fired.wait(5) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0

"""The window thread converts windows in order, one at a time, and the program waits only for the
window before the one it hands over."""

from __future__ import annotations

import threading
import time

from tracer.window_thread import WindowThread


def test_windows_convert_in_order_off_the_submitting_thread() -> None:
    seen: list[tuple[int, str]] = []
    waits: list[int] = []
    worker = WindowThread(lambda window: seen.append((window, threading.current_thread().name)), waits.append)
    for window in range(50):
        worker.submit(window)
    worker.end()
    assert [window for window, _ in seen] == list(range(50))
    assert {name for _, name in seen} == {"dfcompass-windows"}
    assert worker.converted == 50 and worker.in_flight == 0


def test_the_next_window_waits_for_the_one_before_and_the_wait_is_counted() -> None:
    started = threading.Event()
    release = threading.Event()
    order: list[str] = []

    def convert(window: str) -> None:
        order.append(f"begin {window}")
        started.set()
        release.wait(5)
        order.append(f"end {window}")

    waits: list[int] = []
    worker = WindowThread(convert, waits.append)
    worker.submit("a")
    started.wait(5)
    assert worker.in_flight == 1
    threading.Timer(0.2, release.set).start()
    before = time.perf_counter()
    worker.submit("b")  # blocks until "a" is written
    assert time.perf_counter() - before >= 0.15
    assert order[:2] == ["begin a", "end a"]
    assert waits and waits[0] >= 150_000_000
    worker.end()
    assert order == ["begin a", "end a", "begin b", "end b"]


def test_end_writes_the_window_handed_over_then_stops() -> None:
    done: list[int] = []
    worker = WindowThread(lambda window: (time.sleep(0.05), done.append(window)), lambda ns: None)
    worker.submit(1)
    worker.end()
    assert done == [1]
    assert not worker._thread.is_alive()

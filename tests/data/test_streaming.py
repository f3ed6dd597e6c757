"""`ahead` works on items on background threads and gives them back in order, failures at their item."""

import threading
import time

import pytest

from seqjax.data.tokenizers.streaming import ahead


def test_results_come_in_order_worked_on_other_threads():
    threads = set()

    def work(n):
        threads.add(threading.current_thread().name)
        time.sleep(0.01 * (n % 3))  # later items may finish first
        return n * n

    assert list(ahead(range(20), work, workers=3)) == [(n, n * n) for n in range(20)]
    assert threads and threading.current_thread().name not in threads


def test_a_failure_of_work_or_of_the_items_is_raised_at_its_item():
    def work(n):
        if n == 5:
            raise ValueError("bad item 5")
        return n

    got = []
    with pytest.raises(ValueError, match="bad item 5"):
        for item, _ in ahead(range(10), work):
            got.append(item)
    assert got == [0, 1, 2, 3, 4]

    def items():
        yield from range(3)
        raise ValueError("unreadable")

    got = []
    with pytest.raises(ValueError, match="unreadable"):
        for item, _ in ahead(items(), lambda n: n):
            got.append(item)
    assert got in ([0], [0, 1], [0, 1, 2])

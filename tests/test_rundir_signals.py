"""A step commits whole: SIGTERM during the metrics-line-and-checkpoint block is held until it ends.

The signal is sent the way a user's ``kill`` or a scheduler sends it (to the process, with other threads
alive), which is what broke the earlier ``pthread_sigmask`` version: the kernel handed the signal to a
thread that did not mask it and Python ran the handler inside the block.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from wmrl_adapters.train.run.rundir import _signals_deferred


@pytest.fixture
def sigterm_interrupts():
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    yield
    signal.signal(signal.SIGTERM, previous)


def test_a_sigterm_from_another_thread_waits_for_the_block_to_end(sigterm_interrupts) -> None:
    sent = threading.Event()

    def kill_soon() -> None:
        time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)
        sent.set()

    steps_inside = 0
    with pytest.raises(KeyboardInterrupt):
        with _signals_deferred(True):
            killer = threading.Thread(target=kill_soon)
            killer.start()
            assert sent.wait(5), "the signal was sent"
            for _ in range(200_000):  # bytecode boundaries at which a handler would run
                steps_inside += 1
            killer.join()
        pytest.fail("the held SIGTERM was not raised again once the block ended")
    assert steps_inside == 200_000, "the block ran to its end before the interrupt"


def test_without_a_signal_the_block_changes_nothing(sigterm_interrupts) -> None:
    with _signals_deferred(True):
        value = 1
    assert value == 1 and signal.getsignal(signal.SIGTERM) is signal.default_int_handler

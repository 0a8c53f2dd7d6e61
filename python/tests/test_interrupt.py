"""A call that waits for another rank gives up the GIL and does not shut out Ctrl-C: a Python
program stuck in a barrier that never completes keeps its other threads running, and stops
with KeyboardInterrupt at SIGINT."""

import select
import signal
import subprocess
import sys
import textwrap

from conftest import RANK_TIMEOUT, unique

WAITER = textwrap.dedent(
    """
    import sys, threading, time
    import onesided
    session = onesided.Session.attach(sys.argv[1], sys.argv[2])
    calling = threading.Event()

    def tick():
        calling.wait()
        for _ in range(20):
            time.sleep(0.01)  # each tick needs the GIL back: the barrier must not hold it
        print("waiting", flush=True)

    threading.Thread(target=tick, daemon=True).start()
    try:
        calling.set()
        session.barrier()  # rank 1 never comes
        print("the barrier passed", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    """
)


def line_within(pipe, seconds):
    """The next line of ``pipe``, or None when none comes within ``seconds``."""
    ready, _, _ = select.select([pipe], [], [], seconds)
    return pipe.readline() if ready else None


def test_ctrl_c_interrupts_a_call_that_waits(server, admin):
    world = admin.create_world(unique("interrupt"), 2)
    waiter = subprocess.Popen(
        [sys.executable, "-c", WAITER, server.url, world.tokens[0]],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # the ticking thread can only say this if the barrier gave up the GIL
        assert line_within(waiter.stdout, RANK_TIMEOUT) == "waiting\n"
        waiter.send_signal(signal.SIGINT)
        out, err = waiter.communicate(timeout=RANK_TIMEOUT)
    finally:
        waiter.kill()
    assert out == "interrupted\n", err
    assert waiter.returncode == 0, err

"""A training process that dies with the worker that started it, at once rather than at its next step end."""

import os
import signal
import sys
import threading
import time


def watch_parent(parent: int, *, every_s: float = 1.0) -> threading.Thread:
    """Kill this process and everything it started (its process group: sandbox helpers too) as soon as
    ``parent`` (the worker's job runner) is gone. JobControl abandons the run at the next step end, but a
    step can run for minutes (agent episodes, a GPU's long generations): meanwhile the reaper requeues the
    job, and a new attempt would share the device with this one."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        print(
            "the worker that started this training process is gone: stopping now", file=sys.stderr, flush=True
        )
        if os.getpgrp() == os.getpid():  # the job runner starts it in a session of its own
            os.killpg(os.getpgrp(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    thread = threading.Thread(target=watch, name="anneal-parent-watch", daemon=True)
    thread.start()
    return thread

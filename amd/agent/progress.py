"""A run's progress: a bar on a terminal; in a log (a workflow job's), a line when the run starts, when a task
finishes, and at least every `every_s` seconds while tasks are in flight, so a long task still shows its steps."""

import logging
import sys
import threading
import time

from tqdm import tqdm

log = logging.getLogger("amd.run")

PROGRESS_EVERY_S = 60.0  # a log's heartbeat: the longest a running job's log stays silent


class Progress:
    """Counts tasks and steps of one run and shows them: a tqdm bar where stderr is a terminal, else log lines."""

    def __init__(self, total: int, skipped: int, show: bool = True, every_s: float = PROGRESS_EVERY_S):
        self.total, self.done, self.failed, self.in_flight, self.steps = total, skipped, 0, 0, 0
        self._started = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        terminal = show and sys.stderr.isatty()
        self._bar = tqdm(total=total, initial=skipped, desc="tasks", unit="task", file=sys.stderr,
                         dynamic_ncols=True, disable=not terminal)
        self._lines = show and not terminal
        self._ticker: threading.Thread | None = None
        if self._lines:
            log.info("progress: %d tasks, %d already finished, %d to run", total, skipped, total - skipped)
            self._ticker = threading.Thread(target=self._tick, args=(every_s,), name="amd-progress", daemon=True)
            self._ticker.start()

    def step(self) -> None:
        """One model step taken, in any task."""
        with self._lock:
            self.steps += 1

    def tasks(self, finished: int, failed: int, in_flight: int) -> None:
        """`finished` tasks ended (of them `failed` crashed, unwritten); `in_flight` are running now."""
        with self._lock:
            self.done += finished - failed
            self.failed += failed
            self.in_flight = in_flight
        if finished:
            self._bar.update(finished)
        self._bar.set_postfix(done=self.done, failed=self.failed, in_flight=in_flight, steps=self.steps)
        if finished and self._lines:
            self._line()

    def close(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        self._bar.close()

    def _tick(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            self._line()

    def _line(self) -> None:
        with self._lock:
            done, failed, in_flight, steps = self.done, self.failed, self.in_flight, self.steps
        minutes, seconds = divmod(int(time.monotonic() - self._started), 60)
        log.info("progress: %d of %d tasks done, %d failed, %d in flight; %d steps this run; %d min %02d s elapsed",
                 done, self.total, failed, in_flight, steps, minutes, seconds)

"""Ctrl-C as one line: ``interrupted in epoch N; last complete checkpoint: epoch M (...); resume with: ...``.

The first SIGINT becomes a KeyboardInterrupt as usual, so the loop still finishes the checkpoint in
flight and closes the archive (train.loop.epoch_loop.HelixRun.train); from that moment the process's
stdout and stderr (file descriptors 1 and 2: Python's tracebacks, vLLM's and its threads', the
teardown's) go to the run's library.log, and only the stop line reaches the terminal. The handler
then puts SIGINT back to the system default, so a second Ctrl-C ends the process at once (the
checkpoint being renamed into place is either complete or absent, never half there).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Callable


class InterruptGuard:
    def __init__(self, log_path: Callable[[], Path | None]):
        """``log_path``: where the output after Ctrl-C goes (the run's library.log), None while there
        is no run directory yet (then it is discarded)."""
        self.log_path = log_path
        self.terminal: int | None = None  # a copy of the original stderr, for the one line
        self._saved: tuple[int, int] | None = None
        self._previous = None

    def __enter__(self) -> InterruptGuard:
        try:
            self._previous = signal.signal(signal.SIGINT, self._first)
        except ValueError:  # not the main thread: leave Python's default
            self._previous = None
        return self

    def _first(self, signum, frame) -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # a second Ctrl-C: the process ends at once
        self.divert()
        raise KeyboardInterrupt

    def divert(self) -> None:
        """From now on fds 1 and 2 write to the log (or nowhere); ``say`` still reaches the terminal."""
        if self._saved is not None:
            return
        with_log = self.log_path()
        sys.stdout.flush()
        sys.stderr.flush()
        self._saved = os.dup(1), os.dup(2)
        self.terminal = self._saved[1]
        target = os.devnull
        if with_log is not None and with_log.parent.is_dir():
            target = str(with_log)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)

    def say(self, line: str) -> None:
        """One line on the terminal's stderr, past the diversion (and below a progress bar's last state)."""
        fd = self.terminal if self.terminal is not None else 2
        lead = "\r\033[K" if os.isatty(fd) else ""
        os.write(fd, f"{lead}{line}\n".encode())

    def restore(self) -> None:
        """Undo the diversion and the handler (callers that go on in this process: tests)."""
        if self._saved is not None:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(self._saved[0], 1)
            os.dup2(self._saved[1], 2)
            for fd in self._saved:
                os.close(fd)
            self._saved, self.terminal = None, None
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def __exit__(self, *exc) -> None:
        """The diversion stays for the command line's exit (see ``restore``); the handler is put back."""
        if self._previous is not None and self._saved is None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

"""Give the C allocator's free pages back to the system between a run's phases.

On Linux, glibc keeps what torch frees on the CPU in its heaps when the block was below its mmap
threshold (which rises to 32 MB once a large block has been freed), so a long CPU run's resident
size creeps up phase after phase (the warm start's optimizer, then every GRPO step) although no
tensor holds that memory. ``malloc_trim(0)`` hands those free pages back; it changes no value.
Where the C library is not glibc (macOS, musl) there is nothing to call and nothing is done.

Between phases is not enough on a CPU: inside one GRPO step or warm-start fine-tune, each layer's 1-11 MB
temporaries land in heap holes too small for the next layer's, so the heap grows by each layer's
temporaries while the live tensors stay near 1 GB (BENCHMARKS.md "Memory"). ``releasing_free_memory``
runs ``malloc_trim(0)`` on a background thread every second (``run.release_memory_every_s``) while a run works, which keeps the
resident set near what tensors hold at a few percent of step time; a fixed mmap threshold does the
same at 35-75%."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import threading
from typing import Iterator


@functools.cache
def _glibc():
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") else None


def release_free_memory() -> bool:
    """True when free pages went back to the system (glibc's ``malloc_trim``); False otherwise."""
    libc = _glibc()
    return bool(libc is not None and libc.malloc_trim(0))


@contextlib.contextmanager
def releasing_free_memory(every_s: float) -> Iterator[bool]:
    """While the block runs, hand free heap pages back every ``every_s`` seconds from a daemon thread
    (ctypes drops the GIL for the call, so the run's own thread keeps working). Yields whether the
    thread runs: not where ``every_s`` is 0 or the C library is not glibc."""
    if every_s <= 0 or _glibc() is None:
        yield False
        return
    stop = threading.Event()

    def release_until_stopped() -> None:
        while not stop.wait(every_s):
            release_free_memory()

    thread = threading.Thread(target=release_until_stopped, name="helix-release-free-memory", daemon=True)
    thread.start()
    try:
        yield True
    finally:
        stop.set()
        thread.join()

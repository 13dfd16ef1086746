"""Give the C allocator's free pages back to the system between a run's phases.

On Linux, glibc keeps what torch frees on the CPU in its heaps when the block was below its mmap
threshold (which rises to 32 MB once a large block has been freed), so a long CPU run's resident
size creeps up phase after phase (the warm start's optimizer, then every GRPO step) although no
tensor holds that memory. ``malloc_trim(0)`` hands those free pages back; it changes no value.
Where the C library is not glibc (macOS, musl) there is nothing to call and nothing is done."""

from __future__ import annotations

import ctypes
import functools


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

"""train.learner.memory: free heap pages go back to the system, and values are untouched."""

import subprocess
import sys
import textwrap

import pytest

from train.learner.memory import _glibc

# In a fresh interpreter: a freed 64 MB block raises glibc's mmap threshold, so the next 4 MB blocks come from
# the heap; all but the last are freed (the last pins the heap's top, so free() alone cannot shrink it).
PROGRAM = textwrap.dedent("""
    import sys
    from train.learner.memory import release_free_memory

    def rss_mb():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096 / 2**20

    big = bytearray(64 * 2**20); del big
    blocks = [bytearray(b"x" * (4 * 2**20)) for _ in range(100)]
    keep = blocks[-1]
    del blocks
    before = rss_mb()
    released = release_free_memory()
    after = rss_mb()
    assert keep[:3] == b"xxx" and len(keep) == 4 * 2**20   # what is still held is untouched
    print(released, round(before), round(after))
""")


@pytest.mark.skipif(_glibc() is None, reason="glibc's malloc_trim only")
def test_freed_heap_pages_go_back_to_the_system():
    out = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, check=True).stdout.split()
    released, before, after = out[0] == "True", float(out[1]), float(out[2])
    assert before > after + 300, (before, after)  # ~396 MB freed but still resident before the call
    assert released


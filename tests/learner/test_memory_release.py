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
    from train.learner.memory import release_free_memory, releasing_free_memory

    def rss_mb():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096 / 2**20

    big = bytearray(64 * 2**20); del big
    blocks = [bytearray(b"x" * (4 * 2**20)) for _ in range(100)]
    keep = blocks[-1]
    del blocks
    before = rss_mb()
    released = RELEASE()
    after = rss_mb()
    assert keep[:3] == b"xxx" and len(keep) == 4 * 2**20   # what is still held is untouched
    print(released, round(before), round(after))
""")


# releasing_free_memory(every_s): nothing is called by hand; the run's thread sleeps while the background one works.
PERIODIC = textwrap.dedent("""
    def RELEASE():
        import threading, time
        with releasing_free_memory(EVERY) as running:
            time.sleep(0.6)
            names = [t.name for t in threading.enumerate()]
        assert running == (EVERY > 0) and ("helix-release-free-memory" in names) == running, names
        assert "helix-release-free-memory" not in [t.name for t in threading.enumerate()]  # stopped on exit
        return running
""")


def _run(release: str) -> tuple[bool, float, float]:
    program = PROGRAM.replace("released = RELEASE()", release + "\nreleased = RELEASE()")
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True).stdout.split()
    return out[0] == "True", float(out[1]), float(out[2])


@pytest.mark.skipif(_glibc() is None, reason="glibc's malloc_trim only")
def test_freed_heap_pages_go_back_to_the_system():
    released, before, after = _run("RELEASE = release_free_memory")
    assert before > after + 300, (before, after)  # ~396 MB freed but still resident before the call
    assert released


@pytest.mark.skipif(_glibc() is None, reason="glibc's malloc_trim only")
def test_a_background_thread_hands_freed_pages_back_while_the_run_works():
    released, before, after = _run("EVERY = 0.1" + PERIODIC)
    assert released and before > after + 300, (before, after)


@pytest.mark.skipif(_glibc() is None, reason="glibc's malloc_trim only")
def test_every_s_zero_starts_no_thread_and_releases_nothing():
    released, before, after = _run("EVERY = 0" + PERIODIC)
    assert not released and after > before - 50, (before, after)


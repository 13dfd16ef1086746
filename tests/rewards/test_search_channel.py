"""rewards.search_channel without a sandbox: what a construction may be, the sealed input, and the report pipe's
framing (only the last complete frame is kept; a flood is bounded; a broken frame breaks the channel)."""

import errno
import json
import os
import struct
import threading
import time

import pytest

from rewards import search_channel as sc

PACKING = {"centers": [[0.25, 0.25], [0.75, 0.75]], "radii": [0.25, 0.25]}


def frame(value) -> bytes:
    data = json.dumps(value).encode()
    return struct.pack("<I", len(data)) + data


def test_the_budget_is_80_percent_of_the_limit_less_half_a_second():
    assert sc.search_budget(10) == 7.5 and sc.search_budget(60) == 47.5 and sc.search_budget(20.0) == 15.5
    assert sc.search_budget(0.5) == 0.0  # never negative


def test_a_construction_is_compact_strict_json_within_the_bound():
    assert sc.construction_text(PACKING) == '{"centers":[[0.25,0.25],[0.75,0.75]],"radii":[0.25,0.25]}'
    assert json.loads(sc.construction_text([0.1, 1e-300, 2**60])) == [0.1, 1e-300, 2**60]  # exact round trip
    with pytest.raises(ValueError, match=r"holds NaN or infinity \(at \[\"radii\"\]\[1\]\)"):
        sc.construction_text({"centers": [], "radii": [0.1, float("inf")]})
    with pytest.raises(ValueError, match=r"at \[2\]\[0\]"):
        sc.construction_text([1, 2, [float("nan")]])
    big = [0.123456789] * (sc.MAX_CONSTRUCTION_BYTES // 11 + 1)  # each "0.123456789," is 12 bytes
    with pytest.raises(ValueError, match=r"is 1,\d{3},\d{3} bytes as JSON, over the 1,048,576 bytes"):
        sc.construction_text(big)
    with pytest.raises(ValueError, match="is not JSON data"):
        sc.construction_text({"x": {1, 2}})


def test_the_same_construction_ignores_key_order_only():
    assert sc.same_construction({"a": [1, 2.5], "b": None}, {"b": None, "a": [1, 2.5]})
    assert not sc.same_construction({"a": [1, 2.5]}, {"a": [1, 2.500001]})
    assert not sc.same_construction([1, 2], [2, 1])


def test_the_input_is_sealed_memory_nobody_can_write_or_grow():
    fd = sc.input_fd(PACKING, 7.5, 12345)
    try:
        data = os.pread(fd, 1 << 20, 0)
        assert json.loads(data) == {"budget_s": 7.5, "seed": 12345, "max_report_bytes": sc.MAX_CONSTRUCTION_BYTES,
                                    "construction": PACKING}
        for attempt in (lambda: os.write(fd, b"x"), lambda: os.pwrite(fd, b"{", 0), lambda: os.ftruncate(fd, 0),
                        lambda: os.ftruncate(fd, 10 << 20)):
            with pytest.raises(PermissionError):
                attempt()
        # a fresh writable description of the same memory (what /proc/self/fd/N gives a program) writes nothing either
        again = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY)
        try:
            with pytest.raises(PermissionError):
                os.write(again, b"{}")
        finally:
            os.close(again)
        assert os.pread(fd, 1 << 20, 0) == data
    finally:
        os.close(fd)


def test_an_input_that_may_not_be_handed_in_is_refused_before_anything_starts():
    with pytest.raises(ValueError, match="NaN or infinity"):
        sc.input_fd([float("nan")], 1.0, 0)
    with pytest.raises(ValueError, match="budget_s must be a finite number >= 0"):
        sc.input_fd(None, float("inf"), 0)
    with pytest.raises(ValueError, match="seed must be an int"):
        sc.input_fd(None, 1.0, True)
    assert json.loads(os.pread(fd := sc.input_fd(None, 0.0, 0), 200, 0))["construction"] is None
    os.close(fd)


def test_only_the_last_complete_report_is_kept_and_decoded():
    reports, write_end = sc.open_reports()
    try:
        data = b"".join(frame({"k": k}) for k in range(1000)) + frame({"k": "last"})[:-3]  # the last is cut short
        os.write(write_end, data[:30000])
        reports.read()
        os.write(write_end, data[30000:])
        os.close(write_end)
        reports.drain()
        assert reports.count == 1000 and reports.value() == {"k": 999} and not reports.open
        assert len(reports.last) == len(json.dumps({"k": 999}))
    finally:
        reports.close()


def test_a_flood_of_reports_costs_a_bounded_buffer_and_never_blocks_the_reader():
    reports, write_end = sc.open_reports()
    one = frame([0.5] * 1000)  # 6 KB a report
    stop = threading.Event()

    def flood():
        with open(write_end, "wb", buffering=0) as pipe:
            while not stop.is_set():
                try:
                    pipe.write(one * 20)
                except BrokenPipeError:
                    return

    writer = threading.Thread(target=flood)
    writer.start()
    try:
        peak, deadline = 0, time.monotonic() + 30
        while reports.count < 500 and time.monotonic() < deadline:
            reports.read()  # returns at once when the pipe is empty: it never waits for a frame
            peak = max(peak, len(reports._buf))
        assert reports.count >= 500 and reports.value() == [0.5] * 1000
        assert peak < len(one) + sc.CHUNK  # at most one partial frame and one read are ever held
    finally:
        stop.set()
        reports.close()
        writer.join()


@pytest.mark.parametrize("payload, why", [
    (b"[1, 2", "report 1 is not valid JSON"),
    (b"[NaN]", "NaN is not a number a construction may hold"),
    (b"[1e999]", "the number 1e999 is out of range"),
    (b"\xff\xfe", "not valid JSON"),
    (b"[" * 100000 + b"]" * 100000, "not valid JSON"),  # nesting deeper than the parser goes: refused, no crash
])
def test_a_last_report_that_is_not_strict_json_is_refused_in_one_line(payload, why):
    reports, write_end = sc.open_reports()

    def write():  # from a thread: the deep nesting is larger than a pipe holds
        os.write(write_end, struct.pack("<I", len(payload)) + payload)
        os.close(write_end)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        while reports.open:
            reports.read()
        writer.join()
        assert reports.count == 1
        with pytest.raises(ValueError, match=why) as info:
            reports.value()
        assert "\n" not in str(info.value) and len(str(info.value)) < 200
    finally:
        reports.close()


def test_a_frame_over_the_bound_breaks_the_channel_and_the_writer_gets_epipe():
    reports, write_end = sc.open_reports(limit=1000)
    try:
        os.write(write_end, frame([1, 2]) + struct.pack("<I", 1001) + b"x" * 10)
        reports.read()
        assert reports.failure == "report 2 is 1,001 bytes long, over the 1,000 bytes a construction may hold"
        assert not reports.open and reports.count == 1
        with pytest.raises(ValueError, match="report 2 is 1,001 bytes long"):
            reports.value()
        with pytest.raises(OSError) as info:  # nothing reads any more: the program's next write fails, not blocks
            os.write(write_end, frame([3]))
        assert info.value.errno == errno.EPIPE
    finally:
        os.close(write_end)
        reports.close()

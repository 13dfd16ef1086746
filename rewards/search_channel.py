"""The trusted end of a search-form run (task.yaml ``form: search``, tasks/base.py): the construction
goes in as data, and anytime reports come back over a bounded channel of their own.

A search-form program is called ``entry(construction, budget_s, seed)`` and returns an improved
construction; it may call ``report(construction)`` while it runs, so that a search stopped by the
time limit still hands on the best it found. Both directions cross the trust boundary:

* In: the parent's construction, the budget and the seed, as one strict JSON object (``SearchCall``),
  at most MAX_CONSTRUCTION_BYTES of construction, refused here before anything starts. It lives in a
  sealed memfd (no path, no write, no resize: ``F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK``) that the
  runner reads and closes before the program's first line (rewards/child_runner.py). The program gets
  a copy of the data and nothing else: no other lineage's construction, nothing of the archive, and
  nothing it writes can reach the trainer, which keeps its own copy.
* Out: each ``report`` is a frame (4-byte little-endian length, then UTF-8 JSON, as rewards/channel.py's)
  on a pipe of its own. ``Reports`` reads it without blocking inside the sandbox's supervise loop and keeps
  only the last complete frame, as bytes: a flood of reports costs the trainer one read of each byte and at
  most two frames of memory, and is never parsed. Only when the time limit stopped the program is that last
  frame decoded, by ``json`` alone with NaN and infinities refused, and only then verified (by the task's
  verifier, in the trainer, from scratch: a program's claim about its score is never read). A frame over
  MAX_CONSTRUCTION_BYTES breaks the channel (the child's ``report`` refuses such a value itself, so only a
  program writing raw bytes gets there); a frame cut short by the kill is not complete and does not count.

Why a memfd and not a file in the sandbox's folder: a file there can be reopened for writing by a
program with the evaluator's uid wherever the jail is off; sealed memory cannot be written by anyone.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import struct

MAX_CONSTRUCTION_BYTES = 1 << 20  # one construction as JSON: handed in, reported, returned, archived
BUDGET_FRACTION = 0.8  # of the time limit, the share a program is told it may spend ...
BUDGET_MARGIN_S = 0.5  # ... less this, for starting the interpreter and returning the result
# The budget a check gives a program (helix check-task, the warm start's mutants): enough to start, return and
# show that it keeps to the contract, not to search; a check of a 60 s task costs seconds, not minutes.
CHECK_BUDGET_S = 1.0
FRAME = struct.Struct("<I")
CHUNK = 1 << 16
_SEALS = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:20]} is out of range")
    return value


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number a construction may hold")


_DECODER = json.JSONDecoder(parse_float=_finite, parse_constant=_no_constant)  # built once (see rewards.channel)


def decode(frame: bytes):
    """A frame as JSON data (dict, list, str, int, finite float, bool, None); ValueError with one line."""
    try:
        return _DECODER.decode(frame.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(f"not valid JSON: {str(exc)[:120]}") from None


def search_budget(timeout_s: float) -> float:
    """The ``budget_s`` a program is told: 80% of its time limit less half a second (7.5 s of a 10 s limit),
    so a program that stops on its budget returns before the sandbox kills it at the limit."""
    return max(0.0, round(BUDGET_FRACTION * float(timeout_s) - BUDGET_MARGIN_S, 6))


def _non_finite(value, path: str = "") -> str | None:
    """Where the first NaN or infinity in JSON data ``value`` is (``[3][1]``, ``["radii"][0]``), or None."""
    stack = [(value, path)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return at or "the value itself"
        if isinstance(item, dict):
            stack.extend((v, f"{at}[{json.dumps(k)}]") for k, v in reversed(list(item.items())))
        elif isinstance(item, list):
            stack.extend((v, f"{at}[{i}]") for i, v in reversed(list(enumerate(item))))
    return None


def construction_text(value, limit: int = MAX_CONSTRUCTION_BYTES) -> str:
    """``value`` (JSON data) as compact JSON text, the form constructions are archived and handed on in;
    ValueError with one line when it holds NaN or infinity (JSON has neither) or is over ``limit`` bytes."""
    try:
        text = json.dumps(value, allow_nan=True, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"the construction is not JSON data ({type(exc).__name__}: {str(exc)[:120]})") from None
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise ValueError(f"the construction is {size:,} bytes as JSON, over the {limit:,} bytes a construction "
                         "may hold (it is handed on to the next generation)")
    where = _non_finite(value)
    if where is not None:
        raise ValueError(f"the construction holds NaN or infinity (at {where}); a construction is handed on as JSON "
                         "data, which has neither")
    return text


def same_construction(a, b) -> bool:
    """Whether two constructions are the same JSON data (dict key order aside)."""
    try:
        return json.dumps(a, sort_keys=True, allow_nan=True) == json.dumps(b, sort_keys=True, allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        return False


def input_fd(construction, budget_s: float, seed: int) -> int:
    """A sealed memfd holding ``{"construction", "budget_s", "seed", "max_report_bytes"}`` as strict JSON;
    the caller passes it to the child and closes it. ValueError (one line) for a construction that may not
    be handed in (NaN, infinity, over MAX_CONSTRUCTION_BYTES); the program never starts then."""
    if isinstance(budget_s, bool) or not isinstance(budget_s, (int, float)) or not budget_s >= 0 \
            or not math.isfinite(budget_s):
        raise ValueError(f"budget_s must be a finite number >= 0, got {budget_s!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an int, got {seed!r}")
    text = "null" if construction is None else construction_text(construction)
    data = ('{"budget_s":%s,"seed":%d,"max_report_bytes":%d,"construction":%s}'
            % (json.dumps(float(budget_s)), seed, MAX_CONSTRUCTION_BYTES, text)).encode()
    fd = os.memfd_create("helix-construction", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


class Reports:
    """The parent's end of one run's report pipe (non-blocking): ``read`` when it is readable; ``last``
    is the last complete frame (bytes) and ``count`` how many complete frames came; ``failure`` says
    why the channel broke (then it is closed and nothing more is read)."""

    def __init__(self, fd: int, limit: int = MAX_CONSTRUCTION_BYTES):
        self.fd, self.limit = fd, limit
        self.count, self.last, self.failure = 0, None, None
        self.open = True  # False at end-of-file, or once closed
        self._buf = bytearray()

    def read(self, chunks: int = 64) -> bool:
        """Take what the pipe holds (at most ``chunks`` reads: a flood cannot starve the deadline check).
        True when more may be waiting."""
        for _ in range(chunks):
            if not self.open:
                return False
            try:
                chunk = os.read(self.fd, CHUNK)
            except BlockingIOError:
                return False
            except OSError:
                chunk = b""
            if not chunk:
                self.open = False
                return False
            self._buf += chunk
            self._take()
        return self.open

    def drain(self) -> None:
        """Everything left in the pipe, once the program is gone (a report written just before the end counts)."""
        while self.read():
            pass

    def _take(self) -> None:
        """Skip over every complete frame in the buffer, keeping a copy of the last one only."""
        buf, start, span = self._buf, 0, None
        while len(buf) - start >= FRAME.size:
            size = FRAME.unpack_from(buf, start)[0]
            if size > self.limit:
                self.failure = (f"report {self.count + 1} is {size:,} bytes long, over the {self.limit:,} bytes a "
                                "construction may hold")
                self.close()
                return
            end = start + FRAME.size + size
            if end > len(buf):
                break
            span, start = (start + FRAME.size, end), end
            self.count += 1
        if span is not None:
            self.last = bytes(buf[span[0]:span[1]])
        del buf[:start]

    def value(self):
        """The last report, decoded (JSON only, NaN and infinities refused); ValueError naming the report."""
        if self.failure is not None:
            raise ValueError(self.failure)
        if self.last is None:
            raise ValueError("no report")
        try:
            return decode(self.last)
        except ValueError as exc:
            raise ValueError(f"report {self.count} is {exc}") from None

    def close(self) -> None:
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
        self.fd, self.open = -1, False
        self._buf = bytearray()


def open_reports(limit: int = MAX_CONSTRUCTION_BYTES) -> tuple[Reports, int]:
    """A report pipe: our end as Reports (non-blocking), and the write end to pass to the child."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    return Reports(read_end, limit), write_end

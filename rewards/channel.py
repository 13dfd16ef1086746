"""The trusted end of a driven run (task.yaml ``driver``, see tasks/base.py): the evaluating process
holds the task's driver and hands the sandboxed program one request at a time over two pipes.

Why: an online task (bin packing) promises that the program decides without seeing what comes
next. Data copied into the sandbox, or held by a harness in the program's process, can be read by
the program (a data file, the harness's frames, ``gc.get_objects()``, its own memory). Here the
data never leave the evaluating process, which the program cannot read: programs run in a user
namespace of their own (as ``nobody`` when the evaluator is root), so the kernel refuses them its
``/proc/<pid>/mem`` and ptrace.

The driver is a generator, ``reply = yield request``, whose return value is the artefact the
verifier scores. ``rewards.sandbox`` advances it from inside its supervise loop, so the deadline,
the output pump and the kill on timeout all still apply, and no thread is needed.

Frames, both ways: a 4-byte little-endian length, then UTF-8 JSON (rewards/child_runner.py reads
and writes the same). Requests come from the driver. Replies come from the program and are
untrusted: at most MAX_REPLY_BYTES, parsed by ``json`` (never pickle or marshal), NaN and
infinities refused. Replies are taken in order, one per request: a frame the program writes before
it has read the next request is that request's reply, and cannot depend on it. The driver checks
what a reply means and raises ValueError, with one line saying what is wrong, to end the run as
``bad_output``; frames left over when the driver is done are never read.
"""

from __future__ import annotations

import json
import logging
import math
import os
import struct

MAX_REPLY_BYTES = 1 << 20
FRAME = struct.Struct("<I")
CHUNK = 1 << 16
log = logging.getLogger(__name__)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:20]} is out of range")
    return value


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number a reply may hold")


# Built once: json.loads and json.dumps with options build a new decoder or encoder on every call.
_DECODER = json.JSONDecoder(parse_float=_finite, parse_constant=_no_constant)
_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"))


def decode_reply(frame: bytes):
    """The program's reply as a Python value (dict, list, str, int, finite float, bool, None)."""
    try:
        return _DECODER.decode(frame.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(f"not valid JSON: {str(exc)[:120]}") from None


class Link:
    """One run's channel: ``driver()`` makes the generator; ``request_fd`` and ``reply_fd`` are
    the evaluator's ends of the two pipes, non-blocking. ``start`` sends the first request; the
    sandbox then calls ``write`` when the request pipe has room and ``read`` when a reply arrives.
    The run is over when ``finished``: ``done`` with the artefact in ``value``, or ``failure`` (one
    line on what the program's reply did wrong)."""

    def __init__(self, driver, request_fd: int, reply_fd: int):
        self.request_fd, self.reply_fd = request_fd, reply_fd
        self.done, self.value, self.failure = False, None, None
        self.replies = 0  # accepted so far
        self.reply_open = True  # False once the program's end of the reply pipe is closed
        self._gen = driver()
        self._out, self._in = bytearray(), bytearray()

    @property
    def finished(self) -> bool:
        return self.done or self.failure is not None

    def wants_write(self) -> bool:
        return bool(self._out) and not self.finished

    def start(self) -> None:
        self._advance(None, first=True)

    def write(self) -> None:
        """Send what the request pipe takes now (a program that stopped reading times out)."""
        try:
            del self._out[:os.write(self.request_fd, self._out)]
        except BlockingIOError:
            pass
        except OSError:  # the program closed its end: it will not answer; its exit or the deadline decides
            self._out.clear()

    def read(self) -> None:
        """Take what the reply pipe holds and hand each complete reply to the driver."""
        while not self.finished:
            try:
                chunk = os.read(self.reply_fd, CHUNK)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                self.reply_open = False
                return
            self._in += chunk
            self._take()
            if len(chunk) < CHUNK:  # drained: the sandbox's poll says when more comes
                return

    def _take(self) -> None:
        while not self.finished and len(self._in) >= FRAME.size:
            size = FRAME.unpack_from(self._in)[0]
            if size > MAX_REPLY_BYTES:
                self.failure = (f"reply {self.replies + 1} is {size} bytes long, over the {MAX_REPLY_BYTES} "
                                "byte limit for one reply")
                return
            if len(self._in) < FRAME.size + size:
                return
            frame = bytes(self._in[FRAME.size:FRAME.size + size])
            del self._in[:FRAME.size + size]
            try:
                reply = decode_reply(frame)
            except ValueError as exc:
                self.failure = f"reply {self.replies + 1} is {exc}"
                return
            self.replies += 1
            self._advance(reply)

    def _advance(self, reply, first: bool = False) -> None:
        try:
            request = next(self._gen) if first else self._gen.send(reply)
        except StopIteration as stop:
            self.done, self.value = True, stop.value
            return
        except ValueError as exc:  # the driver refuses the reply: that is the program's doing
            self.failure = " ".join(str(exc).split())[:500] or "the driver refused a reply"
            return
        except Exception as exc:  # a bug in trusted code: say so, and do not score the program on it
            log.warning("driver %r failed after %d replies: %s: %s", self._gen, self.replies, type(exc).__name__, exc)
            self.failure = f"the task's driver failed after {self.replies} replies: {type(exc).__name__}: {exc}"[:500]
            return
        try:
            data = _ENCODER.encode(request).encode("utf-8")
        except (TypeError, ValueError) as exc:
            log.warning("driver %r made a request that is not JSON: %s", self._gen, exc)
            self.failure = f"the task's driver made a request that is not JSON: {exc}"[:500]
            return
        self._out += FRAME.pack(len(data)) + data
        self.write()

    def close(self) -> None:
        """Close both ends (the program reads end-of-file) and the generator."""
        for fd in (self.request_fd, self.reply_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.request_fd = self.reply_fd = -1
        self._gen.close()


def open_link(driver) -> tuple[Link, list[int]]:
    """A driven run's two pipes, requests down one and replies up the other: our side as a Link
    (its ends non-blocking), and the child's ends [request read, reply write] to pass to it."""
    request_r, request_w = os.pipe()
    reply_r, reply_w = os.pipe()
    os.set_blocking(request_w, False)
    os.set_blocking(reply_r, False)
    try:
        return Link(driver, request_w, reply_r), [request_r, reply_w]
    except BaseException:
        close_all([request_r, request_w, reply_r, reply_w])
        raise


def close_all(fds: list[int]) -> None:
    """Close and forget each descriptor (the list is emptied, so a second call closes nothing)."""
    while fds:
        os.close(fds.pop())

"""Red team of the bin-packing family (issue 31, item 7); the threat table is docs/reward_threats.md.

Three layers stand between a program and its reward. Each is tested alone, and each test takes the
check it relies on out (monkeypatch) to show that the hostile input is then accepted, so it is
that check, and not luck, that refuses it:
* the channel (rewards/channel.py): a reply is at most 1 MB of JSON without NaN or infinities;
* the driver (tasks/families/bin_packing/driver.py): a reply is one plain int per item, naming a bin with room;
* the verifier (tasks/families/bin_packing/verify.py): the driver's artefact places every item once, within capacity.
Then hostile programs through ``Evaluator``, speaking to the driver over the channel's pipe themselves,
forging the result, dying or hanging.
"""

import json
import os
import pickle
import struct

import numpy as np
import pytest

import rewards.channel as channel
import tasks.families.bin_packing.driver as driver_module
from rewards import Evaluator
from rewards.channel import Link
from tasks import load_task
from tasks.families.bin_packing.driver import OnlineDriver
from tasks.families.bin_packing.verify import Instances, verify_packing

TASK = load_task("bin_packing_or")
ROUND_0 = sum(len(v) for v in TASK.driver.sets.values())  # items in the first request: one per instance


def frame(payload: bytes, size: int | None = None) -> bytes:
    return struct.pack("<I", len(payload) if size is None else size) + payload


def two_requests():
    """A driver that asks twice and returns the replies."""
    first = yield {"k": 0}
    second = yield {"k": 1}
    return [first, second]


def feed(data: bytes) -> Link:
    """What a Link to ``two_requests`` makes of these bytes from the program (written as the pipe takes them)."""
    request_r, request_w = os.pipe()
    reply_r, reply_w = os.pipe()
    for fd in (request_w, reply_r, reply_w):
        os.set_blocking(fd, False)
    link = Link(two_requests, request_w, reply_r)
    try:
        link.start()
        while data and not link.finished:
            try:
                data = data[os.write(reply_w, data):]
            except BlockingIOError:
                pass
            link.read()
        link.read()
        return link
    finally:
        link.close()
        for fd in (request_r, reply_w):
            os.close(fd)


# ---- the channel ------------------------------------------------------------------------------

class Evil:
    def __reduce__(self):
        return (os.getpid, ())  # unpickling it calls a function of the sender's choosing


CHANNEL_CASES = {  # name: (bytes from the program, what the Link says, how to take the check out)
    "NaN": (frame(b"NaN"), "reply 1 is not valid JSON: NaN is not a number a reply may hold",
            lambda m: m.setattr(channel, "_DECODER", json.JSONDecoder())),
    "infinity": (frame(b"[Infinity]"), "Infinity is not a number a reply may hold",
                 lambda m: m.setattr(channel, "_DECODER", json.JSONDecoder())),
    "huge float": (frame(b"1e400"), "the number 1e400 is out of range",
                   lambda m: m.setattr(channel, "_DECODER", json.JSONDecoder())),
    "too long": (frame(b"7", size=2 << 20), f"reply 1 is {2 << 20} bytes long, over the {1 << 20} byte limit",
                 lambda m: m.setattr(channel, "MAX_REPLY_BYTES", 1 << 30)),
    "not utf-8": (frame(b"\xff\xfe7"), "reply 1 is not valid JSON",
                  lambda m: m.setattr(channel, "decode_reply", lambda f: f)),
    "deep nesting": (frame(b"[" * 100_000 + b"]" * 100_000), "reply 1 is not valid JSON",
                     lambda m: m.setattr(channel, "decode_reply", lambda f: f)),
    "pickle": (frame(pickle.dumps(Evil())), "reply 1 is not valid JSON",
               lambda m: m.setattr(channel, "decode_reply", pickle.loads)),
}


@pytest.mark.parametrize("name", sorted(CHANNEL_CASES))
def test_the_channel_refuses_what_is_not_a_bounded_json_reply(name, monkeypatch):
    data, why, weaken = CHANNEL_CASES[name]
    link = feed(data + frame(b"1") * 2)
    assert link.failure is not None and why in link.failure and not link.done, link.failure
    weaken(monkeypatch)
    weakened = feed(data + (frame(pickle.dumps(1)) if name == "pickle" else frame(b"1")) * 2)
    assert weakened.failure is None, weakened.failure  # without the check, the hostile reply goes through
    if name == "pickle":
        assert weakened.value[0] == os.getpid()  # ... and, unpickled, would have run code in the evaluator


def test_valid_replies_and_a_reply_written_ahead_are_taken_in_order():
    """A frame written before its request was read answers that request: it cannot depend on it."""
    link = feed(frame(b"7") + frame(b"[1, 2]") + frame(b"leftover, never read"))
    assert link.done and link.failure is None and link.value == [7, [1, 2]] and link.replies == 2


# ---- the driver --------------------------------------------------------------------------------

SMALL = {"S": [[6, 4, 5], [3, 10]]}  # capacity 10: instance 0 has 3 bins, instance 1 has 2


def drive(replies, capacity=10, sets=SMALL):
    """Run OnlineDriver on ``replies`` (one per round): (requests seen, the packing), or its ValueError."""
    gen = OnlineDriver(capacity, sets)()
    seen = [next(gen)]
    try:
        for reply in replies:
            seen.append(gen.send(reply))
    except StopIteration as stop:
        return seen, stop.value
    raise AssertionError(f"the driver wants more rounds than {len(replies)}")


def test_the_driver_sends_one_round_at_a_time_and_returns_the_packing():
    seen, packing = drive([[0, 0], [1, 1], [1]])
    assert seen[0] == {"open": [{"name": "S instance 0", "bins": 3, "capacity": 10},
                                {"name": "S instance 1", "bins": 2, "capacity": 10}], "items": [[0, 6], [1, 3]]}
    assert seen[1:] == [{"items": [[0, 4], [1, 10]]}, {"items": [[0, 5]]}]
    assert packing == {"S": [[0, 1, 1], [0, 1]]}
    assert drive([[0, 0], [0, 1], [1]])[1] == {"S": [[0, 0, 1], [0, 1]]}  # 6 + 4 fills bin 0 exactly: allowed


DRIVER_CASES = {  # name: (replies, the driver's line, the check, the packing the weakened driver returns)
    "not a list": ([7], "round 0: the reply is 7 (int), not a list of 2 bin indices", "is_reply_for", TypeError),
    "too short": ([[0], [1, 1], [1]], "round 0: the reply is a list of 1, not a list of 2 bin indices", "is_reply_for",
                  {"S": [[0, 1, 1], [1]]}),  # instance 1's first item never placed: the verifier's "missing" is next
    "bool": ([[True, 0], [0, 1], [0]], "S instance 0, item 0: the reply True (bool) is not a bin index", "is_bin_index",
             {"S": [[True, 0, 0], [0, 1]]}),
    "negative": ([[-1, 0], [0, 1], [0]], "S instance 0, item 0: bin -1 does not exist (bins are numbered 0 to 2)",
                 "names_a_bin", {"S": [[-1, 0, 0], [0, 1]]}),  # -1 is a Python index from the end: the last bin
    "no room": ([[0, 0], [1, 0], [0]], "S instance 1, item 1 (size 10): bin 0 has 7 of 10 left, too little", "has_room",
                {"S": [[0, 1, 0], [0, 0]]}),  # bins over capacity: the verifier's "> capacity" is next
}


@pytest.mark.parametrize("name", sorted(DRIVER_CASES))
def test_the_driver_refuses_a_reply_that_is_not_a_bin_with_room(name, monkeypatch):
    replies, why, check, weakened = DRIVER_CASES[name]
    with pytest.raises(ValueError) as info:
        drive(replies)
    assert why in str(info.value) and "\n" not in str(info.value)
    monkeypatch.setattr(driver_module, check, lambda *args: True)
    if weakened is TypeError:  # not even a list: a weakened driver breaks on it instead of saying what is wrong
        with pytest.raises(TypeError):
            drive(replies)
    else:
        assert drive(replies)[1] == weakened


@pytest.mark.parametrize("reply, why, check", [
    ([0.0, 0], "the reply 0.0 (float) is not a bin index", "is_bin_index"),
    ([None, 0], "the reply None (NoneType) is not a bin index", "is_bin_index"),
    (["0", 0], "the reply '0' (str) is not a bin index", "is_bin_index"),
    ([[0], 0], "the reply [0] (list) is not a bin index", "is_bin_index"),
    ([{"bin": 0}, 0], "the reply {'bin': 0} (dict) is not a bin index", "is_bin_index"),
    ([3, 0], "bin 3 does not exist", "names_a_bin"),
    ([10**40, 0], "bin a huge integer does not exist", "names_a_bin"),
    ({"bins": [0, 0]}, "the reply is {'bins': [0, 0]} (dict), not a list of 2", "is_reply_for"),
    ([0, 0, 0], "the reply is a list of 3, not a list of 2", "is_reply_for"),
])
def test_the_driver_says_in_one_line_what_is_wrong(reply, why, check, monkeypatch):
    with pytest.raises(ValueError) as info:
        drive([reply, [1, 1], [1]])
    assert why in str(info.value) and "\n" not in str(info.value)
    monkeypatch.setattr(driver_module, check, lambda *args: True)  # without it, that line is never said
    try:
        drive([reply, [1, 1], [1]])
    except (TypeError, ValueError, IndexError) as exc:
        assert why not in str(exc)


# ---- the verifier, behind a weakened driver -------------------------------------------------------

PILE_UP = ("def priority(item, bins):\n"
           "    globals()['_helix_place'] = lambda fn, instance, item: 0  # from now on, every item into bin 0\n"
           "    return -(bins - item)\n")


def test_every_item_into_one_bin_is_refused_by_the_driver_and_then_by_the_verifier(monkeypatch):
    """The program patches the harness so that every item goes into bin 0. The driver refuses the first
    item that does not fit; with its room check out, the verifier refuses the overfilled bins; with the
    verifier's capacity out as well, 21 bins for 9,470 items would score above 1,000."""
    def evaluate():
        return Evaluator(TASK, workers=1, timeout_s=60).evaluate(PILE_UP)

    real = evaluate()
    assert real.status == "bad_output" and "bin 0 has" in real.feedback and "too little" in real.feedback, real.feedback
    monkeypatch.setattr(driver_module, "has_room", lambda room, size: True)
    no_driver = evaluate()
    assert no_driver.status == "invalid" and "bin 0 holds" in no_driver.feedback and "> capacity 150" in no_driver.feedback
    monkeypatch.setattr(TASK._verify.__globals__["INSTANCES"], "capacity", 10**9)
    neither = evaluate()
    assert neither.valid and neither.reward > 1000 and neither.metrics["bins_OR4"] == 5, neither.feedback


def test_the_verifier_allows_a_bin_filled_exactly_and_nothing_more():
    """Integer sizes, integer capacity, no tolerance: load == capacity is valid, capacity + 1 is not."""
    inst = Instances.__new__(Instances)
    inst.capacity, inst.names = 10, ["S"]
    inst.items = {"S": [np.array([6, 4, 3])]}
    inst.l2 = {"S": np.array([2])}
    exact = verify_packing(inst, {"S": [[0, 0, 1]]})
    assert exact.valid and exact.metrics["bins_S"] == 2
    inst.items = {"S": [np.array([6, 5, 3])]}
    over = verify_packing(inst, {"S": [[0, 0, 1]]})
    assert not over.valid and "bin 0 holds 11 > capacity 10 (over by 1" in over.feedback


# ---- hostile programs, through the evaluator --------------------------------------------------------

# The program's own way to the channel and the result file: the runner's argv (PROGRAM ENTRY RESULT_FD
# MAX_BYTES CHANNEL ...), which /proc/self/cmdline shows it.
REACH = '''
import os, signal, struct, sys, time

ARGV = open("/proc/self/cmdline", "rb").read().split(b"\\0")
AT = [i for i, a in enumerate(ARGV) if a.endswith(b"child_runner.py")][0]
REQUESTS, REPLIES = (int(x) for x in ARGV[AT + 5].split(b","))
RESULT = int(ARGV[AT + 3])
CALLS = []


def priority(item, bins):
    CALLS.append(item)
    act(len(CALLS))
    return -(bins - item)
'''


def hostile(act: str) -> str:
    return REACH + "\n\ndef act(calls):\n" + "\n".join("    " + line for line in act.strip().splitlines()) + "\n"


def raw(payload: bytes, size: int | None = None) -> str:
    return hostile(f"if calls == 1:\n    os.write(REPLIES, {frame(payload, size)!r})")


HOSTILE = {  # name: (program, status, words of the feedback)
    "NaN": (raw(b"NaN"), "bad_output", "reply 1 is not valid JSON: NaN is not a number a reply may hold"),
    "huge float": (raw(b"[1e400]"), "bad_output", "the number 1e400 is out of range"),
    "too long": (raw(b"[0]", size=2 << 20), "bad_output", f"over the {1 << 20} byte limit"),
    "pickle": (raw(pickle.dumps([0] * ROUND_0)), "bad_output", "reply 1 is not valid JSON"),
    "bools": (raw(json.dumps([True] * ROUND_0).encode()), "bad_output",
              "OR1 instance 0, item 0: the reply True (bool) is not a bin index"),
    "floats": (raw(json.dumps([0.0] * ROUND_0).encode()), "bad_output", "the reply 0.0 (float) is not a bin index"),
    "huge int": (raw(json.dumps([10**40] * ROUND_0).encode()), "bad_output", "bin a huge integer does not exist"),
    "wrong length": (raw(b"[0]"), "bad_output", f"round 0: the reply is a list of 1, not a list of {ROUND_0} bin"),
    "a dict": (raw(b'{"OR1": [0]}'), "bad_output", "(dict), not a list of"),
    "stops answering": (hostile("if calls == 30:\n    time.sleep(60)"), "timeout", "did not return within the 3 s limit"),
    "closes its end and spins": (hostile("if calls == 30:\n    os.close(REPLIES)\n    while True:\n        pass"),
                                 "timeout", "did not return within the 3 s limit"),
    "dies": (hostile("if calls == 30:\n    os.kill(os.getpid(), signal.SIGKILL)"), "crash", "died from SIGKILL"),
    "forges a result and leaves": (hostile(
        "if calls == 30:\n"
        "    os.pwrite(RESULT, b'{\"ok\": true, \"value\": {\"OR1\": [[0]]}}', 0)\n"
        "    os._exit(0)"), "crash", "the program exited (code 0) after answering 1 of the driver's requests, before the last one"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_programs_get_a_clear_verdict_and_no_reward(name):
    code, status, words = HOSTILE[name]
    result = Evaluator(TASK, workers=1, timeout_s=3).evaluate(code)
    assert (result.status, result.reward, result.valid) == (status, 0.0, False), result.feedback
    assert words in result.feedback, result.feedback


def test_a_forged_result_or_a_printed_score_changes_nothing():
    """The artefact is the driver's, built outside the sandbox: a result file the program writes is never read."""
    forged = hostile("if calls == 1:\n"
                     "    os.pwrite(RESULT, b'{\"ok\": true, \"value\": {\"OR1\": [[0]], \"score\": 100}}', 0)\n"
                     "    print('excess 0.000%, reward 100')")
    starter = Evaluator(TASK, workers=1, timeout_s=60).evaluate(TASK.initial_program)
    result = Evaluator(TASK, workers=1, timeout_s=60).evaluate(forged)
    assert result.valid and result.reward == starter.reward and result.metrics == starter.metrics, result.feedback

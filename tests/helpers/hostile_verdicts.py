"""What the red team's hostile-test modules share (tests/redteam/test_hostile_{symreg,cap_set,mstd,
autocorrelation,dyck}.py; docs/reward_threats.md): a verdict or evaluation obtained with every
warning recorded and the parent's stderr and log captured, and the checks every verdict must pass
(issue 31, item 3: a clear one-line verdict, never an overflow, a warning or an inf/NaN metric)."""

import logging
import math
import warnings

from rewards import Evaluator
from tasks import load_task


def with_warnings(call):
    """(what ``call()`` returned, every warning it raised): no filter hides a repeated one."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = call()
    return out, caught


def _quietly(call, capfd, caplog):
    capfd.readouterr()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        out, caught = with_warnings(call)
    printed = capfd.readouterr()
    assert not caught, [str(w.message) for w in caught]
    assert not printed.err and not printed.out, printed
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    return out


def check_clean(verdict):
    """Finite reward and metrics; a rejection scores 0 and says why in one line."""
    assert math.isfinite(verdict.reward), verdict
    assert all(math.isfinite(v) for v in verdict.metrics.values()), verdict.metrics
    if not verdict.valid:
        assert verdict.reward == 0 and verdict.feedback and "\n" not in verdict.feedback.strip(), verdict.feedback
    return verdict


def verify_quietly(task, artefact, capfd, caplog):
    """task.verify(artefact), asserting it warned, printed and logged nothing and its verdict is clean."""
    return check_clean(_quietly(lambda: task.verify(artefact), capfd, caplog))


def evaluate_quietly(task, code, capfd, caplog, **kwargs):
    """The real path (sandbox, harness, verifier), asserting the parent warned, printed and logged nothing."""
    result = _quietly(lambda: Evaluator(task, workers=1, **kwargs).evaluate(code), capfd, caplog)
    assert math.isfinite(result.reward) and all(math.isfinite(v) for v in result.metrics.values()), result
    return result


def weakened(name: str, **replace):
    """A fresh copy of task ``name`` whose verifier module has the given globals replaced: the
    deliberately weakened verifier a hostile test must beat (load_task executes verifier.py anew,
    so the change stays in this copy)."""
    task = load_task(name)
    namespace = task._verify.__globals__
    missing = [key for key in replace if key not in namespace]
    assert not missing, f"{name}'s verifier has no {missing}: the weakening would test nothing"
    namespace.update(replace)
    return task

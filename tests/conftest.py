import os

import pytest

# Under pytest-xdist (scripts/test.sh: 2 workers) each worker gets its share of the cores for torch's OpenMP pool,
# and the runs it starts inherit that: two workers that each spin two OpenMP threads on 2 cores wait on each
# other's spinning. Set before anything imports torch; a value the shell exports wins.
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    os.environ.setdefault("OMP_NUM_THREADS",
                          str(max(1, len(os.sched_getaffinity(0)) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Ray's single-node mode: the loopback clusters of tests/rewards/test_ray_eval.py keep every address on
# 127.0.0.1. Ray reads it when first imported (verl imports it), so it is set before anything.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# A throwaway loopback cluster needs no token (Ray >= 2.59 turns token auth on by default, and a
# token cached by an earlier Ray session in this process would not match a new head's).
os.environ["RAY_AUTH_MODE"] = "disabled"
# The suite checks the tasks the project ships: a user's own task folders (HELIX_TASKS, tasks/paths.py) stay out
# of it, whatever the shell that runs it exports. A test that needs some sets them itself.
os.environ.pop("HELIX_TASKS", None)
os.environ.pop("HELIX_TASK_PATHS", None)


@pytest.fixture(autouse=True)
def _no_user_task_paths():
    """A config a test loads with task.paths (or a write_task with dest) adds folders to the process's search
    path (tasks/paths.py, kept in the environment): taken away after the test, so the next one sees only tasks/."""
    yield
    os.environ.pop("HELIX_TASKS", None)
    os.environ.pop("HELIX_TASK_PATHS", None)


@pytest.fixture(scope="session")
def tokenizer():
    """SmolLM2's tokenizer (the embedded model is converted once and cached)."""
    from train.learner.models import load_tokenizer

    return load_tokenizer("tiny-random")


@pytest.fixture()
def tiny_model(tokenizer):
    from train.learner.models import load_policy

    model, _ = load_policy("tiny-random", seed=0)
    return model

"""train/helix.py with the scripted engine of tests/test_e2e.py registered, so a run in its own
process (needed to SIGKILL it) gets mixed rewards per group and GRPO really updates the policy.
Started with tests/ on its PYTHONPATH (conftest.child_env), for test_e2e."""

import sys

from test_e2e import ScriptedEngine

from rollout.engines import ENGINES
from train.helix import main

ENGINES["scripted"] = ScriptedEngine

if __name__ == "__main__":
    sys.exit(main())

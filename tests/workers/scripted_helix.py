"""train/helix.py with the scripted engine of tests/loop/test_e2e.py (tests/helpers/scripted.py) registered, so a run in its own
process (needed to SIGKILL it) gets mixed rewards per group and GRPO really updates the policy.
Started with the checkout on its PYTHONPATH (tests.helpers.env.child_env), for test_resume."""

import sys

from rollout.engines import ENGINES
from tests.helpers.scripted import ScriptedEngine
from train.helix import main

ENGINES["scripted"] = ScriptedEngine

if __name__ == "__main__":
    sys.exit(main())

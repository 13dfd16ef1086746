"""train/helix.py with the scripted engine of tests/test_e2e.py registered, so a run in its own
process (needed to SIGKILL it) gets mixed rewards per group and GRPO really updates the policy."""

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS.parent), str(TESTS)]

from test_e2e import ScriptedEngine  # noqa: E402

from rollout.engines import ENGINES  # noqa: E402
from train.helix import main  # noqa: E402

ENGINES["scripted"] = ScriptedEngine

if __name__ == "__main__":
    sys.exit(main())

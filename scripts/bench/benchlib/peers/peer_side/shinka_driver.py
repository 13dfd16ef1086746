"""Drive ShinkaEvolve through its runner's public entry point, ``shinka_run`` (``shinka.cli.run.main``), with
its own defaults and prompts; only the model endpoint, the budget, the seed, the problem statement and the
recorded workarounds (the bench's ``set``: ``NS.FIELD=VALUE`` overrides) are set. Runs in Shinka's venv;
imports nothing of HELIX.

    python shinka_driver.py SPEC.json

SPEC: task_dir (evaluate.py and initial.py), out, generations, seed, model (``local/NAME@URL``), problem, set.
Shinka has no seed option: the seed goes to Python's and numpy's global generators before the runner starts
(its parent, patch-type and temperature draws use them). The task system message is Shinka's own default
followed by the problem (where its examples put the problem).
"""

import json
import random
import sys
from pathlib import Path


def main(spec_path):
    import numpy as np
    from shinka.cli.run import main as shinka_run
    from shinka.defaults import DEFAULT_TASK_SYS_MSG

    spec = json.loads(Path(spec_path).read_text())
    random.seed(spec["seed"])
    np.random.seed(spec["seed"])
    sets = [f"evo.llm_models={json.dumps([spec['model']])}",
            f"evo.task_sys_msg={DEFAULT_TASK_SYS_MSG}\n\n# Problem\n{spec['problem'].strip()}", *spec.get("set", [])]
    argv = ["--task-dir", spec["task_dir"], "--results_dir", spec["out"], "--num_generations", str(spec["generations"])]
    for item in sets:
        argv += ["--set", item]
    print("shinka_run " + " ".join(json.dumps(a) if " " in a or "\n" in a else a for a in argv), flush=True)
    return shinka_run(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

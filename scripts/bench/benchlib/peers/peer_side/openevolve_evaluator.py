"""OpenEvolve's evaluator contract around HELIX's sandbox: ``evaluate(program_path)`` returns metrics whose
``combined_score`` is HELIX's trusted reward, with HELIX's feedback as an artifact (OpenEvolve shows artifacts
in its next prompt). The program never runs here: HELIX's Python scores it (``python -m benchlib.peers.score``,
inside HELIX's sandbox) and logs the result for the bench. Runs in OpenEvolve's venv and imports nothing of
HELIX; where to find HELIX comes in the environment (HELIX_PEER_SCORE, JSON, set by the bench).
"""

import json
import os
import subprocess
import time


def helix_score(program_path):
    spec = json.loads(os.environ["HELIX_PEER_SCORE"])
    cmd = [spec["python"], "-m", "benchlib.peers.score", spec["task"], str(program_path), "--log", spec["log"],
           "--timeout-s", str(spec["timeout_s"])]
    try:
        env = dict(os.environ, PYTHONPATH=spec["pythonpath"])  # HELIX's Python's alone: where benchlib is
        proc = subprocess.run(cmd, cwd=spec["root"], env=env, capture_output=True, text=True,
                              timeout=3 * spec["timeout_s"] + 120)
        if proc.returncode != 0 or not proc.stdout.strip():
            raise RuntimeError(f"HELIX's scorer failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except Exception as err:  # the bench must hear of it: the peer would score the child 0 and carry on
        with open(spec["log"], "a") as log:
            log.write(json.dumps({"scorer_error": " ".join(str(err).split())[:300], "t": time.time()}) + "\n")
        raise


def evaluate(program_path):
    from openevolve.evaluation_result import EvaluationResult

    out = helix_score(program_path)
    return EvaluationResult(metrics={"combined_score": out["reward"]}, artifacts={"feedback": out["feedback"]})

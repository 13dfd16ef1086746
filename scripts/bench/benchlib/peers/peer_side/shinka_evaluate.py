"""ShinkaEvolve's evaluator contract around HELIX's sandbox: run as ``evaluate.py --program_path P
--results_dir D`` (Shinka's local job), it writes D/metrics.json (``combined_score``: HELIX's trusted reward;
``text_feedback``: HELIX's feedback) and D/correct.json (``correct``: HELIX's verdict). The program never runs
here: HELIX's Python scores it (``python -m benchlib.peers.score``, inside HELIX's sandbox) and logs the result
for the bench. Shinka copies this file into its results folder, so it is self-contained and imports nothing of
HELIX; where to find HELIX comes in the environment (HELIX_PEER_SCORE, JSON, set by the bench).
"""

import argparse
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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--program_path", required=True)
    parser.add_argument("--results_dir", required=True)
    args = parser.parse_args()
    out = helix_score(args.program_path)
    os.makedirs(args.results_dir, exist_ok=True)
    metrics = {"combined_score": out["reward"], "public": {"helix_status": out["status"]}, "private": {},
               "text_feedback": out["feedback"]}
    with open(os.path.join(args.results_dir, "metrics.json"), "w") as f:
        json.dump(metrics, f)
    with open(os.path.join(args.results_dir, "correct.json"), "w") as f:
        json.dump({"correct": out["valid"], "error": None if out["valid"] else out["feedback"]}, f)


if __name__ == "__main__":
    main()

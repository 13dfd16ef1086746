"""Drive OpenEvolve through its public library entry point, ``openevolve.run_evolution``, with its own
defaults and prompts; only the model endpoint, the budget, the seed, the problem statement and the recorded
workarounds (the bench's ``config`` overrides) are set. Runs in OpenEvolve's venv; imports nothing of HELIX.

    python openevolve_driver.py SPEC.json

SPEC: initial, evaluator, out, iterations, seed, api_base, model, problem, config (a nested mapping merged
last). The system message is OpenEvolve's own default followed by the problem (where its examples put the
problem). The config actually used is written to OUT/config.yaml.
"""

import json
import sys
from pathlib import Path


def merge(base, extra):
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value
    return base


def main(spec_path):
    import openevolve
    import yaml
    from openevolve import run_evolution
    from openevolve.config import load_config

    spec = json.loads(Path(spec_path).read_text())
    out = Path(spec["out"])
    out.mkdir(parents=True, exist_ok=True)
    default_system = (Path(openevolve.__file__).parent / "prompts" / "defaults" / "system_message.txt").read_text().strip()
    config = {"random_seed": spec["seed"],
              "llm": {"api_base": spec["api_base"], "models": [{"name": spec["model"], "weight": 1.0}]},
              "prompt": {"system_message": default_system + "\n\n# Problem\n" + spec["problem"].strip()}}
    merge(config, spec.get("config", {}))
    (out / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    result = run_evolution(initial_program=spec["initial"], evaluator=spec["evaluator"],
                           config=load_config(str(out / "config.yaml")), iterations=spec["iterations"],
                           output_dir=str(out / "openevolve"), cleanup=False)
    print(json.dumps({"openevolve_best_score": result.best_score}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

"""``python -m train.warm_start --config CONFIG [--rebuild] [section.key=value ...]``: build (or find)
the warm-started model a run with this config would start from, and print its summary and path."""

from __future__ import annotations

import argparse
import json
import sys

from train.loop.config import ConfigError, load_config, warm_start_inputs
from train.warm_start import build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m train.warm_start", description=build.__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="the run config whose model, task(s) and prompt settings to use")
    parser.add_argument("--rebuild", action="store_true", help="build again even if cached")
    parser.add_argument("overrides", nargs="*", help="dotted overrides, e.g. warm_start.epochs=3")
    args = parser.parse_args(argv)
    try:
        cfg = load_config(args.config, list(args.overrides) + ["warm_start.enabled=true"])
    except ConfigError as err:
        print(f"warm_start: config error: {err}", file=sys.stderr)
        return 2
    out = build.ensure_warm_start(warm_start_inputs(cfg), rebuild=args.rebuild)
    summary = json.loads((out / "warm_start.json").read_text())
    print(json.dumps({k: v for k, v in summary.items() if k != "losses"}, indent=1))
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The start-up check of task.ray_address for ``python train/helix.py``, before anything heavy is imported.

Importing torch and the config's registries takes seconds on a quiet machine and tens of seconds
on a busy one; a wrong Ray address should cost one line within seconds (README: Evaluation on a
Ray cluster). This reads the two settings the way ``train.config.config.load_config`` composes them
(YAML ``base:`` chain, then the dotted overrides) with nothing but yaml, and runs the Ray
handshake (rewards.ray_gcs). HelixRun checks again with the validated config.
"""

from __future__ import annotations

import sys
from pathlib import Path


def ray_address(argv: list[str]) -> str | None:
    """task.ray_address when this run evaluates on a remote Ray cluster, read from the command line
    and the YAML (``base:`` chain, or the run's config.yaml for --resume) as load_config will; None
    otherwise, or when anything is unusual (HelixRun checks again with the full config)."""
    import yaml

    task, overrides, path, i = {}, [], None, 0
    while i < len(argv):
        flag, _, inline = argv[i].partition("=")
        if flag in ("--config", "--resume"):
            value = inline or (argv[i + 1] if i + 1 < len(argv) else "")
            i += 1 if inline else 2
            path = Path(value)
            if flag == "--resume":
                path = path / "config.yaml" if (path / "config.yaml").is_file() else path.parent.parent / "config.yaml"
            continue
        overrides.append(argv[i])
        i += 1
    chain = []
    while path is not None and path.is_file() and len(chain) < 16:
        data = yaml.safe_load(path.read_text()) or {}
        chain.append(data.get("task") or {})
        path = path.parent / data["base"] if isinstance(data.get("base"), str) else None
    for section in reversed(chain):
        task.update(section)
    for text in overrides:
        key, sep, value = text.partition("=")
        if sep and key in ("task.eval_backend", "task.ray_address"):
            task[key.split(".", 1)[1]] = value.strip().strip("'\"")
    address = str(task.get("ray_address") or "")
    return address if task.get("eval_backend") == "ray" and address not in ("", "local") else None


def early_ray_check(argv: list[str]) -> None:
    """``python train/helix.py ... task.eval_backend=ray``: the Ray handshake before torch and the
    rest are imported (tens of seconds on a busy machine), so a wrong task.ray_address costs one
    line within seconds: exits with code 1 when the handshake fails."""
    try:
        address = ray_address(argv)
    except Exception:  # noqa: BLE001 - an odd command line or YAML: load_config will say what is wrong
        return
    if address is None:
        return
    try:
        from rewards.ray_gcs import RayUnreachable, handshake
    except ImportError:  # no Ray: HelixRun says how to install it
        return
    try:
        handshake(address)
    except RayUnreachable as err:
        print(f"helix: error: {err}", file=sys.stderr)
        sys.exit(1)

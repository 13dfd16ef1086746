"""Keep the terminal for HELIX: the progress bar, the epoch table and the loop's own messages.

Libraries talk a lot on start-up: vLLM prints hundreds of INFO and weight-dtype WARNING lines,
load bars and C++ notices, wandb its banners. With ``run.library_logs: file`` (the default) they go
to ``RUN_DIR/library.log`` instead and transformers' load and save bars are off; ``console`` leaves
them where they were. (vLLM's generation bar is tidied either way: ``rollout.vllm_engine.progress_bar``.)
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path

LIBRARY_LOGGERS = ("vllm", "wandb", "py.warnings")  # py.warnings: warnings.warn (a torch.distributed UserWarning)


@contextlib.contextmanager
def to_file(path: Path | None):
    """Send everything written to stdout and stderr (file descriptors 1 and 2, so C/C++ output and
    subprocesses too) to ``path`` while the block runs; ``None`` changes nothing."""
    if path is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    saved = os.dup(1), os.dup(2)
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, target):
            os.close(fd)


def library_loggers_to(path: Path | None) -> None:
    """Route the library loggers (vLLM's handler writes to stdout) and Python warnings (libraries' UserWarnings:
    HELIX's own messages are prints, never warnings) to ``path`` for the rest of the run."""
    if path is None:
        return
    logging.captureWarnings(True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(levelname)s %(asctime)s [%(name)s] %(message)s"))
    for name in LIBRARY_LOGGERS:
        logger = logging.getLogger(name)
        for old in list(logger.handlers):
            logger.removeHandler(old)
        logger.addHandler(handler)
        logger.propagate = False


def quiet_environment() -> None:
    """Before the libraries start: wandb's banners off (its own debug logs still go to RUN_DIR/wandb),
    and transformers' bars (loading the embedder, writing the export), which would tear the epoch bar."""
    os.environ.setdefault("WANDB_SILENT", "true")
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()

"""HELIX from Python (docs/python.md):

    import train.api as helix
    task = helix.write_task("spread_points_5", description=..., starter=..., verifier=..., best_known=...)
    result = helix.run("configs/quickstart.yaml", {"task.name": "spread_points_5", "trainer.epochs": 2})
    run = helix.open_run(result.path)

``run`` does what ``train/helix.py`` does (both take the start routine, ``train.api.start``), with exceptions
instead of exit codes; ``open_run`` reads a run folder through the run browser's data layer; ``write_task``
writes and checks a task folder.
"""

from train.api.launch import RunResult, run
from train.api.reader import Run, SolutionView, open_run
from train.api.task_writer import TaskArgumentError, write_task

__all__ = ["run", "RunResult", "open_run", "Run", "SolutionView", "write_task", "TaskArgumentError"]

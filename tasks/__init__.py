"""Tasks: one folder each (task.yaml, description.md, initial_program.py, verifier.py), under tasks/ or in a
user's folder named by HELIX_TASKS or task.paths (tasks/paths.py)."""

from tasks.base import ExactCheck, Task, Verdict, available_tasks, invalid, load_task, own_timeout_s, task_folder, task_form
from tasks.paths import shipped_tasks

__all__ = ["ExactCheck", "Task", "Verdict", "available_tasks", "invalid", "load_task", "own_timeout_s", "shipped_tasks",
           "task_folder", "task_form"]

"""Tasks: one folder each (task.yaml, description.md, initial_program.py, verifier.py)."""

from tasks.base import ExactCheck, Task, Verdict, available_tasks, invalid, load_task, own_timeout_s, task_form

__all__ = ["ExactCheck", "Task", "Verdict", "available_tasks", "invalid", "load_task", "own_timeout_s", "task_form"]

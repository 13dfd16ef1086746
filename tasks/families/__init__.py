"""The shelf for code that several task folders share, one package per family.

A family holds what its tasks have in common: ``verify.py``, the trusted verifier library that the
task folders' verifier.py files call in the parent; ``harness.py``, the source a task.yaml names as
``harness: families/<family>/harness.py`` (run in the sandbox after the program, so it imports no
HELIX module); ``driver.py``, a trusted step driver for driven tasks; ``data.py``, the offline
writer of the task folders' data files (``python -m tasks.families.<family>.data``); ``render.py``,
drawing for reports. Nothing here is a task: tasks.base finds tasks by their task.yaml, and the
contract (tasks.base, tasks.config, tasks.template) stays at tasks/ top level.
"""

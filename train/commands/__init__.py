"""The commands, above the run: ``helix check-task`` (task_check), ``helix export`` (export_cli),
``helix warm-start`` (warm_start; also ``python -m train.warm_start``), scripts/ablate.py (ablate) and
scripts/plan_scale.py (scale_plan). Only the entry points (train/helix.py, scripts/) and the start routine
(train.api.start: the task check) import them."""

"""The commands, above the run: ``helix check-task`` (task_check), ``helix export`` (export_cli),
``helix warm-start`` (warm_start; also ``python -m train.warm_start``) and the run's warm-start
resolution, scripts/ablate.py (ablate), scripts/plan_scale.py (scale_plan) and the early Ray check of
``python train/helix.py`` (ray_precheck). Only the entry points (train/helix.py, scripts/) import them."""

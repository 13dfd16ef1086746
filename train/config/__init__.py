"""The run's configuration, below the run: every section composed into ``HelixConfig`` and read from
YAML (train.config.config), the typed schema and its bounds (train.config.schema), the ablation
variants' settings (train.config.variants) and a new run's default name (train.config.run_name).
It imports neither the run (train/loop/) nor the commands (train/commands/); the sections themselves
live with the code that reads them (tasks/, rollout/, population/, train/learner/, train/warm_start/)."""

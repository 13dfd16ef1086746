"""The warm start: a cached supervised fine-tune of the policy on synthetic edits of the tasks' starter
programs (``python -m train.warm_start``). Built from ``WarmStartInputs``, never from the run's config."""

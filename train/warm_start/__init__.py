"""The warm start: a cached supervised fine-tune of the policy on synthetic edits of the tasks' starter
programs (``python -m train.warm_start``). Built from ``WarmStartInputs``, never from the run's config; its data is
scored and shown with the evaluator and prompt builder the caller lends, its fine-tune is the learner's supervised
step in a child process."""

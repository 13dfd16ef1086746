"""The run browser (``helix ui PATH``): a read-only FastAPI app over ``train.runs.browse``, and its page."""

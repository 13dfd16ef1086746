"""Trusted check of the search form of autocorrelation_third: the returned step heights are scored
from scratch by autocorrelation_third's own verifier.py (that task has no family module), loaded
here as a private copy whose usage line names this task's entry function; the task's module,
which the constructor task and its red team use, is left as it is."""

import importlib.util
from pathlib import Path

_SOURCE = Path(__file__).resolve().parents[1] / "autocorrelation_third" / "verifier.py"
_spec = importlib.util.spec_from_file_location("helix_autocorrelation_third_search_checks", _SOURCE)
checks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(checks)
checks.USAGE = USAGE = (f"search_heights(construction, budget_s, seed) must return a list of 1 to {checks.MAX_STEPS} "
                        "finite step heights (numbers, either sign) for equal steps on [-1/4, 1/4]")
verify, check_exact = checks.verify, checks.check_exact

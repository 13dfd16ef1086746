"""Trusted scoring of run_model's predictions against held-out targets the sandbox never sees (eq. 8-9)."""

from pathlib import Path

from tasks.families.boston.verify import load_heldout, unchecked, verify_predictions

HELDOUT = load_heldout(Path(__file__).resolve().parent)


def verify(returned):
    return verify_predictions(HELDOUT, returned)


def check_exact(returned):
    return unchecked(returned)

"""Trusted check of the online packings (FunSearch, paper 001, Table 1); the checks are in tasks/bin_packing.py."""

from pathlib import Path

from tasks.base import Verdict
from tasks.bin_packing import Instances, verify_packing

INSTANCES = Instances(Path(__file__).resolve().parent)  # item sizes and L2 bounds, from this folder's data.npz


def verify(returned) -> Verdict:
    return verify_packing(INSTANCES, returned)

"""Trusted side of the online packings (FunSearch, paper 001, Table 1): the driver that hands the program one
item at a time (tasks/families/bin_packing/driver.py) and the check of the packing it returns (tasks/families/bin_packing/verify.py)."""

from pathlib import Path

from tasks.base import ExactCheck, Verdict
from tasks.families.bin_packing.driver import OnlineDriver
from tasks.families.bin_packing.verify import Instances, exact_packing, verify_packing

INSTANCES = Instances(Path(__file__).resolve().parent)  # item sizes and L2 bounds, from this folder's data.npz
DRIVER = OnlineDriver(INSTANCES.capacity, INSTANCES.items)  # task.yaml's driver: the items never enter the sandbox


def verify(returned) -> Verdict:
    return verify_packing(INSTANCES, returned)


def check_exact(returned) -> ExactCheck:
    return exact_packing(INSTANCES, returned)

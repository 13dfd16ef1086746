"""Trusted side of the online packings (FunSearch, paper 001, Table 1): the driver that hands the program one
item at a time (tasks/families/bin_packing/driver.py) and the check of the packing it returns (tasks/families/bin_packing/verify.py),
for the run's instances (data.npz) and for the held-out ones its best program is also scored on (heldout.npz)."""

from pathlib import Path

from tasks.base import ExactCheck, Verdict
from tasks.families.bin_packing.data import HELDOUT_FILE
from tasks.families.bin_packing.driver import OnlineDriver
from tasks.families.bin_packing.verify import Instances, exact_packing, verify_packing

INSTANCES = Instances(Path(__file__).resolve().parent)  # item sizes and L2 bounds, from this folder's data.npz
DRIVER = OnlineDriver(INSTANCES.capacity, INSTANCES.items)  # task.yaml's driver: the items never enter the sandbox
HELDOUT = Instances(Path(__file__).resolve().parent, HELDOUT_FILE)  # task.yaml's heldout: instances no run sees
HELDOUT_DRIVER = OnlineDriver(HELDOUT.capacity, HELDOUT.items)


def verify(returned) -> Verdict:
    return verify_packing(INSTANCES, returned)


def verify_heldout(returned) -> Verdict:
    return verify_packing(HELDOUT, returned)


def check_exact(returned) -> ExactCheck:
    return exact_packing(INSTANCES, returned)

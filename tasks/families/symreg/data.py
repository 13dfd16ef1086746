"""Synthetic symbolic-regression data sets (paper appendix B.5, LLM-SRBench style), regenerated bit
for bit from known equations and fixed seeds: no downloads, and a test checks the shipped files.

Each category (chemistry, biology, physics) has three cases: the same equation form with different
constants, each with its own train set (in-domain box) and test set (a held-out box, out of domain
in one input, as LLM-SRBench's OOD split). Per task folder two files are written:
* ``data.npz``    x_train_i, y_train_i, x_test_i for case i: copied into the sandbox for the fit;
* ``heldout.npz`` y_test_i: read only by the trusted verifier in the parent, never copied.

    python -m tasks.families.symreg.data  # rewrite every tasks/symreg_*/data.npz and heldout.npz
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from tasks.base import TASKS_DIR

N_TRAIN, N_TEST = 400, 200
Box = tuple[tuple[float, float], tuple[float, float]]  # (low, high) per input column


def reaction_kinetics(x: np.ndarray, k: tuple[float, ...]) -> np.ndarray:
    """dA/dt = -k1 A^2 - k2 A exp(-k3 t): second-order decay plus a first-order channel whose
    catalyst deactivates over time."""
    t, a = x[:, 0], x[:, 1]
    return -k[0] * a**2 - k[1] * a * np.exp(-k[2] * t)


def population_growth(x: np.ndarray, k: tuple[float, ...]) -> np.ndarray:
    """dP/dt = r P (1 - P/K) - h P^2 / (1 + P^2): logistic growth with Holling type-III predation
    (the spruce-budworm model); t does not enter."""
    p = x[:, 1]
    return k[0] * p * (1 - p / k[1]) - k[2] * p**2 / (1 + p**2)


def duffing_oscillator(x: np.ndarray, k: tuple[float, ...]) -> np.ndarray:
    """dv/dt = -w^2 x - g v - b x^3: a damped oscillator with a hardening spring."""
    pos, vel = x[:, 0], x[:, 1]
    return -k[0] ** 2 * pos - k[1] * vel - k[2] * pos**3


@dataclass(frozen=True)
class Category:
    name: str  # the task folder is tasks/symreg_<name>
    equation: Callable[[np.ndarray, tuple[float, ...]], np.ndarray]
    formula: str  # the generating equation, for humans and tests (never shown to the policy)
    constants: tuple[tuple[float, ...], ...]  # one tuple per case
    train_box: Box
    test_box: Box
    seed: int


CATEGORIES: dict[str, Category] = {c.name: c for c in (
    Category("chemistry", reaction_kinetics, "dA_dt = -k1*A**2 - k2*A*exp(-k3*t)",
             ((0.8, 0.5, 0.3), (0.3, 0.9, 0.6), (0.5, 0.4, 0.9)),
             train_box=((0.0, 4.0), (0.1, 2.0)), test_box=((4.0, 6.0), (0.1, 2.0)), seed=11),
    Category("biology", population_growth, "dP_dt = r*P*(1 - P/K) - h*P**2/(1 + P**2)",
             ((0.6, 5.0, 0.7), (0.9, 4.0, 1.2), (0.4, 6.0, 0.5)),
             train_box=((0.0, 10.0), (0.1, 3.0)), test_box=((0.0, 10.0), (3.0, 4.0)), seed=22),
    Category("physics", duffing_oscillator, "dv_dt = -w**2*x - g*v - b*x**3",
             ((1.0, 0.2, 0.5), (0.7, 0.4, 0.9), (1.3, 0.1, 0.3)),
             train_box=((-2.0, 2.0), (-2.0, 2.0)), test_box=((2.0, 3.0), (-2.0, 2.0)), seed=33),
)}


def _sample(rng: np.random.Generator, box: Box, n: int) -> np.ndarray:
    return np.column_stack([rng.uniform(lo, hi, n) for lo, hi in box])


def generate(name: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(data for the sandbox, held-out targets for the verifier) of one category, noise-free."""
    if name not in CATEGORIES:
        raise ValueError(f"unknown symbolic-regression category {name!r}; known: {', '.join(CATEGORIES)}")
    cat = CATEGORIES[name]
    rng = np.random.default_rng(cat.seed)
    data, heldout = {}, {}
    for i, k in enumerate(cat.constants):
        x_train, x_test = _sample(rng, cat.train_box, N_TRAIN), _sample(rng, cat.test_box, N_TEST)
        data[f"x_train_{i}"], data[f"y_train_{i}"] = x_train, cat.equation(x_train, k)
        data[f"x_test_{i}"] = x_test
        heldout[f"y_test_{i}"] = cat.equation(x_test, k)
    return data, heldout


def write(name: str, folder: Path | None = None) -> Path:
    folder = folder or TASKS_DIR / f"symreg_{name}"
    data, heldout = generate(name)
    np.savez(folder / "data.npz", **data)
    np.savez(folder / "heldout.npz", **heldout)
    return folder


if __name__ == "__main__":
    for category in sys.argv[1:] or CATEGORIES:
        print(f"wrote {write(category)}")

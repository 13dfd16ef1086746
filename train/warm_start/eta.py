"""How long a warm start takes, for the message that announces it: the time grows with its size.

Two parts, each linear in what it does:

* data: every synthetic mutant runs once in the sandbox (about 0.9 s of wall time each on 2 cores;
  ``parents x answers_per_parent`` valid mutants per task, plus the invalid ones drawn);
* training: ``parents x epochs`` optimizer steps per task, each over ``answers_per_parent`` answers
  sharing one prompt (~1,300 tokens): about 3 s per answer in fp32 on an AVX2-only CPU, 1 s where
  the CPU computes bf16 natively (autocast bf16).

The coefficients come from the measured default-size builds (8 x 8 x 2, SmolLM2-135M) on 2 idle
cores: 7.3 min on an AVX2-only EPYC (fp32), 2 min 52 s on an EPYC with native bf16 (measured
when the recipe had 8 answers a parent; BENCHMARKS.md "Time to a first result"). A busy box takes longer in proportion
to its load (a load average of 2 on 2 cores roughly doubles it).
"""

from __future__ import annotations

DATA_S_PER_MUTANT = 0.9
TRAIN_S_PER_ANSWER = {"float32": 3.0, "bfloat16": 1.0}


def estimate_s(parents: int, answers: int, epochs: int, tasks: int, autocast: str) -> float:
    data = DATA_S_PER_MUTANT * parents * answers * tasks
    train = TRAIN_S_PER_ANSWER.get(autocast, 3.0) * parents * epochs * answers * tasks
    return data + train


def announce(ws, tasks: list[str], autocast: str) -> str:
    """``ws``: the warm_start section (parents, answers_per_parent, epochs)."""
    s = estimate_s(ws.parents, ws.answers_per_parent, ws.epochs, len(tasks), autocast)
    return (f"once; about {s / 60:.0f} min on 2 idle cores for {len(tasks)} task(s) x {ws.parents} parents x "
            f"{ws.answers_per_parent} answers x {ws.epochs} epochs ({autocast}); it scales with their product, "
            "and with the load of a busy box")

"""An engine whose groups have reward spread where a test plants it (dynamic sampling's tests).

A flat prompt gets G copies of one harmless edit (every child has the parent's reward: no spread);
any other prompt gets ScriptedEngine's four answers (a harmless edit, a crash, prose, a SEARCH that
is not found: the harmless child's reward against three zeros). ``FLAT`` decides per prompt from the
prompt's number in this process's generate calls and the rank; tests/workers/planted_spread_helix.py
runs it under torchrun."""

import os

from rollout.engines import Completion
from tests.helpers.scripted import ScriptedEngine


def first_two_flat(number: int, rank: int) -> bool:
    return number < 2


def never_spread(number: int, rank: int) -> bool:
    return True


def rank_one_flat(number: int, rank: int) -> bool:
    return rank == 1


class PlantedSpreadEngine(ScriptedEngine):
    FLAT = staticmethod(first_two_flat)
    calls: list[int] = []  # prompts per generate call, in order (a round each)

    def generate(self, prompts, params):
        rank = int(os.environ.get("RANK", "0"))
        first = sum(self.calls)
        self.calls.append(len(prompts))
        out = []
        for k, _ in enumerate(prompts):
            flat = self.FLAT(first + k, rank)
            group = []
            for g in range(params.n):
                text = self.texts[0 if flat else g % len(self.texts)]
                ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
                group.append(Completion(ids, text, False))
            out.append(group)
        return out

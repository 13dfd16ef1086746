"""Rank 0's evolutionary state: the archive D, the kNN index over programs, the population P_t.

The selection pool is every child that is a program (a completion whose edits applied),
with its reward, its eq.-6 diversity, and the tag of the population slot it was prompted
from. Children whose edits failed are archived with their lineage and feedback, but they
are no new program, so they neither join the pool nor pull their parent's diversity to 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from train.config import HelixConfig


@dataclass(frozen=True)
class Parent:
    solution: object  # population.archive.Solution
    tag: int  # the slot's tag, inherited by every child of this prompt


class Evolution:
    def __init__(self, cfg: HelixConfig, archive_path: Path, task, evaluator, resume: dict | None = None):
        """A new run seeds the archive with the starter program; ``resume`` (a checkpoint's
        ``state_dict()`` plus its archive pointer) rewinds the archive to it instead."""
        from population.archive import Archive
        from population.diversity import make_knn_index
        from population.embedding import Embedder
        from population.selection import make_strategy

        self.cfg = cfg
        self.task = task
        self.evaluator = evaluator
        self.archive = Archive(archive_path)
        self.embedder = Embedder(cfg.population.embedder, batch_size=cfg.population.embed_batch_size,
                                 canonical=cfg.population.canonicalize)
        self.index = make_knn_index(cfg.population.knn_index, cfg.population.knn_k)
        self.strategy = make_strategy(cfg.selection.strategy, n_islands=cfg.selection.n_islands,
                                      reset_every=cfg.selection.reset_every)
        self.pool_ids: list[int] = []  # archive id of each pool (= kNN index) row
        self.pool_rewards: list[float] = []
        self.pool_valid: list[bool] = []
        self.pool_tags: list[int] = []
        self.pop_ids: list[int] = []
        self.pop_tags: list[int] = []
        self.embedded_last = 0
        if resume is not None:
            self.load_state_dict(resume)
        elif self.archive.count():
            raise RuntimeError(f"{archive_path} already holds a run: choose a new run.name, or continue it with "
                               f"--resume {archive_path.parent}")
        else:
            self._seed()

    _LISTS = ("pool_ids", "pool_rewards", "pool_valid", "pool_tags", "pop_ids", "pop_tags")

    def state_dict(self) -> dict[str, np.ndarray]:
        """Everything selection needs besides the archive rows: the pool, P_t, the kNN index
        (bit-exact, so a resumed run selects exactly as an uninterrupted one) and strategy state."""
        state = {name: np.asarray(getattr(self, name)) for name in self._LISTS}
        state.update({f"index/{k}": v for k, v in self.index.state_dict().items()})
        if hasattr(self.strategy, "state_dict"):
            state.update({f"strategy/{k}": v for k, v in self.strategy.state_dict().items()})
        state["archive/max_id"] = np.asarray(self.archive.max_id())
        return state

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        epoch = int(state["archive/epoch"])
        moved = self.archive.rewind(int(state["archive/max_id"]), epoch)
        if moved:
            print(f"[helix] resume: {moved} solutions from the unfinished epoch {epoch + 1} moved to "
                  "discarded_solutions", flush=True)
        for name in self._LISTS:
            values = state[name].tolist()
            setattr(self, name, [bool(v) for v in values] if name == "pool_valid" else values)
        self.index.load_state_dict({k.split("/", 1)[1]: v for k, v in state.items() if k.startswith("index/")})
        if hasattr(self.strategy, "load_state_dict"):
            self.strategy.load_state_dict({k.split("/", 1)[1]: v for k, v in state.items() if k.startswith("strategy/")})
        if len(self.index) != len(self.pool_ids):
            raise RuntimeError(f"checkpoint is inconsistent: {len(self.index)} indexed programs, {len(self.pool_ids)} pool rows")

    def _seed(self) -> None:
        """Epoch 0: the task's starter program, evaluated like any child, seeds the population."""
        result = self.evaluator.evaluate(self.task.initial_program)
        (root,) = self.archive.add_many([dict(
            parent_id=None, epoch=0, code=self.task.initial_program, reward=result.reward, valid=result.valid,
            feedback=result.feedback, metrics=result.metrics, eval_time_s=result.eval_time_s, prompt_id=None, completion=None)])
        self._index([root], [self.task.initial_program], [result.reward], [result.valid], [-1])
        self.select(0, np.random.default_rng([self.cfg.run.seed, 0]))
        print(f"[helix] initial program: reward {result.reward:.6g} ({result.status}); {result.feedback[:200]}", flush=True)

    def _index(self, ids, codes, rewards, valid, tags) -> None:
        emb, hashes, self.embedded_last = self.embedder.embed_cached(codes, self.archive.cached_embedding)
        self.archive.put_embeddings(ids, emb, hashes)
        self.index.add(emb)
        self.pool_ids.extend(ids)
        self.pool_rewards.extend(rewards)
        self.pool_valid.extend(valid)
        self.pool_tags.extend(tags)

    def sample_parents(self, rng: np.random.Generator) -> list[Parent]:
        from population.sampling import sample_parents

        if not self.cfg.population.enabled:
            return [Parent(self.archive.get(self.pop_ids[0]), -1) for _ in range(self.cfg.trainer.prompts_per_epoch)]
        rewards = self.archive.rewards(self.pop_ids)
        slots = sample_parents(rewards, self.cfg.trainer.prompts_per_epoch, rng, mode=self.cfg.population.parent_sampling)
        return [Parent(self.archive.get(self.pop_ids[s]), self.pop_tags[s]) for s in slots]

    def add_children(self, rows: list[dict], is_program: list[bool], tags: list[int]) -> list[int]:
        """Archive every child; programs also join the kNN index and the selection pool."""
        ids = self.archive.add_many(rows)
        self.embedded_last = 0
        keep = [i for i, ok in enumerate(is_program) if ok]
        if keep:
            self._index([ids[i] for i in keep], [rows[i]["code"] for i in keep], [rows[i]["reward"] for i in keep],
                        [rows[i]["valid"] for i in keep], [tags[i] for i in keep])
        return ids

    def select(self, epoch: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """P_{t+1} = strategy(D) on (reward, Div). Returns Div of every pool row and the survivors' rows."""
        from population.selection import Pool

        diversity = self.index.diversity()
        rows = np.arange(len(self.pool_ids))
        if not self.cfg.selection.include_invalid and any(self.pool_valid):
            rows = rows[np.asarray(self.pool_valid)]
        pool = Pool(np.asarray(self.pool_rewards)[rows], diversity[rows], np.asarray(self.pool_tags)[rows], epoch)
        if self.cfg.population.enabled:
            chosen, tags = self.strategy.select(pool, self.cfg.population.size, rng)
            chosen = rows[chosen]
        else:  # TrainOnly / BestOfN: every prompt starts from the starter program (pool row 0)
            chosen, tags = np.array([0]), np.array([-1])
        self.pop_ids = [self.pool_ids[i] for i in chosen]
        self.pop_tags = [int(t) for t in tags]
        self.archive.set_population(epoch, self.pop_ids, self.pop_tags, diversity[chosen].tolist())
        return diversity, chosen

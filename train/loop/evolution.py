"""Rank 0's evolutionary state: the archive D, the kNN index over programs, the population P_t.

The selection pool is every child that is a program (a completion whose edits applied and
changed it), one row of ``pool`` each: archive id, reward, validity, and the tag of the
population slot it was prompted from; row i is also row i of the kNN index. Children whose
edits failed or changed nothing (and, under ``evolution.repeats: zero``, repeats of an archived
program) are archived with their lineage and feedback, but they are no new program, so they
neither join the pool nor pull their parent's diversity to 0; nor do the children the novelty gate
holds back (``novelty_gate``, train/loop/novelty.py). ``population``
is P_t: one row per slot, the pool row's archive id and the slot's tag. Where the task declares
objectives (task.yaml ``objectives``), ``objective_values`` holds each pool row's raw value of
each (NaN where the child has none), oriented for selection only when it selects
(population/objectives.py), so a checkpoint stores what the children reported. A search-form task
(task.yaml ``form: search``) archives each valid child's construction with it; the seed evaluation's is
the run's root construction, and ``construction_for`` says what a parent's children are handed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from population.archive import Archive
from population.child import Child
from population.embedding import Embedder
from population.knn_index import make_knn_index
from population.lineage_stats import LineageStats
from population.objectives import archived_values, oriented, raw_values
from population.pairing import choose_mate, choose_shots
from population.puct import puct_pass
from population.sampling import sample_parents
from population.selection import Pool, make_strategy
from train.config.config import HelixConfig
from train.loop.children import child_seed
from train.loop.novelty import NoveltyGate

POOL = np.dtype([("id", np.int64), ("reward", np.float64), ("valid", np.bool_), ("tag", np.int64)])
SLOTS = np.dtype([("id", np.int64), ("tag", np.int64)])
# Checkpoint keys of the table columns (kept from the earlier parallel lists: old checkpoints load).
_COLUMNS = {"pool_ids": ("pool", "id"), "pool_rewards": ("pool", "reward"), "pool_valid": ("pool", "valid"),
            "pool_tags": ("pool", "tag"), "pop_ids": ("population", "id"), "pop_tags": ("population", "tag")}
# Checkpoint keys of the declared objectives' values (written only for a task that declares any).
OBJECTIVE_VALUES, OBJECTIVE_NAMES = "pool_objectives", "pool_objective_names"


@dataclass(frozen=True)
class Parent:
    solution: object  # population.archive.Solution
    tag: int  # the slot's tag, inherited by every child of this prompt


class Evolution:
    def __init__(self, cfg: HelixConfig, archive_path: Path, task, evaluator, resume: dict | None = None):
        """A new run seeds the archive with the starter program; ``resume`` (a checkpoint's
        ``state_dict()`` plus its archive pointer) rewinds the archive to it instead."""
        self.cfg = cfg
        self.task = task
        self.evaluator = evaluator
        self.archive = Archive(archive_path)
        self.embedder = Embedder(cfg.population.embedder, batch_size=cfg.population.embed_batch_size,
                                 canonical=cfg.population.canonicalize)
        self.index = make_knn_index(cfg.population.knn_index, cfg.population.knn_k)
        self.strategy = make_strategy(cfg.selection.strategy, n_islands=cfg.selection.n_islands,
                                      reset_every=cfg.selection.reset_every)
        self.pool = np.zeros(0, POOL)  # one row per program child (= kNN index row)
        self.objectives = tuple(getattr(task, "objectives", ()))  # tasks.base.Objective, task.yaml order
        self.objective_values = np.zeros((0, len(self.objectives)))  # raw value per pool row and objective
        self.population = np.zeros(0, SLOTS)  # P_t, one row per slot
        self.embedded_last = 0
        # Code hash of every program archived -> the first id with it. A dict beside the archive's
        # code_hash index because ``archived`` runs on the evaluation thread, which may not use
        # the archive's SQLite connection.
        self.known: dict[str, int] = {}
        # population.parent_sampling: puct: what each archived solution's descendants reached, and its visits
        self.lineage = LineageStats() if cfg.population.parent_sampling == "puct" else None
        if resume is not None:
            self.load_state_dict(resume)
        elif self.archive.count():
            raise RuntimeError(f"{archive_path} already holds a run: choose a new run.name, or continue it with "
                               f"--resume {archive_path.parent}")
        else:
            self._seed()

    def state_dict(self) -> dict[str, np.ndarray]:
        """Everything selection needs besides the archive rows: the pool, P_t, the kNN index
        (bit-exact, so a resumed run selects exactly as an uninterrupted one) and strategy state."""
        state = {key: getattr(self, table)[column].copy() for key, (table, column) in _COLUMNS.items()}
        state.update({f"index/{k}": v for k, v in self.index.state_dict().items()})
        if hasattr(self.strategy, "state_dict"):
            state.update({f"strategy/{k}": v for k, v in self.strategy.state_dict().items()})
        state["archive/max_id"] = np.asarray(self.archive.max_id())
        if self.objectives:
            state[OBJECTIVE_VALUES] = self.objective_values.copy()
            state[OBJECTIVE_NAMES] = np.array(self._objective_names(), dtype=np.str_)
        if self.lineage is not None:
            state.update({f"lineage/{k}": v for k, v in self.lineage.state_dict().items()})
        return state

    def _objective_names(self) -> list[str]:
        return [o.metric for o in self.objectives]

    def _load_objective_values(self, state: dict[str, np.ndarray]) -> np.ndarray:
        """The checkpoint's values where it holds the task's objectives; else (a checkpoint from before
        them, or task.yaml's objectives changed since) read again from the archive, which stores every
        child's metrics and eval_time_s: the same numbers, so selection is the same."""
        names = self._objective_names()
        if OBJECTIVE_NAMES in state and [str(n) for n in state[OBJECTIVE_NAMES].tolist()] == names:
            return np.array(state[OBJECTIVE_VALUES], dtype=np.float64).reshape(len(self.pool), len(names))
        if not names:
            return np.zeros((len(self.pool), 0))
        print(f"[helix] resume: the checkpoint holds no values of the objectives {names}; read from the archive", flush=True)
        return archived_values(self.archive, self.pool["id"].tolist(), names)

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        epoch = int(state["archive/epoch"])
        moved = self.archive.rewind(int(state["archive/max_id"]), epoch)
        if moved:
            print(f"[helix] resume: {moved} solutions from the unfinished epoch {epoch + 1} moved to "
                  "discarded_solutions", flush=True)
        self.pool = np.zeros(len(state["pool_ids"]), POOL)
        self.population = np.zeros(len(state["pop_ids"]), SLOTS)
        for key, (table, column) in _COLUMNS.items():
            getattr(self, table)[column] = state[key]
        self.objective_values = self._load_objective_values(state)
        self.known = self.archive.program_hashes()
        self.index.load_state_dict({k.split("/", 1)[1]: v for k, v in state.items() if k.startswith("index/")})
        if hasattr(self.strategy, "load_state_dict"):
            self.strategy.load_state_dict({k.split("/", 1)[1]: v for k, v in state.items() if k.startswith("strategy/")})
        if len(self.index) != len(self.pool):
            raise RuntimeError(f"checkpoint is inconsistent: {len(self.index)} indexed programs, {len(self.pool)} pool rows")
        if self.lineage is not None:
            self.lineage = self._load_lineage(state)

    def _load_lineage(self, state: dict[str, np.ndarray]) -> LineageStats:
        """The checkpoint's lineage statistics; else (a checkpoint written under another parent_sampling)
        counted from the rewound archive in one pass: the same numbers, as they are a function of its rows."""
        saved = {k.split("/", 1)[1]: v for k, v in state.items() if k.startswith("lineage/")}
        if saved:
            return LineageStats.from_state(saved)
        print("[helix] resume: the checkpoint holds no lineage statistics for parent_sampling puct; counted from "
              "the archive", flush=True)
        ids, parents, _, rewards, valid = zip(*self.archive.scores())
        return LineageStats.from_rows(ids, parents, rewards, valid)

    def _seed(self) -> None:
        """Epoch 0: the task's starter program, evaluated like any child, seeds the population. A search-form
        starter is called with no construction (it builds its own): what it returns is the root construction."""
        search = getattr(self.task, "form", "construct") == "search"
        call = dict(construction=None, seed=child_seed(self.cfg.run.seed, 0, 0, 0)) if search else {}
        result = self.evaluator.evaluate(self.task.initial_program, **call)
        extra = dict(construction=result.construction) if search else {}
        (root,) = self.archive.add_many([dict(
            parent_id=None, epoch=0, code=self.task.initial_program, reward=result.reward, valid=result.valid,
            feedback=result.feedback, metrics=result.metrics, eval_time_s=result.eval_time_s, prompt_id=None, completion=None,
            exact=result.exact, **extra)])
        if self.lineage is not None:
            self.lineage.add([root], [None], [result.reward], [result.valid])
        self._index([root], [self.task.initial_program], np.array([(root, result.reward, result.valid, -1)], POOL),
                    raw_values([(result.metrics, result.eval_time_s)], self._objective_names()))
        self.select(0, np.random.default_rng([self.cfg.run.seed, 0]))
        print(f"[helix] initial program: reward {result.reward:.6g} ({result.status}); {result.feedback[:200]}", flush=True)

    def _index(self, ids: list[int], codes: list[str], rows: np.ndarray, values: np.ndarray,
               fresh: dict[str, np.ndarray] | None = None) -> None:
        """``values``: the rows' raw objective values. ``fresh``: embeddings the novelty gate already
        made, by code hash: taken as they are."""
        lookup = self.archive.cached_embedding
        if fresh:
            def lookup(h: str) -> np.ndarray | None:
                return fresh[h] if h in fresh else self.archive.cached_embedding(h)
        emb, hashes, self.embedded_last = self.embedder.embed_cached(codes, lookup)
        self.archive.put_embeddings(ids, emb, hashes)
        for sid, h in zip(ids, hashes):
            self.known.setdefault(h, sid)
        self.index.add(emb)
        self.pool = np.concatenate([self.pool, rows])
        self.objective_values = np.concatenate([self.objective_values, values])

    def construction_for(self, sid: int) -> tuple[int, str] | None:
        """What a child of ``sid`` is handed (search form): (the id it comes from, its JSON text), ``sid``'s own
        or, for an invalid parent, its nearest valid ancestor's (population.archive.Archive.construction_for);
        None: start from nothing, as the run's first call did."""
        return self.archive.construction_for(sid)

    def archived(self, code: str) -> int | None:
        """The archive id of a program with this code (up to layout and comments, as the embedding
        cache keys it), or None. Thread-safe to read while no children are being added."""
        return self.known.get(self.embedder.code_hash(code))

    def novelty_gate(self, jobs) -> NoveltyGate | None:
        """The epoch's novelty gate over the pool as it stands (None: evolution.novelty_threshold is 0).
        Built on the main thread: it reads the parents' embeddings from the archive here."""
        threshold = self.cfg.evolution.novelty_threshold
        if not threshold:
            return None
        ids = sorted({j.parent_id for j in jobs} | {j.mate_id for j in jobs if j.mate_id is not None})
        parents = dict(zip(ids, self.archive.get_embeddings(ids))) if ids else {}
        return NoveltyGate(threshold, self.embedder, self.index, self.pool["id"], self.pool["reward"], parents)

    def sample_parents(self, rng: np.random.Generator, count: int | None = None) -> list[Parent]:
        """``count`` parents from P_t (default trainer.prompts_per_epoch, B)."""
        ids = self.population["id"].tolist()
        count = self.cfg.trainer.prompts_per_epoch if count is None else count
        if not self.cfg.population.enabled:
            return [Parent(self.archive.get(ids[0]), -1) for _ in range(count)]
        rewards = self.archive.rewards(ids)
        if self.lineage is not None:
            slots = self._puct_slots(rewards, count, rng)
        else:
            slots = sample_parents(rewards, count, rng, mode=self.cfg.population.parent_sampling)
        return [Parent(self.archive.get(ids[s]), int(self.population["tag"][s])) for s in slots]

    def _puct_slots(self, rewards: np.ndarray, count: int, rng: np.random.Generator) -> list[int]:
        """TTT-Discover's PUCT passes over P_t (population/puct.py) until ``count`` are picked; each pick
        reserves the G children it will bring, so the next pass (and a dynamic-sampling round) sees them."""
        ids, pop = self.population["id"], self.cfg.population
        slots: list[int] = []
        while len(slots) < count:
            best, visits, total, related = self.lineage.view(ids, pop.puct_value)
            for s in puct_pass(count - len(slots), rewards, best, visits, total, related, pop.puct_c, rng).tolist():
                self.lineage.reserve(int(ids[s]), self.cfg.rollout.group_size)
                slots.append(s)
        return slots

    def mate(self, parent_id: int, tag: int):
        """Crossover's second parent (population.pairing.choose_mate), or None."""
        mate = choose_mate(parent_id, tag, self.population["id"], self.population["tag"], self.archive.get_embeddings)
        return None if mate is None else self.archive.get(mate)

    def shots(self, parent_id: int, tag: int, k: int) -> list:
        """Best-shot's versions, worst first (population.pairing.choose_shots)."""
        ids = sorted(set(self.population["id"].tolist()) | {parent_id})
        rewards = dict(zip(ids, self.archive.rewards(ids).tolist()))
        return [self.archive.get(i) for i in choose_shots(parent_id, tag, self.population["id"], self.population["tag"],
                                                          rewards, k)]

    def add_children(self, children: list[Child]) -> list[int]:
        """Archive every child; programs also join the kNN index and the selection pool."""
        ids = self.archive.add_many(children)
        if self.lineage is not None:
            self.lineage.add(ids, [c.parent_id for c in children], [c.reward for c in children], [c.valid for c in children])
        self.embedded_last = 0
        keep = [i for i, child in enumerate(children) if child.is_program]
        if keep:
            rows = np.array([(ids[i], children[i].reward, children[i].valid, children[i].tag) for i in keep], POOL)
            fresh = {self.embedder.code_hash(children[i].code): children[i].embedding for i in keep
                     if children[i].embedding is not None}
            values = raw_values([(children[i].metrics, children[i].eval_time_s) for i in keep], self._objective_names())
            self._index([ids[i] for i in keep], [children[i].code for i in keep], rows, values, fresh)
        return ids

    def select(self, epoch: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """P_{t+1} = strategy(D) on (reward, Div) and the task's declared objectives (only nsga2 ranks on
        those). Returns Div of every pool row and the survivors' rows."""
        diversity = self.index.diversity()
        rows = np.arange(len(self.pool))
        if not self.cfg.selection.include_invalid and self.pool["valid"].any():
            rows = rows[self.pool["valid"]]
        extra = oriented(self.objective_values[rows], [o.goal for o in self.objectives]) if self.objectives else None
        pool = Pool(self.pool["reward"][rows], diversity[rows], self.pool["tag"][rows], epoch, objectives=extra)
        if self.cfg.population.enabled:
            chosen, tags = self.strategy.select(pool, self.cfg.population.size, rng)
            chosen = rows[chosen]
        else:  # TrainOnly / BestOfN: every prompt starts from the starter program (pool row 0)
            chosen, tags = np.array([0]), np.array([-1])
        self.population = np.array(list(zip(self.pool["id"][chosen].tolist(), np.asarray(tags).tolist())), SLOTS)
        self.archive.set_population(epoch, self.population["id"].tolist(), self.population["tag"].tolist(),
                                    diversity[chosen].tolist())
        return diversity, chosen

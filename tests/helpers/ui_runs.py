"""A small run for the run-browser tests (tests/runs/test_ui.py, tests/runs/test_ui_browser.py), written with the
real Archive writer: a circle-packing starter, two epochs of GRPO groups (G = 3), a crossover child, an
invalid child, an infra-lost child, and one child whose program, completion and feedback are hostile.
Like the loop (train/loop/advantages.py record_advantages, rewards/evaluator.py keep_artefacts) it records
each child's advantage, each valid program's artefact and the record candidates' exact checks; ``recorded=False``
writes an older run without them."""

import json
import sqlite3
from pathlib import Path

import numpy as np
import yaml

from population.archive import Archive

ROOT = Path(__file__).resolve().parents[2]
INITIAL = (ROOT / "tasks" / "circle_packing_26" / "initial_program.py").read_text()
HOSTILE = ('x = "<script>window.__pwned = 1</script>"\n# <img src=x onerror="window.__pwned = 2">\n'
           '# </textarea><script>window.__pwned = 3</script>\n')
CONFIG = {"task": {"name": "circle_packing_26", "timeout_s": 20.0}, "trainer": {"epochs": 2, "adv_estimator": "grpo",
          "norm_adv_by_std": True}, "rollout": {"n_ancestors": 2, "group_size": 3},
          "population": {"size": 3, "knn_k": 2}, "run": {"name": "uirun", "seed": 0}}


LOOSE = "circles 3 and 7 overlap by 9e-10"  # what the exact check of a within-tolerance best says

# 26 circles of radius 1/12 on a 6 x 5 grid: what a valid program returns (render.py draws it).
ARTEFACT = json.dumps({"centers": [[(i % 6 + 0.5) / 6, (i // 6 + 0.5) / 5] for i in range(26)], "radii": [1 / 12] * 26})


def grpo(rewards: list) -> list:
    """GRPO advantages by hand (verl's grpo, norm by std): (r - mean) / (sample std + 1e-6) over the scored
    rewards (None: lost, no advantage); a group of tied rewards (one member included) gets exactly 0."""
    scored = np.array([r for r in rewards if r is not None])
    if scored.max() == scored.min():
        return [None if r is None else 0.0 for r in rewards]
    return [None if r is None else (r - scored.mean()) / (scored.std(ddof=1) + 1e-6) for r in rewards]


def _record(rows: list[dict], rewards: list) -> list[dict]:
    for row, reward, adv in zip(rows, rewards, grpo(rewards)):
        row.update(advantage=adv, advantage_inputs=dict(estimator="grpo", norm_by_std=True, reward=reward,
                                                         tokens=0 if adv is None else 7))
    return rows


def _row(parent, epoch, code, reward, valid, prompt_id, **kw):
    return dict(parent_id=parent, epoch=epoch, code=code, reward=reward, valid=valid, feedback=kw.pop("feedback", "ok"),
                metrics=kw.pop("metrics", {}), eval_time_s=kw.pop("eval_time_s", 0.25), prompt_id=prompt_id,
                completion=kw.pop("completion", "<answer>edit</answer>"), **kw)


def build_ui_run(run: Path, epochs_logged: int = 2, recorded: bool = True) -> dict:
    """Write the run; returns the ids by name. Epoch 2's group e2-p0 has rewards [1.9, 0.0, (lost)]."""
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump(CONFIG))
    ids = {}
    art = dict(artefact=ARTEFACT) if recorded else {}
    # the exact checks the loop records for record candidates (the starter, each new best): the best holds only
    # within the tolerance, the earlier best exactly (train/loop/records.py)
    loose = dict(exact=dict(status="tolerance_only", detail=LOOSE, value=None)) if recorded else {}
    holds = dict(exact=dict(status="exact", detail="every constraint holds exactly", value=1.85)) if recorded else {}
    with Archive(run / "archive.sqlite") as arch:
        (ids["root"],) = arch.add_many([_row(None, 0, INITIAL, 1.8365, True, None, completion=None, **art, **loose)])
        first = [_row(ids["root"], 1, INITIAL.replace("0.3 *", "0.31 *"), 1.85, True, "e1-p0-g0", **art, **holds),
                 _row(ids["root"], 1, HOSTILE, 0.0, False, "e1-p0-g1", completion="<answer>" + HOSTILE + "</answer>",
                      feedback="failed: " + HOSTILE),
                 _row(ids["root"], 1, INITIAL.replace("0.45 *", "0.44 *"), 1.80, True, "e1-p0-g2", **art)]
        a, b, c = arch.add_many(_record(first, [1.85, 0.0, 1.80]) if recorded else first)
        ids.update(a=a, hostile=b, c=c)
        group = [_row(a, 2, INITIAL.replace("0.3 *", "0.32 *"), 1.9, True, "e2-p0-g0", **art, **loose),
                 _row(a, 2, INITIAL, 0.0, False, "e2-p0-g1", feedback="Edit did not apply", metrics={"edit_failed": 1.0}),
                 _row(a, 2, INITIAL, 0.0, False, "e2-p0-g2", metrics={"infra_error": "worker lost"})]
        cross = [_row(c, 2, INITIAL.replace("0.45 *", "0.43 *"), 1.7, True, "e2-p1-g0", second_parent_id=a,
                      operator="crossover", **art)]
        if recorded:
            group, cross = _record(group, [1.9, 0.0, None]), _record(cross, [1.7])
        d, e, f, x = arch.add_many(group + cross)
        ids.update(d=d, e=e, lost=f, cross=x)
        arch.set_population(0, [ids["root"]], diversity=[1.0])
        arch.set_population(1, [ids["root"], a, c], diversity=[0.1, 0.5, 0.3])
        arch.set_population(2, [a, d, x], diversity=[0.2, 0.1, 0.6])
    if not recorded:  # an archive from before the advantage and artefact columns
        db = sqlite3.connect(run / "archive.sqlite")
        for table in ("solutions", "discarded_solutions"):
            for column in ("advantage", "advantage_inputs", "artefact", "exact"):
                db.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        db.commit()
        db.close()
    metrics = [{"epoch": 1, "reward_mean": 1.0, "reward_max": 1.85, "best_reward": 1.85, "valid_frac": 0.67, "kl": 0.0,
                "entropy": 0.5, "gen_time_s": 2.0, "eval_time_s": 1.0, "prompt_dropped": []},
               {"epoch": 2, "reward_mean": 1.2, "reward_max": 1.9, "best_reward": 1.9, "valid_frac": 0.5, "kl": 0.01,
                "entropy": 0.4, "gen_time_s": 3.0, "eval_time_s": 1.5,
                "prompt_dropped": [{"prompt": 0, "parent_id": a, "dropped": ["oldest ancestor"]}]}][:epochs_logged]
    with open(run / "metrics.jsonl", "w") as fh:
        fh.writelines(json.dumps(m) + "\n" for m in metrics)
    return ids

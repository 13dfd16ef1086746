"""A run that cannot learn says so, once: for ``run.no_learning_epochs`` epochs in a row (default 2)
no answer became a program (no edit applied), or every GRPO group had zero reward spread (every
step skipped). The warning names the likely cause, read from those epochs' metrics, and its fix.

The causes, in the order they are checked (each explains the symptom better than the next):

* warm start off: a small model prompted cold writes no edit that applies (README "Warm start");
* answers truncated: most completions hit ``rollout.max_new_tokens`` before ``</answer>``;
* equal rewards with programs that run: the children ran but scored alike (edits that change
  nothing, repeats, or a verifier whose reward has too few levels to tell them apart);
* the model too small for this prompt: warm-started, not truncated, and still no edit applies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from train.config.config import HelixConfig


@dataclass
class LearningWatch:
    cfg: HelixConfig
    epochs: int  # run.no_learning_epochs; 0: never warn
    streak: list[dict] = field(default_factory=list)
    warned: bool = False

    @staticmethod
    def stuck(m: dict) -> bool:
        no_program = (m.get("n_programs") or 0) == 0 or (m.get("edit_fail_frac") or 0.0) >= 1.0
        no_spread = (m.get("zero_std_frac") or 0.0) >= 1.0
        return no_program or no_spread

    def update(self, metrics: dict) -> str | None:
        """Feed one epoch's metrics row; the warning (once per run) when the streak is long enough."""
        if self.warned or self.epochs <= 0:
            return None
        self.streak = self.streak + [metrics] if self.stuck(metrics) else []
        if len(self.streak) < self.epochs:
            return None
        self.warned = True
        return self.warning(self.streak)

    def warning(self, rows: list[dict]) -> str:
        cfg, n = self.cfg, len(rows)

        def mean(key: str) -> float:
            return sum(r.get(key) or 0.0 for r in rows) / n

        first, last = rows[0]["epoch"], rows[-1]["epoch"]
        span = f"epoch {first}" if first == last else f"epochs {first}-{last}"
        applied = mean("n_programs") > 0 and mean("edit_fail_frac") < 1.0
        what = ("every GRPO group had zero reward spread, so every step was skipped" if applied else
                f"no answer's edit applied (nofit {mean('edit_fail_frac'):.2f}), so every reward tied at 0 and "
                "every GRPO step was skipped")
        head = f"[helix] warning: this run is not learning: in {span} {what}. Likely cause: "
        truncated = mean("truncated_frac")
        if not cfg.warm_start.enabled and not applied:
            cause = ("warm start off (warm_start.enabled: false): a small model prompted cold writes no edit that "
                     f"applies ({truncated:.0%} of its answers ran past rollout.max_new_tokens). Fix: "
                     "warm_start.enabled=true, or run the task on configs/quickstart.yaml (task.name=<task>), which "
                     "builds the task's warm start once and caches it")
        elif truncated >= 0.5:
            cause = (f"answers truncated ({truncated:.0%} hit rollout.max_new_tokens = "
                     f"{cfg.rollout.max_new_tokens} before </answer>). Fix: raise rollout.max_new_tokens, or set "
                     "rollout.stop: \"</answer>\" so an answer ends where its edit does")
        elif applied:
            cause = (f"the children ran but scored alike (valid {mean('valid_frac'):.2f}, same "
                     f"{mean('unchanged_frac'):.2f}, rep {mean('repeat_frac'):.2f}). Fix: a verifier reward that "
                     "tells programs apart (not pass/fail), rollout.temperature higher, or rollout.group_size larger")
        else:
            cause = (f"the model too small for this prompt ({cfg.model.policy}; "
                     f"{mean('prompt_items_dropped'):.1f} prompt items cut per epoch to fit rollout.max_prompt_tokens "
                     f"= {cfg.rollout.max_prompt_tokens}). Fix: a shorter description (a brief.md with "
                     "rollout.description=brief), a smaller starter program, or a larger model.policy")
        return head + cause + f" (run.no_learning_epochs={self.epochs} sets when this warns; 0: never)"

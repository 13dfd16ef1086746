"""Build the policy prompt q of paper eq. 5 from the problem, the parent and its ancestors.

The prompt holds the problem p, the parent's code with its reward R and feedback F, and up to
n-1 ancestors, each shown as the diff it led to plus its R and F. It is rendered with the
model's chat template, and a token budget is enforced: oldest ancestors go first, then the
parent's feedback is shortened, then the program's middle. Whatever was dropped is recorded.

The user message comes from a template: DEFAULT_TEMPLATE, or a task's own ``prompt.md`` (loaded and
checked by tasks.base, passed here as ``template``). Its placeholders are tasks.template.PLACEHOLDERS; {parent} and
{contract} are required, because without them the policy cannot see what to edit or how to answer.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Protocol

from tasks.template import check_template

SYSTEM_PROMPT = (
    "You are an expert software developer tasked with iteratively improving a codebase.\n"
    "Your job is to analyze the current program and suggest improvements based on feedback from previous attempts.\n"
    "Focus on making targeted changes that will increase the program's performance metrics.\n"
    "Respond in the following format: <think>\n...\n</think>\n<answer>\n...\n</answer>."
)

CONTRACT = """## Task
Suggest improvements to the program that will lead to better performance on the specified metrics.

You MUST use the exact SEARCH/REPLACE diff format shown below inside <answer> to indicate changes:

<<<<<<< SEARCH
# Original code to find and replace (must match exactly)
=======
# New replacement code
>>>>>>> REPLACE

You can suggest multiple changes. Each SEARCH section must exactly match code in the current program.
Make sure your program still contains the {entry_function}() function and returns the same kind of result.
{limit}"""


def limit_sentence(timeout: str, form: str = "construct", subject: str = "your program") -> str:
    """The contract's last sentence: what running past the time limit costs. A search-form program
    (tasks/base.py ``form``) keeps the last construction it reported, so "0 reward" would be false there."""
    if form == "search":
        return (f"{subject[0].upper()}{subject[1:]} is stopped after {timeout} seconds; the last construction it "
                "passed to report() then counts (none reported: 0 reward).")
    return f"If {subject} runs longer than {timeout} seconds it receives 0 reward."

# The user message, paragraphs separated by blank lines. A paragraph that is only {ancestors} is
# left out when the parent has no ancestors, so no empty section or stray blank line remains.
DEFAULT_TEMPLATE = """# Problem Description

{description}

{ancestors}

{parent}

{contract}"""

class Candidate(Protocol):
    """What a prompt needs from a solution (population.archive.Solution satisfies it)."""

    code: str
    reward: float
    valid: bool
    feedback: str


@dataclass(frozen=True)
class Prompt:
    text: str  # chat-templated, ready to tokenize
    token_ids: list[int]
    parent_id: int | None
    dropped: list[str] = field(default_factory=list)  # what the budget removed, for the run log


def status_line(sol: Candidate, limit: int | None = None) -> str:
    feedback = sol.feedback.strip() or "(none)"
    if limit is not None and len(feedback) > limit:
        feedback = feedback[:limit] + " ...(truncated)"
    state = "valid" if sol.valid else "invalid"
    return f"reward {sol.reward:.6g} ({state}). Feedback: {feedback}"


def current_program(parent: Candidate, code: str, feedback_limit: int | None) -> str:
    """The {parent} section of the paper's prompt: the program to improve, with its status."""
    return f"## Current Program\nStatus: {status_line(parent, feedback_limit)}\n```python\n{code}\n```"


def _diff(old: str, new: str) -> str:
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), "before", "after", n=2, lineterm="")
    return "\n".join(lines) or "(no code change)"


def cut_middle(code: str, cut: int) -> str:
    """``code`` with ``cut`` lines taken out of its middle, where a marker line says so."""
    lines = code.split("\n")
    cut = min(len(lines) - 2, cut)
    if cut <= 0:
        return code
    start = max(1, len(lines) // 2 - cut // 2)
    return "\n".join(lines[:start] + ["# ... (lines omitted to fit the prompt budget)"] + lines[start + cut :])


class Layout(Protocol):
    """How an operator (rollout.operators) shows its programs; None: one parent to edit."""

    lineage: bool  # the parent's ancestors are shown

    def current(self, parent: Candidate, codes: list[str], others: list[Candidate], feedback_limit: int | None) -> str:
        """The {parent} section: ``codes`` are the parent's and then each other program's code, cut to budget."""

    def contract(self, entry_function: str, timeout: str, others: list[Candidate], form: str = "construct") -> str: ...


class PromptBuilder:
    def __init__(self, tokenizer, description: str, entry_function: str, timeout_s: float,
                 max_prompt_tokens: int, n_ancestors: int, template: str | None = None, form: str = "construct"):
        """``timeout_s`` must be the limit the evaluator enforces (task.timeout_s, else the task's own):
        the prompt states it. ``template`` is the task's prompt.md (Task.prompt_template); None is
        DEFAULT_TEMPLATE. ``form``: the task's (Task.form), for what the contract says the limit costs."""
        self.tokenizer = tokenizer
        self.template = DEFAULT_TEMPLATE if template is None else template
        names = check_template(self.template, "prompt template")
        self._template_no_lineage = "\n\n".join(p for p in self.template.split("\n\n") if p.strip() != "{ancestors}")
        timeout = f"{timeout_s:g}"
        self.entry_function, self.timeout, self.form = entry_function, timeout, form
        self.fields = {"description": description.strip(), "entry_function": entry_function, "timeout": timeout,
                       "contract": CONTRACT.format(entry_function=entry_function, limit=limit_sentence(timeout, form))}
        self.max_prompt_tokens = max_prompt_tokens
        # A template without {ancestors} never shows them, so build() ignores them (nothing "dropped").
        self.n_ancestors = n_ancestors if "ancestors" in names else 0

    def _render(self, parent: Candidate, ancestors: list[Candidate], feedback_limit: int | None, codes: list[str],
                layout: Layout | None, others: list[Candidate]) -> str:
        lineage = ""
        if ancestors:
            parts = ["## Previous attempts in this lineage (oldest first)"]
            chain = list(reversed(ancestors)) + [parent]
            for depth, (old, new) in enumerate(zip(chain, chain[1:]), start=1):
                parts.append(f"### Attempt {depth}: {status_line(old, 300)}\nChange it led to:\n```diff\n{_diff(old.code, new.code)}\n```")
            lineage = "\n\n".join(parts)
        fields = self.fields
        if layout is None:
            current = current_program(parent, codes[0], feedback_limit)
        else:
            current = layout.current(parent, codes, others, feedback_limit)
            fields = dict(fields, contract=layout.contract(self.entry_function, self.timeout, others, self.form))
        template = self.template if ancestors else self._template_no_lineage
        user = template.format(**fields, ancestors=lineage, parent=current)
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def _tokens(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def build(self, parent: Candidate, ancestors: list[Candidate] = (), parent_id: int | None = None,
              layout: Layout | None = None, others: list[Candidate] = ()) -> Prompt:
        """``ancestors`` is nearest first (parent's parent, ...), as Archive.ancestors returns them.
        ``layout``/``others``: an operator's way of showing the parent and its other programs (a
        second parent, earlier versions); None: the paper's edit prompt."""
        others = list(others)
        ancestors = list(ancestors)[: self.n_ancestors] if layout is None or layout.lineage else []
        dropped: list[str] = []
        codes = [parent.code] + [o.code for o in others]
        feedback_limit: int | None = None
        while True:
            text = self._render(parent, ancestors, feedback_limit, codes, layout, others)
            ids = self._tokens(text)
            if len(ids) <= self.max_prompt_tokens:
                return Prompt(text, ids, parent_id, dropped)
            if ancestors:
                ancestors.pop()  # the oldest one
                dropped.append("oldest ancestor")
            elif feedback_limit != 0:
                feedback_limit = 100 if feedback_limit is None else 0
                dropped.append("parent feedback shortened")
            else:
                lines = codes[0].split("\n")
                if len(lines) < 4:
                    raise ValueError(f"prompt exceeds max_prompt_tokens={self.max_prompt_tokens} even with no program; raise the budget")
                cut = min(len(lines) - 2, (len(ids) - self.max_prompt_tokens) // 8 + 2)  # ~8 tokens a line
                codes = [cut_middle(code, cut) for code in codes]
                dropped.append(f"{cut} program lines" + (f" in each of {len(codes)} programs" if others else ""))

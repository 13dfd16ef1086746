"""The placeholders of a task's prompt.md and their check, part of the task contract: a bad
template fails when the task loads, not at the first prompt. rollout.prompts fills them in."""

from __future__ import annotations

import difflib
import string

PLACEHOLDERS = {
    "description": "the task's description.md",
    "entry_function": "the entry function's name, e.g. run_packing",
    "timeout": "the enforced time limit in seconds, e.g. 20 (task.timeout_s, else the task's timeout_s)",
    "ancestors": "'## Previous attempts in this lineage (oldest first)' and one diff per ancestor; empty if none",
    "parent": "'## Current Program': the parent's reward, feedback and code",
    "contract": "'## Task': the SEARCH/REPLACE answer format, the entry function and the time limit",
}
REQUIRED = ("parent", "contract")


def check_template(template: str, where: str) -> set[str]:
    """The placeholders ``template`` uses; raises ValueError naming ``where`` and the placeholder for an
    unknown or missing one, so a bad prompt.md fails at task load, not at the first prompt."""
    try:
        fields = [(name, spec, conv) for _, name, spec, conv in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        raise ValueError(f"{where}: {exc} (write a literal brace as {{{{ or }}}})") from None
    for name, spec, conv in fields:
        if name not in PLACEHOLDERS:
            near = difflib.get_close_matches(name, PLACEHOLDERS, n=1, cutoff=0.6)
            hint = f" Did you mean {{{near[0]}}}?" if near else ""
            raise ValueError(f"{where}: unknown placeholder {{{name}}}.{hint} Placeholders: "
                             f"{', '.join('{' + p + '}' for p in PLACEHOLDERS)} (a literal brace is {{{{ or }}}})")
        if spec or conv:
            raise ValueError(f"{where}: placeholder {{{name}}} takes no format spec or conversion; write {{{name}}}")
    names = {name for name, _, _ in fields}
    for name in REQUIRED:
        if name not in names:
            raise ValueError(f"{where}: missing the required placeholder {{{name}}} ({PLACEHOLDERS[name]})")
    return names

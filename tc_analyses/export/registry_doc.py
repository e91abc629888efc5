"""The analyses' index and event table in docs/analyses-seed/README.md, made from the registry
(kept in sync by a test; ``scripts/update_docs.py`` rewrites them)."""

from __future__ import annotations

from tc_analyses.export.schema_doc import replace_section
from tc_analyses.registry import ANALYSES, NEEDED, USED
from tracer import schema

BEGIN = "<!-- BEGIN ANALYSES (generated from tc_analyses/registry.py by scripts/update_docs.py; do not edit) -->"
END = "<!-- END ANALYSES -->"
MARK = {NEEDED: "✓", USED: "○"}


def _rows() -> list[tuple[str, list[str]]]:
    """One row per event class an analysis reads; a begin/end pair read alike shares a row."""
    used = [c for c in schema.CATALOGUE if any(c.short in a.events for a in ANALYSES)]
    rows, skip = [], set()
    for cls in used:
        if cls.short in skip:
            continue
        marks = [MARK.get(a.events.get(cls.short, ""), "") for a in ANALYSES]
        pair = next((c for c in used if c.short == _partner(cls.short)), None)
        if pair is not None and [MARK.get(a.events.get(pair.short, ""), "") for a in ANALYSES] == marks:
            skip.add(pair.short)
            rows.append((f"`{cls.name}` / `{pair.name}`", marks))
        else:
            rows.append((f"`{cls.name}`", marks))
    return rows


def _partner(short: str) -> str:
    for a, b in (("_begin", "_end"), ("_enter", "_exit"), ("_alloc", "_free")):
        if short.endswith(a):
            return short[: -len(a)] + b
    return ""


def render_analyses() -> str:
    lines = [BEGIN, "", "| analysis | command | page |", "|---|---|---|"]
    lines += [f"| {a.title} | `dfcompass {a.key}` | [{a.key}.md]({a.key}.md) |" for a in ANALYSES]
    lines += ["", "Which events each analysis reads (✓ = needed, ○ = used when present):", ""]
    lines += ["| event | " + " | ".join(a.key for a in ANALYSES) + " |", "|---|" + "---|" * len(ANALYSES)]
    lines += [f"| {name} | " + " | ".join(marks) + " |" for name, marks in _rows()]
    lines += ["", END]
    return "\n".join(lines)


def replace_analyses(document: str) -> str:
    """`document` with its generated section replaced by the current registry."""
    return replace_section(document, BEGIN, END, render_analyses())

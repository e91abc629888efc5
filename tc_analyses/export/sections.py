"""The registered analyses of one trace as report sections, shared by `dfcompass analyze`, `report`
and `demo`.

Each section runs one entry of :mod:`tc_analyses.registry` on the trace's shared inputs (read
once), renders it as text and, when asked, writes its plots. An analysis the trace cannot feed
(:class:`~tc_analyses.errors.AnalysisUnavailable`: a CPU-only trace has no kernels for the
overhead analysis, a trace without shapes has no roofline) gives a section whose text says why,
not an error: the other sections are still worth
reading.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tc_analyses.analyses.result import Result
from tc_analyses.registry import Entry


@dataclass
class SeedSection:
    """One analysis of one trace: its result, or the reason it is not available."""

    entry: Entry
    result: Result | None
    text: str  # the rendered report, or "not available: <reason>"
    plots: list[Path] = field(default_factory=list)

    @property
    def key(self) -> str:
        return self.entry.key

    @property
    def title(self) -> str:
        return self.entry.title

    @property
    def available(self) -> bool:
        return self.result is not None

    def headline(self) -> str:
        """The first finding (or why the section is unavailable), on one line."""
        if self.result is None:
            return self.text.splitlines()[0] if self.text else ""
        return self.result.headline()

    def to_json(self) -> dict[str, Any]:
        """``{"available": false, "reason": ...}`` or ``{"available": true, **Result.to_json()}``."""
        if self.result is None:
            return {"available": False, "reason": self.text.removeprefix("not available: ").strip()}
        return {"available": True, **self.result.to_json()}


def sections_json(sections: list[SeedSection]) -> dict[str, Any]:
    """Every section by key."""
    return {s.key: s.to_json() for s in sections}


def sections_text(sections: list[SeedSection]) -> str:
    return "".join(f"\n== {s.title} ==\n{s.text}" for s in sections)


def sections_headlines(sections: list[SeedSection], path: str = "") -> str:
    """One line per section that applies (its first finding), then one line naming those that do not
    and why, in short (``--section KEY`` gives a section in full). `path`: the trace's, which the
    reasons start with (said once, above)."""
    if not sections:
        return ""
    lines = ["", "analyses (first finding of each; --details prints them in full, --section KEY one of them):"]
    lines += [f"  {s.title}: {s.headline()}" for s in sections if s.available]
    missing: dict[str, list[str]] = {}
    for s in sections:
        if not s.available:
            missing.setdefault(_short_reason(s.headline(), path), []).append(s.key)
    if missing:
        lines.append("  not available on this trace: " + "; ".join(f"{', '.join(keys)} ({reason})"
                                                                   for reason, keys in missing.items()))
    return "\n".join(lines) + "\n"


def _short_reason(headline: str, path: str) -> str:
    """'not available: TRACE: no GPU operations (...): ...' as 'no GPU operations'."""
    text = headline.removeprefix("not available: ")
    text = text.removeprefix(f"{path}: ") if path else text
    for cut in (": ", " (", "; "):
        text = text.split(cut, 1)[0]
    return text.removesuffix(" in whole trace").strip()

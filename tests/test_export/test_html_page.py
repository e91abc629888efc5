"""The report page written section by section (a job's report): the findings of every section
first, the scratch file beside the page gone whatever happens (issue 39)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Iterator

import pytest

from tc_analyses.export.html_report import MOST_LEADS, Block, Lead, Section, ranked, render, write_page


def _lead(n: int, stake_ms: int, anchor: str, evidence: str = "") -> Lead:
    return Lead(f"finding {n}", "an analysis", f"rank {n % 3}", stake_ms * 1_000_000, "measured", anchor, evidence)


def _answers(count: int) -> Iterator[tuple[Section, list[Lead]]]:
    for n in range(count):
        yield Section(f"rank {n}", [Block("Text", f"section {n}\n", anchor=f"r{n}-a")]), \
            [_lead(10 * n + k, (7 * n + 3 * k) % 11, f"r{n}-a", "data:image/png;base64,AA==") for k in range(4)]


def test_the_streamed_page_equals_the_page_made_whole(tmp_path: Path) -> None:
    tmp_path = tmp_path / "out"
    tmp_path.mkdir()
    streamed = tmp_path / "streamed.html"
    write_page(streamed, "job", [f"rank {n}" for n in range(9)], _answers(9))
    sections, leads = zip(*_answers(9))
    whole = render("job", list(sections), ranked(lead for found in leads for lead in found))
    assert streamed.read_text() == whole
    assert [p.name for p in tmp_path.iterdir()] == ["streamed.html"]  # no scratch left


def test_ranked_keeps_the_heaviest_and_one_evidence_per_block() -> None:
    found = [lead for _, leads in _answers(9) for lead in leads]
    chosen = ranked(found)
    assert len(chosen) == MOST_LEADS
    assert [lead.impact_ns for lead in chosen] == sorted((lead.impact_ns for lead in found), reverse=True)[:MOST_LEADS]
    with_plot = [lead.anchor for lead in chosen if lead.evidence]
    assert sorted(with_plot) == sorted({lead.anchor for lead in chosen})  # the first of each block shows its plot
    for anchor in with_plot:  # ... and it is the first of its block on the page
        assert next(lead for lead in chosen if lead.anchor == anchor).evidence


def test_sigterm_while_sections_come_leaves_no_scratch_file(tmp_path: Path) -> None:
    def answers() -> Iterator[tuple[Section, list[Lead]]]:
        yield from _answers(2)
        os.kill(os.getpid(), signal.SIGTERM)  # as `kill` would, between two sections
        yield from _answers(2)

    tmp_path = tmp_path / "out"
    tmp_path.mkdir()
    previous = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as stopped:
        write_page(tmp_path / "page.html", "job", ["a", "b", "c", "d"], answers())
    assert stopped.value.code == 128 + signal.SIGTERM
    assert list(tmp_path.iterdir()) == []  # neither the scratch file nor a page cut short
    assert signal.getsignal(signal.SIGTERM) == previous

"""The registry of analyses is the one list: each entry has its command, section, docs page and
event-table column, and nothing else lists analyses by hand."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from tc_analyses.export.registry_doc import render_analyses
from tc_analyses.registry import ANALYSES, KEYS, NEEDED, USED, Entry, entry
from tc_analyses.errors import ConfigurationError
from tracer import schema

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "tests" / "data" / "traces" / "succeed" / "all-classes"


@pytest.mark.parametrize("analysis", ANALYSES, ids=lambda a: a.key)
def test_every_entry_has_a_command_with_its_options(analysis: Entry) -> None:
    from tc_analyses.cli import main

    command = main.commands[analysis.key]
    flags = {flag for param in command.params for flag in getattr(param, "opts", [])}
    assert {p.flag for p in analysis.params} <= flags
    assert {"--format", "-o"} <= flags and (("--labels" in flags) == analysis.trajectory)


@pytest.mark.parametrize("analysis", ANALYSES, ids=lambda a: a.key)
def test_every_entry_has_its_modules_and_a_docs_page(analysis: Entry) -> None:
    module = importlib.import_module(analysis.module)
    trajectory = importlib.import_module(analysis.trajectory_module) if analysis.trajectory_module else module
    assert callable(module.run) and (not analysis.trajectory or callable(trajectory.trajectory))
    if analysis.report is not None:
        report = importlib.import_module(analysis.report)
        assert callable(report.text) and callable(report.plots)
    page = (ROOT / "docs" / analysis.doc).read_text()
    assert "## Definition" in page and "## Events used" in page
    known = {c.short for c in schema.CATALOGUE}
    assert set(analysis.events) <= known and set(analysis.events.values()) <= {NEEDED, USED}


def test_every_trace_entry_is_a_section_of_analyze(cli: Any) -> None:
    from tc_analyses.cli import main

    trace_keys = tuple(a.key for a in ANALYSES if not a.job)
    assert set(KEYS) - set(trace_keys) == {"ranks"}  # a job analysis: no section of one trace
    section = next(p for p in main.commands["analyze"].params if p.name == "section_keys")
    assert tuple(section.type.choices) == trace_keys
    data = json.loads(cli("analyze", TRACE, "--format", "json").stdout)
    assert sorted(data["sections"]) == sorted(trace_keys)  # JSON keys are sorted


def test_the_docs_table_is_generated_from_the_registry() -> None:
    index = (ROOT / "docs" / "analyses-seed" / "README.md").read_text()
    assert render_analyses() in index, "run: .venv/bin/python scripts/update_docs.py"


def test_unknown_keys_and_options_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="no analysis 'nope'"):
        entry("nope")
    with pytest.raises(ConfigurationError, match="no option colour"):
        entry("memory").options({"colour": 1})
    assert entry("breakdown").options({"kernel_delay_us": None}) == {"kernel_delay_us": 30.0}

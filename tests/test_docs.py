"""docs/ stays in sync with the code it describes."""

from pathlib import Path

from tc_analyses.export.schema_doc import render_catalogue
from tracer import schema

ROOT = Path(__file__).resolve().parent.parent


def test_trace_format_catalogue_matches_schema() -> None:
    text = (ROOT / "docs" / "trace-format.md").read_text()
    assert render_catalogue() in text, "docs/trace-format.md is stale: run .venv/bin/python scripts/update_docs.py"


def test_every_event_and_field_is_documented() -> None:
    text = (ROOT / "docs" / "trace-format.md").read_text()
    for cls in schema.CATALOGUE:
        section = text.split(f"### `{cls.name}`", 1)
        assert len(section) == 2, f"{cls.name} has no section"
        body = section[1].split("### ", 1)[0]
        for field in cls.fields:
            assert f"| `{field.name}` | {field.type} |" in body, f"{cls.name}.{field.name} undocumented"


def test_readme_opens_with_the_two_commands() -> None:
    lines = [line.strip() for line in (ROOT / "README.md").read_text().splitlines() if line.strip()]
    commands = [line for line in lines[:12] if line.startswith("make ")]
    assert commands[:2] == ["make demo", "make test"]


def test_every_cli_command_has_a_doc_entry() -> None:
    from tc_analyses.cli import main

    text = (ROOT / "docs" / "cli.md").read_text()
    for name in main.commands:
        assert f"## `dfcompass {name}`" in text, f"docs/cli.md lacks dfcompass {name}"


def test_every_seed_analysis_has_a_page() -> None:
    from tc_analyses.registry import KEYS as SECTION_KEYS

    seed = ROOT / "docs" / "analyses-seed"
    index = (seed / "README.md").read_text()
    for key in SECTION_KEYS:
        page = (seed / f"{key}.md").read_text()
        assert "## Definition" in page and "## Events used" in page, key
        assert f"`dfcompass {key}`" in index and f"({key}.md)" in index, key

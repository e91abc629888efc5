"""Regenerate the event tables in docs/trace-format.md from tracer/schema.py."""

from pathlib import Path

from tc_analyses.export.schema_doc import replace_catalogue

doc = Path(__file__).resolve().parent.parent / "docs" / "trace-format.md"
doc.write_text(replace_catalogue(doc.read_text()))
print(f"updated {doc}")

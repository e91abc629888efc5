"""Regenerate the generated sections of the docs: the event catalogue in docs/trace-format.md (from
tracer/schema.py) and the analyses index in docs/analyses-seed/README.md (from tc_analyses/registry.py)."""

from pathlib import Path

from tc_analyses.export.registry_doc import replace_analyses
from tc_analyses.export.schema_doc import replace_catalogue

docs = Path(__file__).resolve().parent.parent / "docs"
for doc, replace in ((docs / "trace-format.md", replace_catalogue), (docs / "analyses-seed" / "README.md", replace_analyses)):
    doc.write_text(replace(doc.read_text()))
    print(f"updated {doc}")

"""Fixtures of the Trace Compass export tests: the schema from ../shared, traces, builds."""

from __future__ import annotations

import difflib
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tc_analyses.export.tracecompass import render
from tc_analyses.export.tracecompass.facts import trace_facts
from tests.helpers import REPO_ROOT, SHARED_DIR

ALL_CLASSES = REPO_ROOT / "tests" / "data" / "traces" / "succeed" / "all-classes"
GOLDEN = REPO_ROOT / "tests" / "golden" / "xml"
TC_DIR = SHARED_DIR / "tracecompass"
BUNDLE = "org.eclipse.tracecompass.tmf.analysis.xml.core"
JAR_FOLDER = "org/eclipse/tracecompass/tmf/analysis/xml/core/module"


@pytest.fixture(scope="session")
def tc_schema(tc_xsd: Path) -> Any:
    from tc_analyses.export.tracecompass.validate import load_schema

    return load_schema(tc_xsd)


@pytest.fixture(autouse=True)
def _private_xsd_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Jars' schemas are cached under the temp dir: keep each test's cache its own."""
    cache = tmp_path / "tmp"
    cache.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(cache))


def build(out: Path, trace: Path | None = None) -> dict[str, bytes]:
    """Run the generator into `out`; return {relative path: bytes} of everything written."""
    render.write_output(out, trace_facts(trace) if trace is not None else None)
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def jar_of(out: Path) -> Path:
    (jar,) = (out / "plugin").glob("*.jar")
    return jar


def golden_files(out: Path) -> dict[str, bytes]:
    """What the goldens hold for one build: xml/*.xml, README.md, and the jar's plugin.xml and MANIFEST.MF."""
    files = {p.name: p.read_bytes() for p in sorted((out / "xml").glob("*.xml"))}
    files["README.md"] = (out / "README.md").read_bytes()
    with zipfile.ZipFile(jar_of(out)) as jar:
        files["plugin.xml"] = jar.read("plugin.xml")
        files["MANIFEST.MF"] = jar.read("META-INF/MANIFEST.MF")
    return files


def check_golden(folder: Path, files: dict[str, bytes], update: bool) -> None:
    """Compare `files` with folder/<name> byte for byte, or rewrite them under --update-golden.

    On a mismatch the new bytes go to <golden>.actual (gitignored) and the test fails with a diff.
    """
    if update:
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.iterdir():
            if stale.name not in files:
                stale.unlink()
        for name, data in files.items():
            (folder / name).write_bytes(data)
        return
    failures = []
    for name, data in files.items():
        golden = folder / name
        actual = golden.with_name(golden.name + ".actual")
        expected = golden.read_bytes() if golden.is_file() else None
        if expected == data:
            actual.unlink(missing_ok=True)
            continue
        actual.parent.mkdir(parents=True, exist_ok=True)
        actual.write_bytes(data)
        if expected is None:
            failures.append(f"{golden} is missing (new output in {actual.name})")
            continue
        diff = difflib.unified_diff(expected.decode("utf-8", "replace").splitlines(),
                                    data.decode("utf-8", "replace").splitlines(),
                                    f"{golden} (golden)", f"{actual} (actual)", lineterm="", n=2)
        failures.append("\n".join(list(diff)[:40]))
    extra = sorted(p.name for p in folder.glob("*") if not p.name.endswith(".actual") and p.name not in files)
    if extra:
        failures.append(f"{folder}: golden files no longer generated: {', '.join(extra)}")
    assert not failures, ("output differs from the goldens; if intended, rerun with pytest --update-golden\n"
                          + "\n\n".join(failures))


def make_jar(path: Path, xsd_dir: Path, files: tuple[str, ...] | None = None) -> Path:
    """A stand-in for Trace Compass's XML bundle jar: the .xsd files deep inside, among other entries."""
    from tc_analyses.export.tracecompass.validate import XSD_FILES

    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", f"Bundle-SymbolicName: {BUNDLE}\r\n")
        jar.writestr(f"{JAR_FOLDER}/TmfXmlStrings.class", b"\xca\xfe\xba\xbe")
        for name in XSD_FILES if files is None else files:
            jar.write(xsd_dir / name, f"{JAR_FOLDER}/{name}")
    return path

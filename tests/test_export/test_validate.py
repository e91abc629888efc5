"""validate.py: finding Trace Compass's XSD, and every generated file against it."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tc_analyses.errors import ConfigurationError, MissingDependencyError
from tc_analyses.export.tracecompass.validate import (ENV, XSD_FILES, check_files, find_xsd, lint, load_schema,
                                                       validate_xsd)
from tests.helpers import REPO_ROOT
from tests.test_export.conftest import ALL_CLASSES, BUNDLE, JAR_FOLDER, TC_DIR, build, make_jar

XSD_FIXTURES = sorted((REPO_ROOT / "tests" / "data" / "xml" / "xsd").glob("*.xml"))
LINT_FIXTURES = sorted((REPO_ROOT / "tests" / "data" / "xml" / "lint").glob("*.xml"))
# The six examples ../shared keeps of Trace Compass (see its LICENSE-NOTE.txt).
EXAMPLES = [TC_DIR / "examples" / name for name in (
    "irq_analysis_lttng.xml", "kvm_exits.xml", "test_experiment.xml", "test_state_values.xml", "test_valid.xml",
    "test_valid_pattern.xml")]


# ------------------------------------------------------------------ find_xsd
def test_find_xsd_takes_the_file_or_its_folder(tc_xsd: Path) -> None:
    assert find_xsd(tc_xsd) == tc_xsd
    assert find_xsd(tc_xsd.parent) == tc_xsd


def test_find_xsd_reads_the_environment(tc_xsd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, str(tc_xsd.parent))
    assert find_xsd(None) == tc_xsd
    assert find_xsd(tc_xsd) == tc_xsd  # --xsd wins over the environment


def test_find_xsd_without_a_source_names_the_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "")
    with pytest.raises(MissingDependencyError, match="--xsd PATH") as info:
        find_xsd(None)
    assert "\n" not in str(info.value)


def test_find_xsd_rejects_a_missing_path_and_an_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="no such file"):
        find_xsd(tmp_path / "nowhere")
    with pytest.raises(MissingDependencyError, match="--xsd PATH"):
        find_xsd(tmp_path)


@pytest.mark.parametrize("where", ["plugins", "opt/tracecompass/plugins"])
def test_find_xsd_extracts_the_schema_from_an_installation(where: str, tc_xsd: Path, tmp_path: Path,
                                                           tc_schema: Any) -> None:
    install = tmp_path / "tracecompass"
    make_jar(install / where / f"{BUNDLE}_9.3.0.202405.jar", tc_xsd.parent, files=())  # old: not taken
    make_jar(install / where / f"{BUNDLE}_10.1.0.202409.jar", tc_xsd.parent)  # the newest wins
    (install / where / f"{BUNDLE}.tests_10.1.0.jar").write_bytes(b"")  # another bundle: not looked at
    found = find_xsd(install)
    assert found.name == "xmlDefinition.xsd"
    assert sorted(p.name for p in found.parent.iterdir()) == sorted(XSD_FILES)
    for name in XSD_FILES:
        assert (found.parent / name).read_bytes() == (tc_xsd.parent / name).read_bytes()
    assert find_xsd(install) == found  # cached
    assert find_xsd(install / where / f"{BUNDLE}_10.1.0.202409.jar") == found  # the jar itself
    schema = load_schema(found)
    assert validate_xsd(EXAMPLES[0], schema) == []


def test_find_xsd_takes_an_unpacked_bundle(tc_xsd: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "eclipse" / "plugins" / f"{BUNDLE}_10.1.0" / JAR_FOLDER
    bundle.mkdir(parents=True)
    for name in XSD_FILES:
        shutil.copy(tc_xsd.parent / name, bundle / name)
    assert find_xsd(tmp_path / "eclipse") == bundle / "xmlDefinition.xsd"


def test_find_xsd_reports_a_jar_without_the_schema(tc_xsd: Path, tmp_path: Path) -> None:
    make_jar(tmp_path / "plugins" / f"{BUNDLE}_10.1.0.jar", tc_xsd.parent, files=XSD_FILES[:2])
    with pytest.raises(MissingDependencyError, match="xmlView.xsd"):
        find_xsd(tmp_path)
    (tmp_path / "plugins" / f"{BUNDLE}_10.1.0.jar").write_bytes(b"not a zip")
    with pytest.raises(MissingDependencyError, match="cannot read it as a jar"):
        find_xsd(tmp_path)


def test_load_schema_reports_a_broken_file(tmp_path: Path) -> None:
    broken = tmp_path / "xmlDefinition.xsd"
    broken.write_text("<xs:schema")
    with pytest.raises(MissingDependencyError, match="not a usable XML schema"):
        load_schema(broken)


# ------------------------------------------------------------------ validate_xsd
@pytest.mark.parametrize("path", XSD_FIXTURES, ids=lambda p: p.name)
def test_invalid_files_are_rejected_with_file_and_line(path: Path, tc_schema: Any) -> None:
    line, text = re.search(r"xsd expects line (\d+): (.*?) -->", path.read_text()).groups()  # type: ignore[union-attr]
    problems = validate_xsd(path, tc_schema)
    assert problems and problems[0].startswith(f"{path}:{line}: ")
    assert text in problems[0]
    assert all("\n" not in p for p in problems)


def test_malformed_xml_is_one_problem(tmp_path: Path, tc_schema: Any) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text("<tmfxml>\n<stateProvider>\n</tmfxml>\n")
    assert [p.split(": ")[0] for p in validate_xsd(bad, tc_schema)] == [f"{bad}:3"]
    assert [p.split(": ")[0] for p in lint(bad)] == [f"{bad}:3"]


@pytest.mark.parametrize("path", LINT_FIXTURES, ids=lambda p: p.name)
def test_lint_fixtures_are_schema_valid(path: Path, tc_schema: Any) -> None:
    """Each lint fixture has a defect only the lint sees, not the XSD."""
    assert validate_xsd(path, tc_schema) == []


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_upstream_examples_pass_the_xsd_and_the_lint(path: Path, tc_schema: Any) -> None:
    assert path.is_file()
    assert validate_xsd(path, tc_schema) == []
    assert lint(path) == []


# ------------------------------------------------------------------ generated files
@pytest.mark.parametrize("trace", [None, ALL_CLASSES], ids=["full", "all-classes"])
def test_generated_files_pass_the_xsd_and_the_lint(trace: Path | None, tmp_path: Path, tc_xsd: Path) -> None:
    build(tmp_path / "out", trace)
    paths = sorted((tmp_path / "out" / "xml").glob("*.xml"))
    assert [p.stem for p in paths] == ["api", "dataflow", "experiment", "gpu", "latency", "memory", "ranks"]
    assert check_files(paths, tc_xsd) == []


@pytest.mark.torch
def test_analyses_of_a_torch_recorded_trace_pass_the_xsd_and_the_lint(tmp_path: Path, tc_xsd: Path) -> None:
    torch = pytest.importorskip("torch")
    from tracer.torch_source import TorchRecorder

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    trace = tmp_path / "torch-trace"
    with TorchRecorder(str(trace), cuda=False):
        with torch.no_grad():
            model(torch.randn(4, 8))
    build(tmp_path / "out", trace)
    paths = sorted((tmp_path / "out" / "xml").glob("*.xml"))
    assert {p.name for p in paths} >= {"dataflow.xml", "memory.xml", "latency.xml"}
    assert check_files(paths, tc_xsd) == []


def test_check_files_reports_xsd_and_lint_problems_together(tc_xsd: Path) -> None:
    problems = check_files([*XSD_FIXTURES, *LINT_FIXTURES], tc_xsd)
    files = {p.split(":", 1)[0] for p in problems}
    assert files == {str(p) for p in [*XSD_FIXTURES, *LINT_FIXTURES]}


def test_env_var_is_not_needed_when_xsd_is_given(tc_xsd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, os.devnull + "-missing")
    assert check_files([], tc_xsd) == []

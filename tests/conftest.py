"""Shared fixtures for the dfcompass test suite.

Test packages (tests/, tests/test_tracer/, ...) have ``__init__.py`` files so modules with the
same base name in different folders do not shadow each other; helpers live in ``tests.helpers``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest
from click.testing import CliRunner
from hypothesis import settings

from tests.helpers import REPO_ROOT, SHARED_DIR, CountingClock, dfcompass_cmd
from tracer.session import Session, active_session


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="Rewrite the golden files (tests/golden/, tests/cases/*/expected.csv and segments.csv) "
                          "instead of comparing with them.")


# Fixtures that read ../shared: a test using one, directly or through another fixture, is marked
# `shared` (the markers are declared in pyproject.toml). Tests reaching ../shared another way carry
# the mark by hand.
SHARED_FIXTURES = frozenset({"shared_dir", "tc_xsd"})


@pytest.hookimpl(tryfirst=True)  # before -m deselects, so `-m shared` and `-m "not shared"` see the mark
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if SHARED_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.shared)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The skipped tests as one line, their reasons counted (the run's options list none one by one)."""
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    reasons: dict[str, int] = {}
    for report in skipped:
        longrepr = getattr(report, "longrepr", None)
        reason = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else "skipped"
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    ranked = sorted(reasons.items(), key=lambda item: -item[1])
    shown = "; ".join(f"{n} x {text[:70]}" for text, n in ranked[:3]) + ("; ..." if len(ranked) > 3 else "")
    terminalreporter.write_line(f"{len(skipped)} skipped, {len(reasons)} reasons: {shown}")


# Property tests run the same examples every time and write no example database into the repo.
settings.register_profile("dfcompass", derandomize=True, database=None, deadline=None)
settings.load_profile("dfcompass")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def dfcompass_exe() -> list[str]:
    """The dfcompass command line as an argv prefix (the venv's console script when present)."""
    return dfcompass_cmd()


@pytest.fixture(scope="session")
def update_golden(request: pytest.FixtureRequest) -> bool:
    """True under ``pytest --update-golden``: golden tests rewrite their files instead of comparing."""
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """../shared next to the repository; the test is skipped when it is not there."""
    if not (SHARED_DIR / "traces").is_dir():
        pytest.skip("../shared/traces not present")
    return SHARED_DIR


@pytest.fixture(scope="session")
def tc_xsd() -> Path:
    """Trace Compass's schema, ../shared/tracecompass/xsd/xmlDefinition.xsd; skipped when absent."""
    xsd = SHARED_DIR / "tracecompass" / "xsd" / "xmlDefinition.xsd"
    if not xsd.is_file():
        pytest.skip("../shared/tracecompass not present")
    return xsd


@pytest.fixture(autouse=True)
def _frameworks_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts without `dfcompass --verbose`'s setting, even where the developer's shell
    exports it: the tests of quiet output would otherwise see the frameworks' notices."""
    from tracer.verbosity import VERBOSE_ENV

    monkeypatch.delenv(VERBOSE_ENV, raising=False)


@pytest.fixture(autouse=True)
def _no_leftover_session() -> Any:
    """A test that fails mid-recording must not leave a session active for the next test."""
    yield
    session = active_session()
    if session is not None:
        session.stop()


class CliResult:
    """What one in-process CLI run gave: exit code, stdout and stderr kept apart."""

    def __init__(self, result: Any) -> None:
        self.raw = result
        self.exit_code: int = result.exit_code
        self.stdout: str = result.stdout
        try:
            self.stderr: str = result.stderr
        except ValueError:  # click < 8.2 without mix_stderr=False
            self.stderr = ""
        self.exception = result.exception


def _runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]  # click < 8.2
    except TypeError:
        return CliRunner()  # click >= 8.2 keeps stderr apart by default


@pytest.fixture
def cli() -> Callable[..., CliResult]:
    """Run ``dfcompass ARGS`` in-process: cli("info", path, "--format", "json")."""
    from tc_analyses.cli import main

    def invoke(*args: Any) -> CliResult:
        return CliResult(_runner().invoke(main, [str(a) for a in args], catch_exceptions=True))

    return invoke


@pytest.fixture
def make_trace(tmp_path: Path) -> Callable[..., Path]:
    """Record a small trace deterministically: make_trace(body, name=..., packet_size=..., ...).

    `body(session)` runs while the session records. The clock is a thread-safe counter, the
    periodic flusher is effectively off (packets come only from full buffers and stop()), the
    pending-packet limit is out of reach (no losses unless a test asks with max_pending), and
    SIGTERM is left alone, so what is written depends only on what `body` records.
    """
    counter = iter(range(10_000))

    def make(body: Callable[[Session], Any] | None = None, *, name: str | None = None, **options: Any) -> Path:
        path = tmp_path / (name or f"trace{next(counter)}")
        options.setdefault("clock", CountingClock())
        options.setdefault("flush_interval", 3600.0)
        options.setdefault("handle_signals", False)
        options.setdefault("max_pending", 1_000_000)
        session = Session(path, **options)
        session.start()
        try:
            if body is not None:
                body(session)
        finally:
            session.stop()
        return path

    return make

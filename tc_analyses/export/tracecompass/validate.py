"""Check generated analyses the way Trace Compass will: its XSD, then dfcompass's lint.

The XSD is Trace Compass's own (EPL-2.0, not shipped with dfcompass): ``find_xsd`` takes it from
``--xsd`` or ``$DFCOMPASS_TRACECOMPASS_XSD``, either the ``xmlDefinition.xsd`` file, its folder,
a ``org.eclipse.tracecompass.tmf.analysis.xml.core_*.jar``, or a Trace Compass installation to
find that jar in (its six .xsd files are extracted to a cache folder under the temp dir).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import zipfile
from pathlib import Path

from lxml import etree

from tc_analyses.errors import ConfigurationError, MissingDependencyError
from tc_analyses.export.tracecompass.lint import lint

__all__ = ["ENV", "XSD_FILES", "check_files", "find_xsd", "lint", "load_schema", "validate_xsd"]

ENV = "DFCOMPASS_TRACECOMPASS_XSD"
ENTRY = "xmlDefinition.xsd"
# The entry point xs:includes the other five, resolved relative to it.
XSD_FILES = (ENTRY, "xmlCommon.xsd", "xmlStateProvider.xsd", "xmlPatternStateProvider.xsd", "xmlView.xsd",
             "xmlCallstack.xsd")
BUNDLE_PREFIX = "org.eclipse.tracecompass.tmf.analysis.xml.core_"
_HINT = "pass --xsd PATH (xmlDefinition.xsd, its folder, or a Trace Compass installation)"
_MAX_DEPTH = 6  # an installation keeps its bundles in plugins/, a few levels down at most
_MAX_ENTRIES = 50_000  # never crawl a whole disk when pointed at / by mistake


def find_xsd(xsd: Path | None = None) -> Path:
    """Trace Compass's ``xmlDefinition.xsd``: from `xsd` (--xsd), else $DFCOMPASS_TRACECOMPASS_XSD."""
    if xsd is not None:
        return _resolve(Path(xsd), "--xsd")
    from_env = os.environ.get(ENV, "").strip()
    if from_env:
        return _resolve(Path(from_env), f"${ENV}")
    raise MissingDependencyError(f"Trace Compass's XML schema is needed to validate: {_HINT}, or set ${ENV}")


def _resolve(path: Path, origin: str) -> Path:
    if not path.exists():
        raise ConfigurationError(f"{origin} {path}: no such file or directory")
    if path.is_file() and path.suffix == ".jar":
        return _extract(path)
    if path.is_file():
        return path  # an .xsd file: the user's choice of entry point
    if (path / ENTRY).is_file():
        return path / ENTRY
    bundle = _find_bundle(path)
    if bundle is None:
        raise MissingDependencyError(f"{origin} {path}: neither {ENTRY} nor a {BUNDLE_PREFIX}*.jar found there; "
                                     f"{_HINT}")
    if bundle.is_dir():  # an unpacked bundle
        found = sorted(bundle.rglob(ENTRY))
        if not found:
            raise MissingDependencyError(f"{origin} {bundle}: holds no {ENTRY}; {_HINT}")
        return found[0]
    return _extract(bundle)


def _version_key(path: Path) -> list[tuple[int, int | str]]:
    """Natural order, so that bundle 10.1 sorts after 9.3."""
    return [(0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", path.name)]


def _find_bundle(root: Path) -> Path | None:
    """The newest XML-analysis bundle (jar or folder) under root: plugins/ first, then a bounded walk."""
    candidates = sorted((root / "plugins").glob(BUNDLE_PREFIX + "*")) if (root / "plugins").is_dir() else []
    if not candidates:
        seen = 0
        for folder, dirs, files in os.walk(root):
            depth = len(Path(folder).relative_to(root).parts)
            seen += len(dirs) + len(files)
            candidates += [Path(folder) / n for n in dirs + files if n.startswith(BUNDLE_PREFIX)]
            if depth >= _MAX_DEPTH or seen > _MAX_ENTRIES:
                dirs.clear()
            dirs.sort()
    bundles = [c for c in candidates if c.is_dir() or c.suffix == ".jar"]
    return max(bundles, key=_version_key) if bundles else None


def _extract(jar: Path) -> Path:
    """The jar's six .xsd files, copied (flat, by base name) into a cache folder keyed by the jar."""
    stat = jar.stat()
    key = hashlib.sha256(f"{jar.resolve()}\0{stat.st_mtime_ns}\0{stat.st_size}".encode()).hexdigest()[:16]
    cache = Path(tempfile.gettempdir()) / f"dfcompass-xsd-{key}"
    if all((cache / name).is_file() for name in XSD_FILES):
        return cache / ENTRY
    try:
        with zipfile.ZipFile(jar) as archive:
            members = {Path(n).name: n for n in sorted(archive.namelist()) if Path(n).name in XSD_FILES}
            missing = [name for name in XSD_FILES if name not in members]
            if missing:
                raise MissingDependencyError(f"{jar}: no {', '.join(missing)} inside; {_HINT}")
            contents = {name: archive.read(member) for name, member in members.items()}
    except (zipfile.BadZipFile, OSError) as exc:
        raise MissingDependencyError(f"{jar}: cannot read it as a jar ({exc}); {_HINT}") from None
    # Write a private folder, then rename it into place: concurrent runs never see half a schema.
    staging = Path(tempfile.mkdtemp(prefix=f"dfcompass-xsd-{key}-", dir=cache.parent))
    for name, data in contents.items():
        (staging / name).write_bytes(data)
    try:
        staging.rename(cache)
    except OSError:  # another run got there first: use its copy
        shutil.rmtree(staging, ignore_errors=True)
    return cache / ENTRY


def load_schema(xsd: Path) -> etree.XMLSchema:
    """The compiled schema (includes resolved next to `xsd`)."""
    try:
        return etree.XMLSchema(etree.parse(str(xsd), etree.XMLParser(no_network=True)))
    except (etree.XMLSyntaxError, etree.XMLSchemaParseError, OSError) as exc:
        raise MissingDependencyError(f"{xsd}: not a usable XML schema ({' '.join(str(exc).split())}); {_HINT}") from None


def validate_xsd(path: Path, schema: etree.XMLSchema) -> list[str]:
    """Schema violations of one file, as ``FILE:LINE: message`` lines."""
    try:
        document = etree.parse(str(path), etree.XMLParser(resolve_entities=False, no_network=True))
    except etree.XMLSyntaxError as exc:
        return [f"{path}:{exc.lineno}: not well-formed XML: {exc.msg}"]
    if schema.validate(document):
        return []
    return [f"{path}:{error.line}: {' '.join(error.message.split())}" for error in schema.error_log]


def check_files(paths: list[Path], xsd: Path | None) -> list[str]:
    """Every problem the XSD (found with :func:`find_xsd`) and the lint report in `paths`."""
    schema = load_schema(find_xsd(xsd))
    problems: list[str] = []
    for path in paths:
        problems += validate_xsd(path, schema)
        problems += lint(path)
    return problems

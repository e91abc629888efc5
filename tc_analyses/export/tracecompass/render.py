"""Render the Trace Compass analyses: XML files, a data-only plugin jar, and a README.

Output is byte-stable: the same input gives the same bytes (no timestamps; sorted, fixed-date
zip entries).
"""

from __future__ import annotations

import io
import sys
import zipfile
from pathlib import Path

import jinja2
from lxml import etree

from tc_analyses.errors import ConfigurationError
from tc_analyses.export.tracecompass import model

BUNDLE = "org.dfcompass.analyses"
XML_POINT = "org.eclipse.linuxtools.tmf.analysis.xml.core.files"
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def template_dir() -> Path:
    """xml_templates/ of a source checkout, or of an installed wheel (share/dfcompass/...)."""
    candidates = [Path(__file__).resolve().parents[3] / "xml_templates",
                  Path(sys.prefix) / "share" / "dfcompass" / "xml_templates"]
    for candidate in candidates:
        if (candidate / "_macros.xml.j2").is_file():
            return candidate
    raise ConfigurationError(f"cannot find dfcompass's xml_templates (looked in {', '.join(map(str, candidates))})")


class _QuietCache(jinja2.FileSystemBytecodeCache):
    """Compiled templates kept between runs (compiling them was 0.1 s of every command that writes
    analyses); a cache folder that cannot be written only costs that time again."""

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except Exception:  # noqa: BLE001 - a damaged cache file (jinja2 checks the magic, not the rest)
            bucket.reset()  # compiled again, and stored over it

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """The user's cache folder for compiled templates, or None where there is none to make. jinja2
    checks a template's source and the Python version; the folder's name adds jinja2's version and
    this module's text, since a compiled template also depends on the environment's options."""
    import hashlib
    import os

    tag = hashlib.sha1(Path(__file__).read_bytes()).hexdigest()[:12]
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dfcompass" / f"jinja-{jinja2.__version__}-{tag}"
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return _QuietCache(str(root))


def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir())),
        bytecode_cache=_bytecode_cache(),
        undefined=jinja2.StrictUndefined,
        autoescape=lambda name: name is not None and name.endswith((".xml.j2", ".xml")),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_xml(facts: model.TraceFacts | None = None) -> dict[str, bytes]:
    """File name -> XML bytes, for every analysis the catalogue (or the trace) calls for."""
    env = environment()
    meta, analyses = model.build(facts)
    events, paths = model.events(), model.paths()
    files = {}
    for analysis in analyses:
        text = env.get_template(analysis.template).render(m=meta, a=analysis, ev=events, paths=paths)
        files[f"{analysis.name}.xml"] = _tidy(text, analysis.template)
    return files


def _tidy(text: str, template: str) -> bytes:
    """Parse the render (proving it well-formed) and indent it uniformly with tabs."""
    try:
        root = etree.fromstring(text.encode("utf-8"), etree.XMLParser(remove_blank_text=True))
    except etree.XMLSyntaxError as exc:  # a template bug, never user input: names are escaped
        raise ConfigurationError(f"{template}: rendered XML is not well formed: {exc}") from None
    etree.indent(root, space="\t")
    body = etree.tostring(root, encoding="unicode")
    comment = text.split("\n", 2)[1]  # the generated-by comment sits before the root element
    return ('<?xml version="1.0" encoding="UTF-8"?>\n' + comment + "\n" + body + "\n").encode("utf-8")


def plugin_jar(files: dict[str, bytes], version: int) -> bytes:
    """A data-only Eclipse bundle that installs the XML files through Trace Compass's extension point."""
    env = environment()
    manifest = env.get_template("MANIFEST.MF.j2").render(bundle=BUNDLE, version=version)
    plugin = env.get_template("plugin.xml.j2").render(point=XML_POINT, files=sorted(files))
    entries = {"META-INF/MANIFEST.MF": manifest.replace("\n", "\r\n").encode("utf-8"),
               "plugin.xml": plugin.encode("utf-8")}
    entries.update({f"xml_analyses/{name}": data for name, data in files.items()})
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as jar:
        for name in sorted(entries, key=lambda n: (n != "META-INF/MANIFEST.MF", n)):  # manifest first, as jars want
            info = zipfile.ZipInfo(name, _ZIP_DATE)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            jar.writestr(info, entries[name])
    return buffer.getvalue()


def write_output(out: Path, facts: model.TraceFacts | None = None) -> dict[str, Path]:
    """Write OUT/xml/*.xml, OUT/plugin/<bundle>.jar and OUT/README.md; return what was written."""
    files = render_xml(facts)
    meta, analyses = model.build(facts)
    written: dict[str, Path] = {}
    (out / "xml").mkdir(parents=True, exist_ok=True)
    for old in (out / "xml").glob("*.xml"):  # a re-run must not leave analyses of another trace
        old.unlink()
    for name, data in files.items():
        path = out / "xml" / name
        path.write_bytes(data)
        written[f"xml/{name}"] = path
    (out / "plugin").mkdir(parents=True, exist_ok=True)
    jar = out / "plugin" / f"{BUNDLE}_1.0.{meta.version}.jar"
    for old in (out / "plugin").glob(f"{BUNDLE}_*.jar"):
        old.unlink()
    jar.write_bytes(plugin_jar(files, meta.version))
    written["plugin"] = jar
    readme = environment().get_template("README.md.j2").render(
        meta=meta, analyses=analyses, files=sorted(files), jar=jar.name, bundle=BUNDLE)
    (out / "README.md").write_text(readme, encoding="utf-8")
    written["README.md"] = out / "README.md"
    return written

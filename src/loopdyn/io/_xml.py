"""Safe XML reading for the URDF, SDFormat and MJCF readers.

- ``defusedxml`` refuses entity declarations (billion-laughs bombs) and external
  entities / DTD fetches; a refused document raises :class:`ModelError`.
- Files larger than ``max_bytes`` are refused before parsing, with a message that
  names the limit and the option that raises it.
- Every element keeps the line where it starts (``doc.line(elem)``), so every error
  names the file, the line and the element: ``robot.urdf line 42, joint 'knee': ...``.
- URIs (``package://``, ``model://``, ``file://``, relative paths) resolve only
  under the given roots; a path that leaves them, or does not exist, resolves to
  ``None`` (meshes are metadata: a missing one never stops a load).
"""

import os
import re
from pathlib import Path
from xml.etree.ElementTree import ParseError, TreeBuilder

import numpy as np
from defusedxml import DefusedXmlException
from defusedxml.ElementTree import DefusedXMLParser

from loopdyn.errors import ModelError
from loopdyn.io import MAX_BYTES, as_bytes, check_size

_DRAKE_NS = "http://drake.mit.edu"


class _LineParser(DefusedXMLParser):
    """A defused expat parser that records the line of every element it starts."""

    def __init__(self, lines):
        super().__init__(target=TreeBuilder())
        self._lines = lines

    def _start(self, tag, attr_list):
        elem = super()._start(tag, attr_list)
        self._lines[id(elem)] = self.parser.CurrentLineNumber
        return elem


def read_bytes(path, max_bytes=MAX_BYTES):
    """The bytes of ``path``; ModelError if missing, unreadable or over ``max_bytes``."""
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError as e:
        raise ModelError(f"{p}: cannot read the file ({e.strerror or e})") from None
    check_size(p, size, max_bytes)
    try:
        return p.read_bytes()
    except OSError as e:
        raise ModelError(f"{p}: cannot read the file ({e.strerror or e})") from None


class XmlDoc:
    """A parsed XML document with the line of each element and error helpers."""

    def __init__(self, root, lines, name):
        self.root = root
        self._lines = lines
        self.name = name

    def line(self, elem):
        """Line where ``elem`` starts (1 if unknown)."""
        return self._lines.get(id(elem), 1)

    def error(self, elem, what, message):
        """A ModelError ``"<file> line <n>, <what>: <message>"``."""
        where = f"{self.name} line {self.line(elem)}"
        return ModelError(f"{where}, {what}: {message}" if what else f"{where}: {message}")


def parse(data, name, max_bytes=MAX_BYTES):
    """Parse XML ``data`` (bytes or str) of file ``name`` safely; returns an :class:`XmlDoc`."""
    data = as_bytes(data, name, max_bytes)
    data = _declare_drake_prefix(data)
    lines = {}
    parser = _LineParser(lines)
    try:
        parser.feed(data)
        root = parser.close()
    except ParseError as e:
        line = e.position[0] if getattr(e, "position", None) else 1
        msg = str(e).split(": line")[0]
        raise ModelError(f"{name} line {line}: not well-formed XML ({msg})") from None
    except DefusedXmlException as e:
        line = parser.parser.CurrentLineNumber
        raise ModelError(
            f"{name} line {line}: refused {type(e).__name__} ({e}); entity declarations and "
            "external references are not read (they can expand without bound or read other "
            "files)"
        ) from None
    except (ValueError, LookupError, UnicodeError) as e:
        line = getattr(getattr(parser, "parser", None), "CurrentLineNumber", 1)
        raise ModelError(f"{name} line {line}: cannot decode the document ({e})") from None
    if root is None:  # pragma: no cover - expat raises on an empty document
        raise ModelError(f"{name} line 1: empty document")
    return XmlDoc(root, lines, name)


def _declare_drake_prefix(data):
    """Declare the ``drake:`` prefix when a file uses it without an xmlns (Drake's own
    parser ignores namespaces, so such files exist)."""
    if b"drake:" not in data or re.search(rb"xmlns:drake\s*=", data):
        return data
    m = re.search(rb"<(robot|sdf|mujoco)\b", data)
    if m is None:
        return data
    end = m.end()
    return data[:end] + b' xmlns:drake="' + _DRAKE_NS.encode() + b'"' + data[end:]


def local(tag):
    """Tag without namespace; ``drake:`` tags become ``drake:<name>``."""
    if not isinstance(tag, str):
        return ""
    if tag.startswith("{"):
        ns, _, name = tag[1:].partition("}")
        return f"drake:{name}" if ns == _DRAKE_NS else name
    return tag


def children(elem, name):
    """Direct children of ``elem`` with local tag ``name``."""
    return [c for c in elem if local(c.tag) == name]


def child(elem, name):
    """First direct child of ``elem`` with local tag ``name`` (or None)."""
    for c in elem:
        if local(c.tag) == name:
            return c
    return None


# ---------------------------------------------------------------------- numbers
def floats(doc, elem, text, n, what, default=None):
    """``n`` finite floats from a whitespace-separated ``text`` (default if None)."""
    if text is None:
        if default is None:
            raise doc.error(elem, what, "missing value")
        return np.array(default, dtype=float)
    parts = text.split()
    if len(parts) != n:
        raise doc.error(elem, what, f"expected {n} numbers, got {text.strip()!r}")
    try:
        out = np.array([float(x) for x in parts])
    except ValueError:
        raise doc.error(elem, what, f"expected {n} numbers, got {text.strip()!r}") from None
    if not np.all(np.isfinite(out)):
        raise doc.error(elem, what, f"values must be finite, got {text.strip()!r}")
    return out


def number(doc, elem, text, what, default=None, positive=False, nonnegative=False):
    """One finite float from ``text`` (default if None)."""
    v = floats(doc, elem, text, 1, what, None if default is None else [default])[0]
    if positive and not v > 0:
        raise doc.error(elem, what, f"must be positive, got {v}")
    if nonnegative and v < 0:
        raise doc.error(elem, what, f"must be non-negative, got {v}")
    return float(v)


def child_number(doc, elem, name, what, default=None, **checks):
    """``number`` of the text of ``elem``'s child ``name`` (``default`` where there is no
    such child); an error points at the child, or at ``elem`` where it is missing."""
    c = child(elem, name)
    if c is None:
        return number(doc, elem, None, what, default, **checks)
    return number(doc, c, c.text, what, default, **checks)


# ---------------------------------------------------------------------- URIs
def default_roots(path):
    """Default search roots of a file: its directory and that directory's parent."""
    if path is None:
        return []
    d = Path(path).resolve().parent
    return [d, d.parent]


def resolve_uri(uri, base_dir, roots):
    """Absolute path of ``uri`` if it exists under one of ``roots`` (else None).

    ``package://pkg/rest`` and ``model://pkg/rest`` are looked up as
    ``root/pkg/rest`` and ``root/rest`` for each root; ``file://`` and plain paths
    (relative to ``base_dir``) are accepted only when they lie under a root.
    """
    if not uri:
        return None
    roots = [Path(r).resolve() for r in roots]
    candidates = []
    for scheme in ("package://", "model://"):
        if uri.startswith(scheme):
            rest = uri[len(scheme) :]
            _, _, sub = rest.partition("/")
            for r in roots:
                candidates += [r / rest, r / sub] if sub else [r / rest]
            break
    else:
        p = uri[len("file://") :] if uri.startswith("file://") else uri
        if "://" in p:
            return None
        p = Path(p)
        if not p.is_absolute() and base_dir is not None:
            p = Path(base_dir) / p
        candidates.append(p)
    for c in candidates:
        try:
            real = Path(os.path.realpath(c))
        except (OSError, ValueError):
            continue
        if any(real == r or r in real.parents for r in roots) and real.is_file():
            return str(real)
    return None

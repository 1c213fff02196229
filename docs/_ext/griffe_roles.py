"""Griffe extension of the API page (mkdocs.yml): Sphinx roles in loopdyn's docstrings.

loopdyn's docstrings name other objects with reST roles (``:class:`Model```,
``:func:`~loopdyn.io.load```, ``:meth:`save```), which read well in ``help()``; the
API page renders docstrings as Markdown, where a role shows raw (``:class:Model``).
Before rendering, each role becomes an optional mkdocs-autorefs cross-reference: a
link to the object where the site documents it, else the name as code (no warning).
The target is resolved in the docstring's own scope (its module's members and
imports), as Sphinx would; ``~`` shows the last component only.
"""

import re

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|exc|data|obj|const):`(~?)([^`<>\s]+)`")


def _identifier(obj, path):
    """The full path that ``path`` (as written in ``obj``'s docstring) names."""
    if path.startswith("loopdyn."):
        return path
    head, _, rest = path.partition(".")
    try:
        full = obj.resolve(head)
    except Exception:  # not in scope (a lazy import): loopdyn re-exports most names
        full = f"loopdyn.{head}"
    return f"{full}.{rest}" if rest else full


def convert(obj, text):
    """``text`` with every role replaced by an optional cross-reference."""

    def repl(m):
        tilde, path = m.group(1), m.group(2)
        shown = path.rsplit(".", 1)[-1] if tilde else path
        ident = _identifier(obj, path)
        return f'<autoref identifier="{ident}" optional><code>{shown}</code></autoref>'

    return _ROLE.sub(repl, text)


def _walk(obj, seen):
    if obj.is_alias or obj.path in seen:
        return
    seen.add(obj.path)
    if obj.docstring is not None:
        obj.docstring.value = convert(obj, obj.docstring.value)
    for member in list(obj.members.values()):
        _walk(member, seen)


class ReSTRoles(griffe.Extension):
    """Rewrites the roles of every docstring of a loaded package (see the module)."""

    def on_package(self, *, pkg, **kwargs):
        _walk(pkg, set())

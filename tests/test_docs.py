"""The documentation site: ``mkdocs build --strict`` passes, and every ``python`` code
block of the tutorial pages runs, in order, in one namespace per page (blocks fenced
as ``py`` are signatures or sketches and are not run)."""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# page -> modules its code needs beyond the core
TUTORIALS = {"index.md": (), "tutorial.md": (), "viewer.md": ("plotly", "viser", "trimesh")}


def _missing(*mods):
    return [m for m in mods if importlib.util.find_spec(m) is None]


@pytest.mark.skipif(
    bool(_missing("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers")),
    reason="the docs extra is not installed (pip install -e '.[docs]')",
)
def test_mkdocs_build_strict(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
         "-d", str(tmp_path / "site")],
        capture_output=True, text=True, timeout=600, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    # the reference is generated from the docstrings
    assert "Trajectory" in api and "build_scene" in api and "forward_dynamics" in api
    _check_api_page(api)


def _check_api_page(api):
    """Every name of ``ld.__all__`` has its entry; public signatures; roles rendered."""
    import html

    import loopdyn as ld

    ids = set(re.findall(r'\sid="([^"]+)"', api))
    missing = [n for n in ld.__all__ if f"loopdyn.{n}" not in ids]
    assert not missing, f"the API page has no entry for {missing}"
    text = html.unescape(re.sub(r"<[^>]+>", "", api))
    # ld.aba, ld.rnea, ld.crba were documented as their kernels' modules (griffe lets
    # the submodule loopdyn.tree.aba shadow the function of the same name)
    for name, sig in (("aba", "(model, q, v, tau, fext=None, data=None)"),
                      ("rnea", "(model, q, v, a, fext=None, data=None)"),
                      ("crba", "(model, q, data=None)")):  # fmt: skip
        assert f"loopdyn.{name}{sig}" in text, name
        assert f"{name}_kernel(" not in text, name
    # Sphinx roles in the docstrings are rendered (links or code), never raw
    raw = sorted(set(re.findall(r":(?:class|func|meth|mod|attr|exc|data|obj):\s*`?[\w.~]+", text)))
    assert not raw, f"raw reST roles on the API page: {raw[:10]}"
    # ... and a role naming a documented object links to it
    assert re.search(r'<a class="autorefs[^"]*"[^>]*href="#loopdyn\.ModelBuilder"', api)


def _blocks(page):
    text = (DOCS / page).read_text(encoding="utf-8")
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_every_tutorial_page_has_code():
    for page in TUTORIALS:
        assert _blocks(page), f"{page} has no python block"


@pytest.mark.parametrize("page", list(TUTORIALS))
def test_tutorial_code_blocks_run(page, tmp_path, monkeypatch):
    missing = _missing(*TUTORIALS[page])
    if missing:
        pytest.skip(f"{page} needs {', '.join(missing)} (pip install -e '.[viz]')")
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)  # the pages write to out/
    namespace = {"__name__": f"docs_{page}"}
    for k, code in enumerate(_blocks(page)):
        try:
            exec(compile(code, f"{page} block {k + 1}", "exec"), namespace)
        except Exception as e:  # pragma: no cover - the failure message names the block
            pytest.fail(f"{page}, python block {k + 1} fails: {type(e).__name__}: {e}")

"""The self-contained HTML export (loopdyn.viz.html), and the page in a real browser."""

import json
import re
import subprocess

import numpy as np
import pytest

import loopdyn as ld

pytest.importorskip("plotly", reason="the HTML export needs plotly (pip install loopdyn[viz])")

from loopdyn.viz.html import _payload, export_html, find_browser, screenshot
from loopdyn.viz.scene import build_scene

BROWSER = find_browser()


@pytest.fixture(scope="module")
def four_bar_traj():
    m = ld.examples.four_bar()
    return ld.simulate(m, m.q0, np.zeros(m.nv), 1.0, t_eval=np.linspace(0, 1, 41))


def test_html_is_one_offline_file_with_every_frame(four_bar_traj, tmp_path):
    path = export_html(four_bar_traj, tmp_path / "fb.html")
    html = path.read_text(encoding="utf-8")
    # plotly.js inlined, nothing fetched from the network
    assert "plotly.js" in html and not re.search(r"<script[^>]+src=", html)
    data = json.loads(re.search(r"const D = (\{.*?\});\n", html).group(1))
    assert len(data["t"]) == 41 and len(data["poses"]) == 41
    assert len(data["visuals"]) == 3 and len(data["markers"]["closure"]) == 2
    np.testing.assert_allclose(data["energy"], four_bar_traj.energy, rtol=1e-8)


def test_payload_poses_reproduce_world_vertices(four_bar_traj):
    s = build_scene(four_bar_traj)
    d = _payload(s)
    f, i = 23, 1
    v = s.visuals[i]
    P = np.array(d["poses"][f][v.body])
    R, p = P[:9].reshape(3, 3), P[9:]
    W = np.array(d["visuals"][i]["v"]) @ R.T + p
    np.testing.assert_allclose(W, s.world_vertices(i, f), atol=5e-6)


def test_bad_path_is_refused(tmp_path):
    with pytest.raises(ValueError, match="html"):
        export_html(ld.examples.four_bar(), tmp_path / "x.png")


def _chromium(args, timeout=120):
    cmd = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--use-angle=swiftshader",
           "--enable-unsafe-swiftshader", "--virtual-time-budget=8000", *args]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@pytest.mark.skipif(BROWSER is None, reason="no Chromium on the PATH (apt-get install chromium)")
def test_page_renders_in_a_headless_browser(four_bar_traj, tmp_path):
    from PIL import Image

    path = export_html(four_bar_traj, tmp_path / "fb.html")
    png = screenshot(path, tmp_path / "fb.png")
    img = np.asarray(Image.open(png).convert("RGB")).astype(int)
    assert img.reshape(-1, 3).std(axis=0).max() > 5.0, "the screenshot is blank"
    # the four-bar's links (on a loop: orange) are drawn by WebGL
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    orange = (r > g + 20) & (g > b + 20) & (r > 80)
    assert orange.sum() > 500, f"only {orange.sum()} orange pixels: the meshes are not drawn"
    # the page's script ran: the info line shows frame 0's energy
    dom = _chromium(["--dump-dom", path.as_uri()]).stdout
    e0 = f"{four_bar_traj.energy[0]:.8g}"[:6]
    assert re.search(r'id="ld-info"[^>]*>t = 0\.000 s', dom) and e0 in dom

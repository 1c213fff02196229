"""A self-contained HTML file of a model or a trajectory: ``export_html``.

One file that opens offline in any browser with WebGL: plotly.js is inlined (it
ships inside the ``plotly`` Python package, ``pip install loopdyn[viz]``), the
scene of ``loopdyn.viz.scene`` is drawn as one ``Mesh3d`` trace per visual and two
``Scatter3d`` traces of markers (joints: dark dots; closure / cut joints: red
rings).  The meshes are stored once, in their body frames, with the body poses
of every frame; a small script moves them (play / pause, a time slider, a speed
choice) and shows t, the closure residual max |Φ(q)| and the energy T + V of the
frame on show.
"""

import json
from pathlib import Path

import numpy as np

from loopdyn.viz.scene import COLORS, build_scene

_DIV = "loopdyn-scene"


def _rgb(c):
    return "rgb({},{},{})".format(*(round(255 * x) for x in c))


def _camera(scene, lo, hi):
    """Plotly scene layout: fixed axis ranges over the whole motion, equal scales;
    planar models seen along z with y up, spatial ones from an isometric eye
    with the world's up (against gravity) up."""
    span = max(float((hi - lo).max()), 1e-3)
    mid = 0.5 * (lo + hi)
    half = np.maximum(0.5 * (hi - lo), 0.05 * span) * 1.08
    lo, hi = mid - half, mid + half
    ratio = (hi - lo) / (hi - lo).max()
    axes = {
        f"{a}axis": {"range": [float(lo[i]), float(hi[i])], "title": f"{a} (m)"}
        for i, a in enumerate("xyz")
    }
    if scene.planar:
        eye, up = {"x": 0.0, "y": 0.0, "z": 1.4}, {"x": 0, "y": 1, "z": 0}
        axes["zaxis"].update(visible=False)
    else:
        u = scene.up
        # isometric: along (1, 1, 1) tilted towards the up axis
        e = np.array([1.0, -1.0, 1.0]) if abs(u[2]) > 0.5 else np.array([1.0, 1.0, -1.0])
        e = e + 0.6 * u
        e = 1.8 * e / np.linalg.norm(e)
        eye, up = (
            dict(zip("xyz", e.tolist(), strict=True)),
            dict(zip("xyz", u.tolist(), strict=True)),
        )
    return {
        **axes,
        "aspectmode": "manual",
        "aspectratio": dict(zip("xyz", ratio.tolist(), strict=True)),
        "camera": {"eye": eye, "up": up},
    }


def _lift(scene):
    """Planar models: markers drawn 1.5 stick radii above the plane (towards the
    camera), so that the links do not hide them."""
    return np.array([0.0, 0.0, 1.5 * scene.radius]) if scene.planar else np.zeros(3)


def scene_figure(scene, frame=0, height=650):
    """A plotly ``Figure`` of ``scene`` at ``frame``: meshes, joint markers, closure
    markers, axes fitted to the whole motion."""
    import plotly.graph_objects as go

    traces = []
    for i, v in enumerate(scene.visuals):
        W = scene.world_vertices(i, frame)
        traces.append(
            go.Mesh3d(
                x=W[:, 0],
                y=W[:, 1],
                z=W[:, 2],
                i=v.faces[:, 0],
                j=v.faces[:, 1],
                k=v.faces[:, 2],
                color=_rgb(v.color),
                name=v.name,
                flatshading=v.kind == "mesh",
                lighting={"ambient": 0.45, "diffuse": 0.8, "specular": 0.2},
                hoverinfo="name",
                showlegend=False,
            )
        )
    P = scene.marker_positions(frame) + _lift(scene)
    for kind, symbol, size in (("joint", "circle", 5), ("closure", "circle-open", 10)):
        idx = [i for i, m in enumerate(scene.markers) if m.kind == kind]
        traces.append(
            go.Scatter3d(
                x=P[idx, 0],
                y=P[idx, 1],
                z=P[idx, 2],
                mode="markers",
                marker={
                    "size": size,
                    "color": _rgb(COLORS[kind]),
                    "symbol": symbol,
                    "line": {"width": 4, "color": _rgb(COLORS[kind])},
                },
                text=[scene.markers[i].name for i in idx],
                hoverinfo="text",
                name="closures" if kind == "closure" else "joints",
            )
        )
    lo, hi = scene.bounds()
    fig = go.Figure(traces)
    fig.update_layout(
        scene=_camera(scene, lo, hi),
        height=height,
        margin={"l": 0, "r": 0, "t": 30, "b": 0},
        title={"text": scene.model_name, "x": 0.02, "font": {"size": 14}},
        legend={"x": 0.01, "y": 0.95},
        paper_bgcolor="white",
    )
    return fig


def _payload(scene):
    """The per-frame data the page's script needs (rounded to 1 µm / 1e-6)."""
    r = lambda a, d=6: np.round(np.asarray(a, dtype=float), d).tolist()  # noqa: E731
    nb = len(scene.body_names)
    lift = _lift(scene)  # planar bodies turn about z: a local z offset stays a world one
    # poses (F, nbodies, 12): rotation row-major then translation
    P = np.concatenate(
        [scene.poses[:, :, :3, :3].reshape(-1, nb, 9), scene.poses[:, :, :3, 3]], axis=2
    )
    return {
        "t": r(scene.t, 9),
        "residual": [float(f"{x:.3e}") for x in scene.residual],
        "energy": [float(f"{x:.9e}") for x in scene.energy],
        "poses": r(P),
        "visuals": [{"body": v.body, "v": r(v.vertices)} for v in scene.visuals],
        "markers": {
            kind: [
                {"body": m.body, "p": r(m.point + lift)} for m in scene.markers if m.kind == kind
            ]
            for kind in ("joint", "closure")
        },
    }


_SCRIPT = r"""
(function () {
  const D = __DATA__;
  const gd = document.getElementById("__DIV__");
  const F = D.t.length, NV = D.visuals.length;
  const bar = document.createElement("div");
  bar.style.cssText = "font:14px sans-serif;padding:6px 10px;display:flex;gap:12px;" +
    "align-items:center";
  bar.innerHTML = '<button id="ld-play">play</button>' +
    '<input id="ld-slider" type="range" min="0" max="' + (F - 1) + '" value="0" style="flex:1">' +
    '<label>speed <select id="ld-speed"><option>0.25</option><option>0.5</option>' +
    '<option selected>1</option><option>2</option><option>4</option></select></label>' +
    '<span id="ld-info" style="font-family:monospace"></span>';
  gd.parentNode.insertBefore(bar, gd);
  const play = document.getElementById("ld-play"), slider = document.getElementById("ld-slider");
  const speed = document.getElementById("ld-speed"), info = document.getElementById("ld-info");
  if (F < 2) { play.disabled = true; slider.disabled = true; }
  function place(pose, p, out) {
    out[0] = pose[0] * p[0] + pose[1] * p[1] + pose[2] * p[2] + pose[9];
    out[1] = pose[3] * p[0] + pose[4] * p[1] + pose[5] * p[2] + pose[10];
    out[2] = pose[6] * p[0] + pose[7] * p[1] + pose[8] * p[2] + pose[11];
  }
  function world(f, body, pts) {
    const x = [], y = [], z = [], o = [0, 0, 0];
    for (const p of pts) {
      if (body < 0) { o[0] = p[0]; o[1] = p[1]; o[2] = p[2]; } else place(D.poses[f][body], p, o);
      x.push(o[0]); y.push(o[1]); z.push(o[2]);
    }
    return [x, y, z];
  }
  function show(f) {
    const X = [], Y = [], Z = [], idx = [];
    D.visuals.forEach(function (v, i) {
      if (v.body < 0) return;
      const w = world(f, v.body, v.v); X.push(w[0]); Y.push(w[1]); Z.push(w[2]); idx.push(i);
    });
    ["joint", "closure"].forEach(function (kind, k) {
      const ms = D.markers[kind], x = [], y = [], z = [], o = [0, 0, 0];
      for (const m of ms) {
        if (m.body < 0) { o[0] = m.p[0]; o[1] = m.p[1]; o[2] = m.p[2]; }
        else place(D.poses[f][m.body], m.p, o);
        x.push(o[0]); y.push(o[1]); z.push(o[2]);
      }
      X.push(x); Y.push(y); Z.push(z); idx.push(NV + k);
    });
    Plotly.restyle(gd, {x: X, y: Y, z: Z}, idx);
    info.textContent = "t = " + D.t[f].toFixed(3) + " s   max|\u03a6| = " +
      D.residual[f].toExponential(2) + "   E = " + D.energy[f].toPrecision(8) + " J";
  }
  let frame = 0, playing = false, last = null, tsim = D.t[0];
  function tick(now) {
    if (!playing) return;
    if (last !== null) {
      tsim += (now - last) / 1000 * parseFloat(speed.value);
      if (tsim > D.t[F - 1]) tsim = D.t[0];
      let f = frame;
      while (f + 1 < F && D.t[f + 1] <= tsim) f++;
      if (D.t[f] > tsim) { f = 0; while (f + 1 < F && D.t[f + 1] <= tsim) f++; }
      if (f !== frame) { frame = f; slider.value = f; show(f); }
    }
    last = now;
    requestAnimationFrame(tick);
  }
  play.onclick = function () {
    playing = !playing; play.textContent = playing ? "pause" : "play"; last = null;
    if (playing) { tsim = D.t[frame]; requestAnimationFrame(tick); }
  };
  slider.oninput = function () { frame = parseInt(slider.value); tsim = D.t[frame]; show(frame); };
  info.textContent = "t = " + D.t[0].toFixed(3) + " s   max|\u03a6| = " +
    D.residual[0].toExponential(2) + "   E = " + D.energy[0].toPrecision(8) + " J";
  window.loopdynShow = show;
})();
"""


def export_html(obj, path, model=None, max_frames=300, mesh_dirs=(), meshes=True, height=650):
    """Write ``path``: one self-contained HTML page of a model or a trajectory.

    ``obj``: a ``Model`` (drawn at ``model.q0``) or a ``Trajectory`` (``model``: its
    model when not attached nor in the catalog; at most ``max_frames`` frames,
    evenly picked).  The page inlines plotly.js (~4.6 MB) and needs no network.
    Returns the path.  Raises ``ImportError`` naming the extra when plotly is
    missing, ``ValueError`` for a path that is not ``.html``.
    """
    try:
        import plotly.io  # noqa: F401
    except ImportError as e:
        raise ImportError("the HTML export needs plotly: pip install 'loopdyn[viz]'") from e
    path = Path(path)
    if path.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"export_html writes an .html file, got {path.name!r}")
    scene = build_scene(obj, model=model, max_frames=max_frames, mesh_dirs=mesh_dirs, meshes=meshes)
    fig = scene_figure(scene, 0, height=height)
    js = _SCRIPT.replace("__DATA__", json.dumps(_payload(scene), separators=(",", ":")))
    js = js.replace("__DIV__", _DIV)
    html = fig.to_html(
        include_plotlyjs=True,
        full_html=True,
        div_id=_DIV,
        post_script=js,
        config={"displaylogo": False, "responsive": True},
    )
    html = html.replace("<head>", f"<head><title>{scene.model_name} · loopdyn</title>", 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")
    return path


BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser():
    """Path of a Chromium-family browser on the PATH, or None."""
    import shutil

    return next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)


def screenshot(html_path, png_path, size=(1000, 750), browser=None, wait_ms=8000):
    """Render ``html_path`` in headless Chromium (software WebGL) into ``png_path``.

    Returns the PNG path.  Raises ``RuntimeError`` when no browser is found or it
    writes no image.
    """
    import subprocess

    browser = browser or find_browser()
    if browser is None:
        raise RuntimeError(f"no headless browser on the PATH (one of {', '.join(BROWSERS)})")
    png_path = Path(png_path).resolve()
    png_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--use-angle=swiftshader",
           "--enable-unsafe-swiftshader", "--hide-scrollbars", f"--virtual-time-budget={wait_ms}",
           f"--window-size={size[0]},{size[1]}", f"--screenshot={png_path}",
           Path(html_path).resolve().as_uri()]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    if not png_path.is_file():
        raise RuntimeError(f"{browser} wrote no screenshot: {r.stderr.strip()[-300:]}")
    return png_path

"""Stills of the 3D scene without a browser: ``render_still`` (matplotlib).

The scene of ``loopdyn.viz.scene`` (file meshes, stick capsules, inertia boxes)
drawn as shaded triangles (Lambert shading, light from the camera's upper left)
from an isometric camera fitted to the scene's bounding box (planar models:
seen along z), with the joint and closure markers on top.  Used by the docs
gallery (``docs/gallery.py``) for spatial models and meshes.
"""

from pathlib import Path

import numpy as np

from loopdyn.viz.plotting import _pyplot, isometric_view
from loopdyn.viz.scene import COLORS, build_scene


def render_still(
    obj, path=None, frame=0, model=None, meshes=True, size=(6.0, 5.0), dpi=110, title=None
):
    """Draw a ``Model`` (at ``model.q0``) or a ``Trajectory`` (its ``frame``-th point;
    ``-1``: the last) as its 3D scene; save to ``path`` (PNG, PDF, SVG …) when given.
    Returns the matplotlib figure."""
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection

    plt = _pyplot()
    scene = build_scene(obj, model=model, meshes=meshes)
    f = range(scene.n_frames)[frame]
    tris, cols = [], []
    light = np.array([-0.4, -0.6, 0.7])
    light /= np.linalg.norm(light)
    for i, v in enumerate(scene.visuals):
        W = scene.world_vertices(i, f)
        T = W[v.faces]
        n = np.cross(T[:, 1] - T[:, 0], T[:, 2] - T[:, 0])
        n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-300)
        shade = 0.45 + 0.55 * np.abs(n @ light)
        tris.append(T)
        cols.append(np.clip(np.outer(shade, v.color), 0.0, 1.0))
    fig = plt.figure(figsize=size)
    ax = fig.add_subplot(projection="3d")
    if tris:
        pc = Poly3DCollection(np.concatenate(tris), facecolors=np.concatenate(cols), linewidths=0)
        ax.add_collection3d(pc)
    P = scene.marker_positions(f)
    for kind, style in (
        ("joint", {"mfc": "white", "mec": "k", "ms": 4}),
        ("closure", {"mfc": "none", "mec": COLORS["closure"], "ms": 8, "mew": 1.5}),
    ):
        idx = [i for i, m in enumerate(scene.markers) if m.kind == kind]
        if idx:
            ax.plot(P[idx, 0], P[idx, 1], P[idx, 2], "o", linestyle="none", zorder=10, **style)
    lo, hi = scene.bounds([f])
    mid, half = 0.5 * (lo + hi), np.maximum(0.5 * (hi - lo), 0.08 * float((hi - lo).max()))
    ax.set_xlim(mid[0] - half[0], mid[0] + half[0])
    ax.set_ylim(mid[1] - half[1], mid[1] + half[1])
    ax.set_zlim(mid[2] - half[2], mid[2] + half[2])
    ax.set_box_aspect(tuple(2 * half))
    if scene.planar:
        ax.view_init(elev=90.0, azim=-90.0)
    else:
        isometric_view(ax, scene.up)
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.set_zlabel("z (m)")
    ax.set_title(title if title is not None else f"{scene.model_name} (t = {scene.t[f]:.2f} s)")
    fig.tight_layout()
    if path is not None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=dpi)
    return fig

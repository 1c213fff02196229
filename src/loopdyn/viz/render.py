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

_LIGHT = np.array([-0.4, -0.6, 0.7]) / np.linalg.norm([-0.4, -0.6, 0.7])


def _draw(ax, scene, f):
    """Add frame ``f`` of ``scene`` to 3D axes ``ax``: shaded triangles (Lambert,
    |n·l|) and the markers; returns the artists."""
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection

    tris, cols = [], []
    for i, v in enumerate(scene.visuals):
        T = scene.world_vertices(i, f)[v.faces]
        n = np.cross(T[:, 1] - T[:, 0], T[:, 2] - T[:, 0])
        n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-300)
        tris.append(T)
        cols.append(np.clip(np.outer(0.45 + 0.55 * np.abs(n @ _LIGHT), v.color), 0.0, 1.0))
    artists = []
    if tris:
        pc = Poly3DCollection(np.concatenate(tris), facecolors=np.concatenate(cols), linewidths=0)
        artists.append(ax.add_collection3d(pc))
    P = scene.marker_positions(f)
    for kind, style in (
        ("joint", {"mfc": "white", "mec": "k", "ms": 4}),
        ("closure", {"mfc": "none", "mec": COLORS["closure"], "ms": 8, "mew": 1.5}),
    ):
        idx = [i for i, m in enumerate(scene.markers) if m.kind == kind]
        if idx:
            artists += ax.plot(
                P[idx, 0], P[idx, 1], P[idx, 2], "o", linestyle="none", zorder=10, **style
            )
    return artists


def _axes(plt, scene, frames, size):
    """A figure and 3D axes fitted to the scene over ``frames``: isometric camera
    (planar models: seen along z), equal scales."""
    fig = plt.figure(figsize=size)
    ax = fig.add_subplot(projection="3d")
    lo, hi = scene.bounds(frames)
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
    return fig, ax


def render_still(
    obj, path=None, frame=0, model=None, meshes=True, size=(6.0, 5.0), dpi=110, title=None
):
    """Draw a ``Model`` (at ``model.q0``) or a ``Trajectory`` (its ``frame``-th point;
    ``-1``: the last) as its 3D scene; save to ``path`` (PNG, PDF, SVG …) when given.
    Returns the matplotlib figure."""
    plt = _pyplot()
    scene = build_scene(obj, model=model, meshes=meshes)
    f = range(scene.n_frames)[frame]
    fig, ax = _axes(plt, scene, [f], size)
    _draw(ax, scene, f)
    ax.set_title(title if title is not None else f"{scene.model_name} (t = {scene.t[f]:.2f} s)")
    fig.tight_layout()
    if path is not None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=dpi)
    return fig


def animate_scene(traj, path, model=None, fps=15, speed=1.0, dpi=70, meshes=True, size=(6, 5)):
    """Write ``path`` (.gif with Pillow, .mp4 with ffmpeg): the trajectory's 3D scene
    moving (the output point nearest each video frame's time), axes fitted to the
    whole motion.  The 3D-scene counterpart of ``Trajectory.animate``."""
    from matplotlib import animation

    plt = _pyplot()
    path = Path(path)
    if path.suffix.lower() not in (".gif", ".mp4"):
        raise ValueError(f"animate writes .gif or .mp4 files, got {path.name!r}")
    if not speed > 0 or not fps > 0:
        raise ValueError("fps and speed must be positive")
    scene = build_scene(traj, model=model, max_frames=None, meshes=meshes)
    n = max(2, int(np.floor((scene.t[-1] - scene.t[0]) / speed * fps)) + 1)
    tf = np.linspace(scene.t[0], scene.t[-1], n)
    frames = np.clip(np.searchsorted(scene.t, tf), 0, scene.n_frames - 1)
    fig, ax = _axes(plt, scene, np.unique(frames), size)
    drawn = []

    def update(k):
        for a in drawn:
            a.remove()
        drawn[:] = _draw(ax, scene, frames[k])
        ax.set_title(f"{scene.model_name}: t = {scene.t[frames[k]]:.2f} s")
        return drawn

    writer = (
        animation.PillowWriter(fps=fps)
        if path.suffix.lower() == ".gif"
        else animation.FFMpegWriter(fps=fps)
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    animation.FuncAnimation(fig, update, frames=n, blit=False).save(str(path), writer, dpi=dpi)
    plt.close(fig)
    return path

"""Figures and animations of trajectories (matplotlib, imported lazily, Agg backend).

``plot_trajectory``: coordinates, closure residuals and energy drift against time.
``animate_trajectory``: a GIF (Pillow) or MP4 (ffmpeg) of the mechanism, drawn as
a skeleton: each body a set of segments from its joint to the joints of its
children and to its frames (closure frames included); ground pivots as triangles,
loop closures as red rings; thick links, one colour per body, joints as white
dots.  Planar models are drawn in the x–y plane, others in 3D from an isometric
camera fitted to the motion's bounding box (``isometric_view``).
``loopdyn.viz.render`` draws the 3D scene (meshes) instead of the skeleton.
"""

from pathlib import Path

import numpy as np

from loopdyn.viz.scene import skeleton, up_direction


def _pyplot():
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "pdf", "svg", "ps", "cairo"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _coordinate_labels(traj, model, which):
    n = traj.q.shape[1] if which == "q" else traj.v.shape[1]
    if model is None:
        return [f"{which}[{i}]" for i in range(n)]
    labels = [f"{which}[{i}]" for i in range(n)]
    for b in range(model.nbodies):
        s = model.q_slice(b) if which == "q" else model.v_slice(b)
        for k, i in enumerate(range(s.start, s.stop)):
            suffix = f".{k}" if s.stop - s.start > 1 else ""
            labels[i] = f"{model.joint_names[b]}{suffix}"
    return labels


def plot_trajectory(traj, path=None, what=("q", "residuals", "energy"), title=None):
    """Figure with one panel per entry of ``what`` (q, v, tau, residuals, energy)."""
    plt = _pyplot()
    allowed = ("q", "v", "tau", "residuals", "energy")
    what = (what,) if isinstance(what, str) else tuple(what)
    bad = [w for w in what if w not in allowed]
    if bad or not what:
        raise ValueError(f"unknown panels {bad}; choose among {', '.join(allowed)}")
    model = traj.model
    fig, axes = plt.subplots(len(what), 1, figsize=(8, 2.6 * len(what)), sharex=True, squeeze=False)
    t = traj.t
    for ax, w in zip(axes[:, 0], what, strict=True):
        if w in ("q", "v"):
            data = traj.q if w == "q" else traj.v
            labels = _coordinate_labels(traj, model, w)
            for i in range(data.shape[1]):
                ax.plot(t, data[:, i], label=labels[i])
            ax.set_ylabel("q (rad, m)" if w == "q" else "v (rad/s, m/s)")
            if data.shape[1] <= 8:
                ax.legend(fontsize=8, loc="best")
        elif w == "tau":
            cols = np.flatnonzero(np.any(traj.tau != 0.0, axis=0))
            labels = _coordinate_labels(traj, model, "v")
            for i in cols:
                ax.plot(t, traj.tau[:, i], label=labels[i])
            ax.set_ylabel("τ (N·m, N)")
            if 0 < cols.size <= 8:
                ax.legend(fontsize=8, loc="best")
        elif w == "residuals":
            floor = 1e-17
            ax.semilogy(t, np.maximum(traj.residual_position, floor), label="max |Φ(q)|")
            ax.semilogy(t, np.maximum(traj.residual_velocity, floor), label="max |J v|")
            ax.set_ylabel("closure residual")
            ax.legend(fontsize=8, loc="best")
        else:
            ax.plot(t, traj.energy_drift)
            ax.set_ylabel("E(t) - E(0) (J)")
            ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
        ax.grid(True, alpha=0.3)
    axes[-1, 0].set_xlabel("t (s)")
    if title is None:
        title = (
            f"{traj.model_name}: {traj.method}, {traj.integrator}, "
            f"stabilization = {traj.stabilization}"
        )
    fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
    return fig


# ------------------------------------------------------------------ skeleton
def _world(model, q, skel):
    """World segments [(origin, point) ...], closure points, body origins at q."""
    from loopdyn.kinematics.frames import forward_kinematics

    Xw = np.array(forward_kinematics(model, q).Xw)
    pts, _, closures = skel
    segs = []
    origins = np.empty((model.nbodies, 3))
    for b in range(model.nbodies):
        R, o = Xw[b, :3], Xw[b, 3]
        origins[b] = o
        for x in pts[b]:
            segs.append((o, R @ x + o))  # one colour per body: see _segment_colors
    cl = np.array([Xw[b, :3] @ x + Xw[b, 3] if b >= 0 else x for b, x in closures]).reshape(-1, 3)
    return segs, cl, origins


def _segment_colors(skel):
    """Colour of each drawn segment: one per body (``C0``, ``C1`` … in body order), so
    a body's segments read as one link."""
    return [f"C{b % 10}" for b, P in enumerate(skel[0]) for _ in range(len(P))]


def _frame_times(t, fps, speed):
    n = max(2, int(np.floor((t[-1] - t[0]) / speed * fps)) + 1)
    return np.linspace(t[0], t[-1], n)


def _interp_q(traj, tf):
    q = np.empty((tf.size, traj.q.shape[1]))
    for j in range(traj.q.shape[1]):
        q[:, j] = np.interp(tf, traj.t, traj.q[:, j])
    return q


def animate_trajectory(traj, path, model=None, fps=30, speed=1.0, trace=None, dpi=80):
    """Write ``path`` (.gif with Pillow, .mp4 with ffmpeg): the mechanism moving."""
    from matplotlib import animation

    plt = _pyplot()
    model = traj.resolve_model(model)
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".gif", ".mp4"):
        raise ValueError(f"animate writes .gif or .mp4 files, got {path.name!r}")
    if suffix == ".mp4" and not animation.FFMpegWriter.isAvailable():
        raise RuntimeError("writing .mp4 needs ffmpeg on the PATH; write a .gif instead")
    if len(traj) < 2:
        raise ValueError("animate needs a trajectory with at least two points")
    if not speed > 0 or not fps > 0:
        raise ValueError("fps and speed must be positive")
    skel = skeleton(model)
    tf = _frame_times(traj.t, fps, speed)
    Qf = _interp_q(traj, tf)
    frames = [_world(model, q, skel) for q in Qf]
    trace_pts = None
    if trace is not None:
        from loopdyn.kinematics.frames import frame_placement

        trace_pts = np.array([frame_placement(model, q, trace)[1] for q in Qf])
    planar = bool(getattr(model, "planar", False))
    fig, ax = _scene(plt, planar, skel, frames, up_direction(model))
    colors = _segment_colors(skel)
    if planar:
        lines = [ax.plot([], [], "-", lw=5, color=c, solid_capstyle="round")[0] for c in colors]
        joints = ax.plot([], [], "o", mfc="white", mec="k", mew=1.2, ms=5, zorder=3)[0]
        loops = ax.plot([], [], "o", mfc="none", mec="C3", mew=2, ms=10, zorder=4)[0]
        path_line = ax.plot([], [], ":", color="0.4", lw=1)[0]
        label = ax.text(0.02, 0.95, "", transform=ax.transAxes)
    else:
        lines = [ax.plot([], [], [], "-", lw=4, color=c, solid_capstyle="round")[0] for c in colors]
        joints = ax.plot([], [], [], "o", mfc="white", mec="k", mew=1, ms=4)[0]
        loops = ax.plot([], [], [], "o", mfc="none", mec="C3", mew=1.5, ms=8)[0]
        path_line = ax.plot([], [], [], ":", color="0.4", lw=1)[0]
        label = ax.text2D(0.02, 0.95, "", transform=ax.transAxes)
    ax.set_title(f"{traj.model_name} ({traj.method}, {traj.stabilization})")

    def update(k):
        segs, cl, org = frames[k]
        for line, (a, b) in zip(lines, segs, strict=True):
            if planar:
                line.set_data([a[0], b[0]], [a[1], b[1]])
            else:
                line.set_data_3d([a[0], b[0]], [a[1], b[1]], [a[2], b[2]])
        if planar:
            joints.set_data(org[:, 0], org[:, 1])
            loops.set_data(cl[:, 0], cl[:, 1])
            if trace_pts is not None:
                path_line.set_data(trace_pts[: k + 1, 0], trace_pts[: k + 1, 1])
        else:
            joints.set_data_3d(org[:, 0], org[:, 1], org[:, 2])
            loops.set_data_3d(cl[:, 0], cl[:, 1], cl[:, 2])
            if trace_pts is not None:
                p = trace_pts[: k + 1]
                path_line.set_data_3d(p[:, 0], p[:, 1], p[:, 2])
        label.set_text(f"t = {tf[k]:.2f} s")
        return [*lines, joints, loops, path_line, label]

    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".mp4":
        anim = animation.FuncAnimation(fig, update, frames=len(frames), blit=False)
        anim.save(str(path), writer=animation.FFMpegWriter(fps=fps, bitrate=1800), dpi=dpi)
        plt.close(fig)
        return path
    # GIF: draw the static background once, then only the moving artists (blitting)
    from PIL import Image

    fig.set_dpi(dpi)
    canvas = fig.canvas
    artists = update(0)
    for a in artists:
        a.set_animated(True)
    canvas.draw()
    background = canvas.copy_from_bbox(fig.bbox)
    images = []
    for k in range(len(frames)):
        canvas.restore_region(background)
        for a in update(k):
            a.axes.draw_artist(a)
        canvas.blit(fig.bbox)
        rgb = Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba()).convert(
            "RGB"
        )
        if not images:  # one palette for every frame: colours stay put
            palette = rgb.quantize(colors=128, method=Image.Quantize.MEDIANCUT)
        images.append(rgb.quantize(palette=palette, dither=Image.Dither.NONE))
    images[0].save(
        path, save_all=True, append_images=images[1:], duration=round(1000 / fps), loop=0
    )
    plt.close(fig)
    return path


def _scene(plt, planar, skel, frames, up=(0.0, 0.0, 1.0)):
    """A figure and axes fitted to every frame's points: the x–y plane for planar
    models; for the others, 3D axes around the motion's bounding box (every axis at
    least a quarter of the largest span) seen from an isometric camera with ``up``
    (against gravity) vertical; ground pivots drawn."""
    allp = [skel[1]]
    for segs, cl, org in frames:
        allp += [np.array([p for s in segs for p in s]).reshape(-1, 3), cl, org]
    allp = np.vstack([a for a in allp if a.size])
    lo, hi = allp.min(axis=0), allp.max(axis=0)
    span = max(float((hi - lo).max()), 1e-3)
    lo, hi = lo - 0.08 * span, hi + 0.08 * span
    mid, half = 0.5 * (lo + hi), np.maximum(0.5 * (hi - lo), 0.125 * span)
    lo, hi = mid - half, mid + half
    g = skel[1]
    if planar:
        fig, ax = plt.subplots(figsize=(5.5, 4.5))
        ax.set_aspect("equal")
        ax.set_xlim(lo[0], hi[0])
        ax.set_ylim(lo[1], hi[1])
        ax.set_xlabel("x (m)")
        ax.set_ylabel("y (m)")
        ax.grid(True, alpha=0.3)
        if g.size:
            ax.plot(g[:, 0], g[:, 1], "k^", ms=10, zorder=1)
    else:
        fig = plt.figure(figsize=(6, 5))
        ax = fig.add_subplot(projection="3d")
        ax.set_xlim(lo[0], hi[0])
        ax.set_ylim(lo[1], hi[1])
        ax.set_zlim(lo[2], hi[2])
        ax.set_box_aspect(tuple(hi - lo))
        ax.set_xlabel("x (m)")
        ax.set_ylabel("y (m)")
        ax.set_zlabel("z (m)")
        isometric_view(ax, up)
        if g.size:
            ax.plot(g[:, 0], g[:, 1], g[:, 2], "k^", ms=6)
    return fig, ax


def isometric_view(ax, up=(0.0, 0.0, 1.0)):
    """Point a 3D axes along a cube diagonal (elevation atan(1/√2) = 35.26°,
    azimuth -45°) with the world axis closest to ``up`` vertical."""
    k = int(np.argmax(np.abs(up)))
    elev = 35.26 if up[k] > 0 else -35.26
    ax.view_init(elev=elev, azim=-45.0, vertical_axis="xyz"[k])


def strobe_trajectory(traj, path=None, n=6, model=None, trace=None, dpi=100):
    """A still of the motion: ``n`` configurations evenly spaced in time drawn over
    each other, earlier ones fainter, closure joints as open circles; ``trace``: a
    frame whose path is drawn.  Saved to ``path`` (PNG, PDF, SVG …) when given.
    Returns the figure."""
    plt = _pyplot()
    model = traj.resolve_model(model)
    n = int(n)
    if n < 1 or len(traj) < 1:
        raise ValueError("strobe needs n >= 1 and a trajectory with at least one point")
    skel = skeleton(model)
    tf = np.linspace(traj.t[0], traj.t[-1], n)
    Qf = _interp_q(traj, tf) if len(traj) > 1 else np.repeat(traj.q[:1], n, axis=0)
    frames = [_world(model, q, skel) for q in Qf]
    planar = bool(getattr(model, "planar", False))
    fig, ax = _scene(plt, planar, skel, frames, up_direction(model))
    dims = 2 if planar else 3
    colors = _segment_colors(skel)
    for k, (segs, cl, org) in enumerate(frames):
        alpha = 0.25 + 0.75 * (k + 1) / n
        for (a, b), c in zip(segs, colors, strict=True):
            ax.plot(*[[a[j], b[j]] for j in range(dims)], "-", lw=3.5, color=c, alpha=alpha,
                    solid_capstyle="round")  # fmt: skip
        ax.plot(*[org[:, j] for j in range(dims)], "o", mfc="white", mec="k", ms=4, alpha=alpha)
        if cl.size:
            ax.plot(*[cl[:, j] for j in range(dims)], "o", mfc="none", mec="C3", mew=1.5, ms=8,
                    alpha=alpha)  # fmt: skip
    if trace is not None:
        from loopdyn.kinematics.frames import frame_placement

        tt = np.linspace(traj.t[0], traj.t[-1], 200)
        P = np.array([frame_placement(model, q, trace)[1] for q in _interp_q(traj, tt)])
        ax.plot(*[P[:, j] for j in range(dims)], ":", color="0.3", lw=1)
    ax.set_title(f"{traj.model_name}: t = {tf[0]:.2f} … {tf[-1]:.2f} s ({n} instants)")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=dpi)
    return fig

"""Interactive 3D viewer in the browser: ``ld.view(model_or_trajectory)`` (viser).

viser ships its web client inside its Python package (``pip install loopdyn[viz]``):
the viewer works offline at ``http://HOST:PORT``.  It draws the scene of
``loopdyn.viz.scene`` (file meshes or stick capsules, joints as dark spheres,
closure / cut joints as red spheres, loop bodies coloured apart):

- a **trajectory**: play / pause, a frame slider to scrub, a speed factor, and
  t, the closure residual max |Φ(q)| and the energy T + V of the frame on show;
- a **model**: one slider per independent coordinate (generalized coordinate
  partitioning, ``ld.partition`` at ``model.q0``); moving one re-assembles the
  mechanism (``ld.assemble`` with the independent coordinates held), so the loops
  follow the dragged joint; the residual and the potential energy are shown, and
  a configuration where the loops cannot close is reported and not shown.
"""

import threading
import time

import numpy as np

from loopdyn.viz.scene import COLORS, build_scene


def _rgb255(c):
    return tuple(round(255 * x) for x in c)


def _wxyz(R):
    """Unit quaternion (w, x, y, z) of rotation matrix R (Shepperd's method)."""
    t = np.trace(R)
    if t > 0:
        s = 2.0 * np.sqrt(1.0 + t)
        q = [0.25 * s, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s]
    else:
        i = int(np.argmax(np.diag(R)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(max(1.0 + R[i, i] - R[j, j] - R[k, k], 1e-300))
        q = np.zeros(4)
        q[0] = (R[k, j] - R[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (R[j, i] + R[i, j]) / s
        q[1 + k] = (R[k, i] + R[i, k]) / s
    q = np.asarray(q, dtype=float)
    return q / np.linalg.norm(q)


def _independent(model, q, partition):
    """The coordinates to drive (indices into v): the actuated ones when they are a
    valid independent set at q (the remaining columns of J square and
    well-conditioned), else generalized coordinate partitioning's choice."""
    from loopdyn.kinematics.closures import constraint_jacobian

    act = np.asarray(model.actuated, dtype=np.int64)
    if model.m and act.size:
        dep = np.setdiff1d(np.arange(model.nv), act)
        J = constraint_jacobian(model, q)[:, dep]
        if J.shape[0] == J.shape[1] and np.linalg.cond(J) < 1e8:
            return act
    return partition(model, q).independent


class Viewer:
    """A running viser server showing a model or a trajectory.

    ``server`` (``viser.ViserServer``), ``scene`` (``loopdyn.viz.scene.Scene``),
    ``url``; ``bodies[b]``: the scene node of body b (its visuals and markers are
    its children); ``frame``: the trajectory frame on show; for a model, ``q``
    the configuration on show and ``independent`` the coordinates (indices into
    v) with a slider.  ``close()`` stops the server.
    """

    def __init__(
        self,
        obj,
        model=None,
        host="127.0.0.1",
        port=8080,
        max_frames=2000,
        mesh_dirs=(),
        meshes=True,
    ):
        try:
            import viser
        except ImportError as e:
            raise ImportError("the viewer needs viser: pip install 'loopdyn[viz]'") from e
        from loopdyn.sim.trajectory import Trajectory

        self.is_trajectory = isinstance(obj, Trajectory)
        self.model = obj.resolve_model(model) if self.is_trajectory else obj
        self.scene = build_scene(
            obj, model=model, max_frames=max_frames, mesh_dirs=mesh_dirs, meshes=meshes
        )
        self.server = viser.ViserServer(host=host, port=port, verbose=False)
        self.url = f"http://{host}:{self.server.get_port()}"
        self.frame = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._add_scene()
        if self.is_trajectory:
            self._add_player()
        else:
            self._add_sliders()
        self.show_frame(0)

    # ------------------------------------------------------------ scene
    def _add_scene(self):
        s, sv = self.scene, self.server.scene
        sv.set_up_direction(tuple(float(x) for x in s.up))
        self.bodies = [sv.add_frame(f"/bodies/{name}", show_axes=False) for name in s.body_names]
        for i, v in enumerate(s.visuals):
            parent = "/ground" if v.body < 0 else f"/bodies/{s.body_names[v.body]}"
            sv.add_mesh_simple(
                f"{parent}/visual{i}",
                v.vertices.astype(np.float32),
                v.faces.astype(np.uint32),
                color=_rgb255(v.color),
                flat_shading=v.kind == "mesh",
            )
        for i, mk in enumerate(s.markers):
            parent = "/ground" if mk.body < 0 else f"/bodies/{s.body_names[mk.body]}"
            big = mk.kind == "closure"
            sv.add_icosphere(
                f"{parent}/{mk.kind}{i}",
                radius=(1.6 if big else 1.25) * s.radius,
                color=_rgb255(COLORS[mk.kind]),
                position=tuple(mk.point),
                subdivisions=2,
            )
        self.info = self.server.gui.add_markdown("")

    def _place(self, poses):
        with self.server.atomic():
            for b, h in enumerate(self.bodies):
                X = poses[b]
                h.position = tuple(X[:3, 3])
                h.wxyz = tuple(_wxyz(X[:3, :3]))

    def _show_info(self, t, residual, energy, note=""):
        line = f"**t** = {t:.3f} s · **max \\|Φ\\|** = {residual:.2e} · **E** = {energy:.8g} J"
        self.info.content = line + (f"\n\n{note}" if note else "")

    def show_frame(self, f):
        """Show frame ``f`` of the scene (a trajectory's f-th point)."""
        s = self.scene
        f = int(np.clip(f, 0, s.n_frames - 1))
        with self._lock:
            self.frame = f
            self._place(s.poses[f])
            self._show_info(s.t[f], s.residual[f], s.energy[f])

    # ------------------------------------------------------------ trajectory
    def _add_player(self):
        gui, s = self.server.gui, self.scene
        self.playing = gui.add_checkbox("play", False)
        self.slider = gui.add_slider("frame", 0, max(s.n_frames - 1, 1), 1, 0)
        self.speed = gui.add_number("speed", 1.0, min=0.01, max=100.0, step=0.05)
        self.slider.on_update(lambda _: self.show_frame(self.slider.value))
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self, fps=30.0):
        """Advance the slider in real time × speed while ``play`` is ticked."""
        s = self.scene
        tsim, last = s.t[0], None
        while not self._stop.wait(1.0 / fps):
            now = time.perf_counter()
            if not self.playing.value or s.n_frames < 2:
                last = None
                continue
            if last is None:
                tsim = s.t[self.frame]
            else:
                tsim += (now - last) * float(self.speed.value)
                if tsim > s.t[-1]:
                    tsim = s.t[0]
            last = now
            f = int(np.searchsorted(s.t, tsim, side="right")) - 1
            if f != self.frame:
                self.slider.value = f  # calls show_frame

    def play(self):
        """Start playing (as ticking ``play`` in the page)."""
        self.playing.value = True

    def pause(self):
        self.playing.value = False

    # ------------------------------------------------------------ model
    def _add_sliders(self):
        from loopdyn.analysis.assembly import partition

        m, s = self.model, self.scene
        self.q = s.q[0].copy()
        self.independent = _independent(m, self.q, partition)
        lo, hi = s.bounds()
        reach = max(float((hi - lo).max()), 0.1)
        self.sliders = []
        self._offsets = np.zeros(self.independent.size)
        for k, i in enumerate(self.independent):
            b = next(b for b in range(m.nbodies) if m.v_slice(b).start <= i < m.v_slice(b).stop)
            vs = m.v_slice(b)
            label = m.joint_names[b] + (f".{i - vs.start}" if vs.stop - vs.start > 1 else "")
            linear = m.joint_types[b] == "prismatic" or (
                m.joint_types[b] == "free" and i - vs.start >= 3
            )
            r = 0.5 * reach if linear else np.pi
            sl = self.server.gui.add_slider(f"Δ {label}", -r, r, r / 200, 0.0)
            sl.on_update(lambda _, k=k: self._slider_moved(k))
            self.sliders.append(sl)

    def _slider_moved(self, k):
        self.set_offsets([sl.value for sl in self.sliders])

    def set_offsets(self, offsets):
        """Move the independent coordinates to ``offsets`` from ``model.q0`` (one per
        slider, rad or m, along v) and re-assemble the loops; returns the new q, or
        None (configuration kept, reason shown) when they cannot close there."""
        from loopdyn.analysis.assembly import assemble
        from loopdyn.analysis.energy import total_energy
        from loopdyn.errors import AssemblyError
        from loopdyn.kinematics.closures import closure_residual
        from loopdyn.kinematics.configuration import integrate
        from loopdyn.viz.scene import body_poses

        m = self.model
        offsets = np.asarray(offsets, dtype=float)
        with self._lock:
            # continuation in steps of at most 0.05 (rad or m): the loops stay on their branch
            delta = offsets - self._offsets
            n = max(1, int(np.ceil(np.abs(delta).max(initial=0.0) / 0.05)))
            dv = np.zeros(m.nv)
            dv[self.independent] = delta / n
            q = self.q
            try:
                for _ in range(n):
                    q = integrate(m, q, dv)
                    q = assemble(m, q, fixed=self.independent) if m.m else q
            except AssemblyError as e:
                self._show_info(0.0, float("nan"), float("nan"), f"not shown: {e}")
                return None
            self.q, self._offsets = q, offsets
            self._place(body_poses(m, q[None, :])[0])
            res = float(np.abs(closure_residual(m, q)).max()) if m.m else 0.0
            self._show_info(0.0, res, total_energy(m, q, np.zeros(m.nv)))
        return q

    # ------------------------------------------------------------ lifetime
    def close(self):
        """Stop the playing thread (waiting for it: an update it sends after the server
        stopped would be lost, with a warning) and the server."""
        self._stop.set()
        thread = getattr(self, "_thread", None)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2.0)
        self.server.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def view(
    obj,
    model=None,
    host="127.0.0.1",
    port=8080,
    block=True,
    max_frames=2000,
    mesh_dirs=(),
    meshes=True,
):
    """Show a ``Model`` or a ``Trajectory`` in the browser (viser) at ``http://host:port``.

    ``block=True`` (the command line) serves until Ctrl-C; ``block=False`` returns
    the running :class:`Viewer` at once (notebooks, scripts, tests).  ``model``:
    a trajectory's model when not attached nor in the catalog.  Raises
    ``ImportError`` naming the extra when viser is missing.
    """
    v = Viewer(
        obj,
        model=model,
        host=host,
        port=port,
        max_frames=max_frames,
        mesh_dirs=mesh_dirs,
        meshes=meshes,
    )
    if not block:
        return v
    print(f"loopdyn viewer of {v.scene.model_name}: open {v.url}  (Ctrl-C to stop)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        v.close()
    return v

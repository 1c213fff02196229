"""A 3D scene of a model or a trajectory as plain data (no browser, no GUI).

``build_scene(model_or_trajectory)`` returns a :class:`Scene`: per body its world
pose at every frame, its visuals (triangle meshes in the body frame), joint and
closure (cut-joint) markers, the bodies of each kinematic loop, and per frame the
closure residual and the total energy.  The HTML export (``loopdyn.viz.html``), the
interactive viewer (``loopdyn.viz.viewer``) and the rendered stills
(``loopdyn.viz.render``) all draw from it.

Visuals, per body:

- the ``<visual>`` geometry of the model file (``model.metadata["geometry"]``,
  kept by the URDF / SDFormat readers): mesh files (STL, OBJ, DAE … through
  trimesh) scaled and placed in the body frame, and the file's boxes, cylinders,
  spheres and capsules;
- otherwise the stick geometry of ``skeleton``: a capsule
  from the body's joint to each point it carries (its children's joints, its
  frames, its closure frames), radius 3 % of the model's longest link;
- a body with no such point: the uniform box of its inertia (principal axes,
  centre of mass; edge lengths a with I₁ = m (a₂² + a₃²) / 12 …).

Bodies on a kinematic loop (the tree path between the two bodies of a closure,
their common ancestor included) are coloured apart ("loops highlighted").
Frames: a body's pose ``poses[f, b]`` is a 4×4 homogeneous transform, body frame to
world (``x_world = R x_body + p``).
"""

import importlib.util
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from loopdyn.errors import ModelError

#: RGB colours (0–1): bodies off the loops, bodies on a loop, ground, markers
COLORS = {
    "body": (0.36, 0.56, 0.80),
    "loop": (0.95, 0.55, 0.15),
    "ground": (0.55, 0.55, 0.55),
    "joint": (0.10, 0.10, 0.10),
    "closure": (0.85, 0.10, 0.10),
}


@dataclass(frozen=True)
class Visual:
    """A triangle mesh fixed to a body.

    ``body``: body index (-1: the ground); ``vertices`` (n, 3) in the body frame
    (m), ``faces`` (k, 3) vertex indices; ``kind``: ``mesh`` (a file), ``box``,
    ``capsule``, ``cylinder``, ``sphere``; ``source``: the mesh file, ``file``
    (a primitive of the model file), ``skeleton`` or ``inertia``.
    """

    name: str
    body: int
    kind: str
    vertices: np.ndarray
    faces: np.ndarray
    color: tuple
    source: str
    in_loop: bool


@dataclass(frozen=True)
class Marker:
    """A point to mark: a joint (``kind="joint"``, at the body's joint frame) or one
    end of a closure (``kind="closure"``, side 0 or 1).  ``point`` (3,) is in the
    frame of ``body`` (-1: world)."""

    name: str
    kind: str
    body: int
    point: np.ndarray
    in_loop: bool


@dataclass
class Scene:
    """Everything to draw, for ``F`` frames.

    ``t`` (F,) times (s; zeros for a single configuration), ``q`` (F, nq),
    ``poses`` (F, nbodies, 4, 4) body-to-world transforms, ``residual`` (F,) max
    |Φ(q)| (m, rad), ``energy`` (F,) T + V (J); ``loops``: (closure name, body
    indices) per geometric closure; ``radius``: the stick radius (m), the scale
    of markers; ``up`` (3,) the world's up direction (against gravity; +z without
    gravity); ``notes``: what could not be drawn as the file asks (a missing
    mesh file, no trimesh) and what was drawn instead.
    """

    model_name: str
    planar: bool
    body_names: tuple
    visuals: list
    markers: list
    loops: list
    t: np.ndarray
    q: np.ndarray
    poses: np.ndarray
    residual: np.ndarray
    energy: np.ndarray
    radius: float
    up: np.ndarray
    notes: list = field(default_factory=list)

    @property
    def n_frames(self):
        return self.t.shape[0]

    def world_vertices(self, visual, frame=0):
        """(n, 3) world coordinates of visual ``visual`` (index or Visual) at ``frame``."""
        v = self.visuals[visual] if isinstance(visual, (int, np.integer)) else visual
        if v.body < 0:
            return v.vertices
        X = self.poses[frame, v.body]
        return v.vertices @ X[:3, :3].T + X[:3, 3]

    def marker_positions(self, frame=0):
        """(M, 3) world positions of the markers at ``frame``."""
        out = np.empty((len(self.markers), 3))
        for i, mk in enumerate(self.markers):
            if mk.body < 0:
                out[i] = mk.point
            else:
                X = self.poses[frame, mk.body]
                out[i] = X[:3, :3] @ mk.point + X[:3, 3]
        return out

    def bounds(self, frames=None):
        """(lo, hi) corners of the box holding every visual and marker over ``frames``
        (default: all)."""
        frames = range(self.n_frames) if frames is None else frames
        lo, hi = np.full(3, np.inf), np.full(3, -np.inf)
        for f in frames:
            pts = [self.marker_positions(f)] + [
                self.world_vertices(v, f) for v in self.visuals if v.vertices.size
            ]
            P = np.vstack([p for p in pts if p.size]) if any(p.size for p in pts) else None
            if P is not None:
                lo, hi = np.minimum(lo, P.min(axis=0)), np.maximum(hi, P.max(axis=0))
        if not np.all(np.isfinite(lo)):
            return np.zeros(3), np.zeros(3)
        return lo, hi


# ------------------------------------------------------------------ primitives
def _grid_faces(nlat, nlon):
    """Triangles of a (nlat+1) × nlon latitude–longitude vertex grid."""
    f = []
    for i in range(nlat):
        for j in range(nlon):
            a, b = i * nlon + j, i * nlon + (j + 1) % nlon
            c, d = a + nlon, b + nlon
            f += [(a, c, b), (b, c, d)]
    return np.array(f, dtype=np.int64)


def capsule(a, b, r, nlat=8, nlon=12):
    """(vertices, faces) of a capsule of radius ``r`` around the segment a–b (a
    sphere at ``a`` when a = b)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    d = b - a
    L = float(np.linalg.norm(d))
    th = np.linspace(0.0, np.pi, nlat + 1)
    ph = np.linspace(0.0, 2 * np.pi, nlon, endpoint=False)
    T, P = np.meshgrid(th, ph, indexing="ij")
    V = np.stack([np.sin(T) * np.cos(P), np.sin(T) * np.sin(P), -np.cos(T)], -1).reshape(-1, 3)
    V *= r
    V[:, 2] += np.where(V[:, 2] > 1e-12 * r, L, 0.0)  # the upper hemisphere at b
    z = d / L if L > 0 else np.array([0.0, 0.0, 1.0])
    R = _frame_with_z(z)
    return V @ R.T + a, _grid_faces(nlat, nlon)


def _frame_with_z(z):
    """A rotation whose third column is the unit vector ``z``."""
    t = np.array([1.0, 0.0, 0.0]) if abs(z[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = np.cross(t, z)
    x /= np.linalg.norm(x)
    return np.column_stack([x, np.cross(z, x), z])


def cylinder(radius, length, n=16):
    """(vertices, faces) of a closed cylinder along z, centred at the origin."""
    ph = np.linspace(0.0, 2 * np.pi, n, endpoint=False)
    ring = np.column_stack([radius * np.cos(ph), radius * np.sin(ph)])
    h = 0.5 * length
    V = np.vstack([np.column_stack([ring, np.full(n, -h)]), np.column_stack([ring, np.full(n, h)])])
    V = np.vstack([V, [[0, 0, -h], [0, 0, h]]])
    f = []
    for j in range(n):
        k = (j + 1) % n
        f += [(j, k, n + j), (k, n + k, n + j), (2 * n, k, j), (2 * n + 1, n + j, n + k)]
    return V, np.array(f, dtype=np.int64)


def box(size):
    """(vertices, faces) of a box of edge lengths ``size`` centred at the origin."""
    s = 0.5 * np.asarray(size, dtype=float)
    V = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * s
    F = [(0, 1, 3), (0, 3, 2), (4, 6, 7), (4, 7, 5), (0, 4, 5), (0, 5, 1),
         (2, 3, 7), (2, 7, 6), (0, 2, 6), (0, 6, 4), (1, 5, 7), (1, 7, 3)]  # fmt: skip
    return V, np.array(F, dtype=np.int64)


def inertia_box(mass, com, inertia_com):
    """(size, R): edges and principal axes of the uniform box with this inertia about
    its centre (I₁ = m (a₂² + a₃²)/12 and cyclic ⇒ a₁² = 6 (I₂ + I₃ − I₁)/m)."""
    w, R = np.linalg.eigh(inertia_com)
    s = np.array([w[1] + w[2] - w[0], w[0] + w[2] - w[1], w[0] + w[1] - w[2]])
    return np.sqrt(np.maximum(6.0 * s / mass, 0.0)), R


# ------------------------------------------------------------------ meshes
@lru_cache(maxsize=64)
def _load_mesh(path):
    import trimesh

    m = trimesh.load(path, force="mesh")
    return np.asarray(m.vertices, dtype=float), np.asarray(m.faces, dtype=np.int64)


def _find_mesh(g, model_file, mesh_dirs):
    """The mesh file of geometry entry ``g``: the reader's resolved path, else the
    uri's trailing path components under ``mesh_dirs`` or an ancestor (up to 4
    levels) of the model file's folder."""
    if g.get("path"):
        return g["path"]
    uri = g.get("uri") or ""
    rest = uri.split("://", 1)[-1].lstrip("/")
    parts = [p for p in rest.split("/") if p]
    roots = [Path(d) for d in mesh_dirs]
    if model_file:
        roots += list(Path(model_file).resolve().parents)[:4]
    for r in roots:
        for k in range(len(parts)):
            c = r.joinpath(*parts[k:])
            if parts and c.is_file():
                return str(c)
    return None


def _file_visuals(model, meta, mesh_dirs, notes):
    """Visuals of the file's ``<visual>`` geometry: {body: [(name, kind, V, F, source)]}."""
    out = {}
    has_trimesh = importlib.util.find_spec("trimesh") is not None
    for g in meta.get("geometry", []):
        if g.get("kind") != "visual":
            continue
        body = -1 if g.get("body") == "ground" else model.body_index(g["body"])
        X = np.asarray(g.get("pose", np.eye(4)), dtype=float)
        t = g.get("type")
        name = g.get("name") or f"{g.get('link')}_{t}"
        if t == "mesh":
            path = _find_mesh(g, meta.get("file"), mesh_dirs)
            if path is None:
                notes.append(f"{name}: mesh {g.get('uri')!r} not found; drawn as sticks")
                continue
            if not has_trimesh:
                notes.append(f"{name}: reading meshes needs trimesh (pip install loopdyn[viz])")
                continue
            try:
                V, F = _load_mesh(path)
            except (ImportError, ValueError, OSError, KeyError) as e:  # a reader is missing
                notes.append(f"{name}: mesh {path!r} unreadable ({e}); drawn as sticks")
                continue
            V = V * np.asarray(g.get("scale", (1, 1, 1)), dtype=float)
            source = path
        elif t == "box" and "size" in g:
            V, F = box(g["size"])
            source = "file"
        elif t == "sphere" and "radius" in g:
            V, F = capsule(np.zeros(3), np.zeros(3), g["radius"])
            source = "file"
        elif t in ("cylinder", "capsule") and "radius" in g and "length" in g:
            if t == "cylinder":
                V, F = cylinder(g["radius"], g["length"])
            else:
                h = 0.5 * g["length"]
                V, F = capsule([0, 0, -h], [0, 0, h], g["radius"])
            source = "file"
        else:
            notes.append(f"{name}: {t} geometry is not drawn")
            continue
        V = V @ X[:3, :3].T + X[:3, 3]
        out.setdefault(body, []).append((name, "mesh" if t == "mesh" else t, V, F, source))
    return out


# ------------------------------------------------------------------ topology
def loop_bodies(model):
    """[(closure name, body indices)]: each geometric closure's loop, the tree path
    between its two bodies with their common ancestor (when not the ground)."""
    out = []
    for k in range(model.nc):
        if model.closure_kinds[k] == "coupling":
            continue
        a, b = (int(x) for x in model.cl_body[k])
        up = []
        x = a
        while x >= 0:
            up.append(x)
            x = model.parent[x]
        on_a = set(up)
        path_b = []
        x = b
        while x >= 0 and x not in on_a:
            path_b.append(x)
            x = model.parent[x]
        lca = x
        path_a = up[: up.index(lca) + 1] if lca >= 0 else up
        out.append((model.closures[k], tuple(sorted(set(path_a) | set(path_b)))))
    return out


# ------------------------------------------------------------------ building
def _frames_of(obj, model, q, max_frames):
    """(model, t, Q, residual, energy) of a model (one configuration) or a trajectory
    (an ``ld.Trajectory``, recognised by its ``resolve_model``: viz does not import sim,
    whose ``Trajectory.plot`` imports viz)."""
    from loopdyn.analysis.energy import total_energy
    from loopdyn.kinematics.closures import closure_residual
    from loopdyn.validation import configuration

    if hasattr(obj, "resolve_model"):
        model = obj.resolve_model(model)
        if len(obj) == 0:
            raise ValueError(f"trajectory of {obj.model_name!r} is empty: nothing to show")
        idx = np.arange(len(obj))
        if max_frames is not None and len(obj) > max_frames:
            idx = np.unique(np.round(np.linspace(0, len(obj) - 1, int(max_frames))).astype(int))
        res = np.maximum(obj.residual_position[idx], 0.0)
        return model, obj.t[idx].copy(), obj.q[idx].copy(), res, obj.energy[idx].copy()
    model = obj
    q = configuration(model, model.q0 if q is None else q)
    res = float(np.abs(closure_residual(model, q)).max()) if model.m else 0.0
    e = total_energy(model, q, np.zeros(model.nv))
    return model, np.zeros(1), q[None, :].copy(), np.array([res]), np.array([e])


def skeleton(model):
    """Local points per body (what to draw) and the ground points.

    Returns (points, ground, closures): ``points[b]`` an (k, 3) array of points of
    body b in its frame (segments are drawn from the body origin to each);
    ``ground`` the world points of ground pivots; ``closures`` a list of
    (body, local point) of closure frames B.
    """
    pts = [[] for _ in range(model.nbodies)]
    ground = []
    for c in range(model.nbodies):
        p = model.parent[c]
        x = np.array(model.jgeom[c, 3])
        (pts[p] if p >= 0 else ground).append(x)
    for k in range(len(model.frames)):
        b = int(model.frame_body[k])
        x = np.array(model.frame_X[k, 3])
        (pts[b] if b >= 0 else ground).append(x)
    closures = []
    for k in range(model.nc):
        for side in range(2):
            b = int(model.cl_body[k, side])
            x = np.array(model.cl_X[k, side, 3])
            if b >= 0:
                pts[b].append(x)
        closures.append((int(model.cl_body[k, 1]), np.array(model.cl_X[k, 1, 3])))
    out = []
    for b in range(model.nbodies):
        P = []
        for x in pts[b]:
            if np.linalg.norm(x) > 1e-9 and all(np.linalg.norm(x - y) > 1e-9 for y in P):
                P.append(x)
        if not P:
            I6 = model.inertia[b]
            com = np.array([I6[2, 4], I6[0, 5], I6[1, 3]]) / I6[3, 3]
            P = [2.0 * com] if np.linalg.norm(com) > 1e-9 else []
        out.append(np.array(P).reshape(-1, 3))
    return out, np.array(ground).reshape(-1, 3), closures


def up_direction(model):
    """Unit vector against gravity (+z for a model without gravity)."""
    g = np.asarray(model.gravity, dtype=float)[-3:]
    n = float(np.linalg.norm(g))
    return -g / n if n > 0 else np.array([0.0, 0.0, 1.0])


def body_poses(model, Q):
    """(F, nbodies, 4, 4) body-to-world transforms at each row of ``Q``."""
    from loopdyn.kinematics.frames import forward_kinematics

    F = Q.shape[0]
    out = np.zeros((F, model.nbodies, 4, 4))
    out[:, :, 3, 3] = 1.0
    for f in range(F):
        Xw = forward_kinematics(model, Q[f]).Xw
        out[f, :, :3, :3] = Xw[:, :3]
        out[f, :, :3, 3] = Xw[:, 3]
    return out


def build_scene(obj, model=None, q=None, max_frames=400, mesh_dirs=(), meshes=True):
    """The :class:`Scene` of a ``Model`` (at ``q``, default ``model.q0``) or of a
    ``Trajectory`` (its points, at most ``max_frames`` of them evenly picked; the
    model: ``model``, the attached one or the catalog's by name).

    ``mesh_dirs``: extra folders to look for mesh files in; ``meshes=False`` draws
    sticks even where the file has meshes.  Raises ``ValueError`` for an empty
    trajectory or a trajectory without a model, ``ModelError`` for a visual on a
    body the model does not have.
    """

    model, t, Q, residual, energy = _frames_of(obj, model, q, max_frames)
    notes = []
    meta = getattr(model, "metadata", None) or {}
    try:
        file_vis = _file_visuals(model, meta, mesh_dirs, notes) if meshes else {}
    except ModelError as e:
        raise ModelError(f"{model.name}: a visual names an unknown body ({e})") from None
    loops = loop_bodies(model)
    in_loop = set().union(*[set(b) for _, b in loops]) if loops else set()
    pts = skeleton(model)[0]
    lengths = [float(np.linalg.norm(x)) for P in pts for x in P]
    radius = 0.03 * max(lengths) if lengths else 0.02

    visuals = []
    for name, kind, V, F, source in file_vis.get(-1, []):
        visuals.append(Visual(name, -1, kind, V, F, COLORS["ground"], source, False))
    for b in range(model.nbodies):
        loop = b in in_loop
        color = COLORS["loop" if loop else "body"]
        bname = model.body_names[b]
        if b in file_vis:
            for name, kind, V, F, source in file_vis[b]:
                visuals.append(Visual(name, b, kind, V, F, color, source, loop))
            continue
        if len(pts[b]):
            for i, x in enumerate(pts[b]):
                V, F = capsule(np.zeros(3), x, radius)
                visuals.append(
                    Visual(f"{bname}/link{i}", b, "capsule", V, F, color, "skeleton", loop)
                )
            continue
        I6 = model.inertia[b]
        mass = float(I6[3, 3])
        com = np.array([I6[2, 4], I6[0, 5], I6[1, 3]]) / mass
        # inertia about the centre of mass: I_O = I_C + m (|c|² 1 - c cᵀ)
        Ic = I6[:3, :3] - mass * (com @ com * np.eye(3) - np.outer(com, com))
        size, R = inertia_box(mass, com, Ic)
        if size.max() < radius:
            V, F = capsule(com, com, 2 * radius)
            kind = "sphere"
        else:
            V, F = box(np.maximum(size, 0.2 * radius))
            V = V @ R.T + com
            kind = "box"
        visuals.append(Visual(f"{bname}/inertia", b, kind, V, F, color, "inertia", loop))

    markers = []
    for b in range(model.nbodies):
        markers.append(Marker(model.joint_names[b], "joint", b, np.zeros(3), b in in_loop))
    for k in range(model.nc):
        if model.closure_kinds[k] == "coupling":
            continue
        for side in range(2):
            b = int(model.cl_body[k, side])
            markers.append(
                Marker(
                    f"{model.closures[k]}/{side}",
                    "closure",
                    b,
                    np.array(model.cl_X[k, side, 3], dtype=float),
                    True,
                )
            )
    return Scene(
        model_name=model.name,
        planar=bool(getattr(model, "planar", False)),
        body_names=tuple(model.body_names),
        visuals=visuals,
        markers=markers,
        loops=loops,
        t=np.asarray(t, dtype=float),
        q=Q,
        poses=body_poses(model, Q),
        residual=np.asarray(residual, dtype=float),
        energy=np.asarray(energy, dtype=float),
        radius=radius,
        up=up_direction(model),
        notes=notes,
    )

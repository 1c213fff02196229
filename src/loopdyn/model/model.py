"""The frozen ``Model``, its ``Data`` workspace, and the ``ModelBuilder``.

Bodies are numbered 0..nb-1 depth-first from the ground (children in the order
they were added), so a parent always precedes its children; ``parent[i] == -1``
means body i hangs from the ground.  Coordinates ``q`` (size ``nq``) and
velocities ``v`` (size ``nv``) are laid out body by body in that order.

Packed arrays (read-only, used by the compiled kernels):

- ``topo`` int64 (nb, 6): parent, joint type, first q index, first v index, nq_j, nv_j
- ``jgeom`` float64 (nb, 6, 3): rows 0-2 the rotation of the joint frame in the
  parent body frame, row 3 its origin, rows 4-5 the joint axes (joint frame)
- ``inertia`` float64 (nb, 6, 6): spatial inertia about the body origin, body frame
- ``gravity`` float64 (3,): gravitational acceleration, world frame
- ``frame_body`` int64 (nf,), ``frame_X`` float64 (nf, 4, 3): frame poses on bodies
- ``cl_body`` int64 (nc, 2): bodies a and b of each closure (-1: ground)
- ``cl_X`` float64 (nc, 2, 4, 3): placements of frames A and B on those bodies
- ``row_int`` int64 (m, 6): closure index and kind (0 translation, 1 rotation,
  2 coupling) of each constraint row, then for a coupling the v indices of joints a
  and b and their q indices, for a rotation row its residual form (``ROT_DOT``,
  ``ROT_HINGE``, ``ROT_LOG`` of ``loopdyn.model.closures``) and -1s (-1 otherwise);
  ``row_vec`` float64 (m, 2, 3): its vectors u (frame A) and w (frame B), for a
  coupling (ratio, offset) in ``row_vec[r, 0, :2]``; see ``loopdyn.model.closures``

Kernels do not read these arrays from the ``Model`` but from the packed buffer of
a ``Data`` (``model.create_data()``, ``loopdyn.model.layout``), which holds a copy.
"""

from dataclasses import dataclass

import numpy as np

from loopdyn.errors import ModelError
from loopdyn.model.closures import (
    COUPLING,
    KINDS,
    ROTATION,
    ClosureSpec,
    CouplingSpec,
    rotation_form,
)
from loopdyn.model.joints import (
    FIXED,
    FREE,
    JOINT_NAMES,
    JOINT_NQ,
    JOINT_NV,
    PRISMATIC,
    REVOLUTE,
    SPHERICAL,
    Joint,
)

GROUND = "ground"
"""The name of the fixed world body: the parent of a root body (``add_body(name,
GROUND, ...)``), the body of a frame or closure end attached to the world."""

# a planar model's joints: hinge axes within this angle (rad) of z, slides and origins
# within it of the x–y plane (relative to the distance from the origin, at least 1 m):
# files round π and their placements to some 6 digits
PLANAR_TOL = 1e-5


def _readonly(a):
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


def skew(x):
    """[x]× as a 3×3 array."""
    return np.array([[0.0, -x[2], x[1]], [x[2], 0.0, -x[0]], [-x[1], x[0], 0.0]])


def spatial_inertia(mass, com, inertia_com):
    """6×6 spatial inertia about a frame's origin, ``[angular; linear]`` ordering.

    ``mass`` (kg), ``com`` (3,) centre of mass and ``inertia_com`` (3, 3) rotational
    inertia about the centre of mass, both in that frame.  Returns
    [[Ic + m [c]×[c]×ᵀ, m [c]×], [m [c]×ᵀ, m 1]].
    """
    C = skew(np.asarray(com, dtype=float))
    out = np.zeros((6, 6))
    out[:3, :3] = np.asarray(inertia_com, dtype=float) + mass * C @ C.T
    out[:3, 3:] = mass * C
    out[3:, :3] = mass * C.T
    out[3:, 3:] = mass * np.eye(3)
    return out


def rotation_from(rotation=None, rpy=None, what="placement"):
    """A 3×3 rotation from a matrix or roll-pitch-yaw angles (R = Rz(y) Ry(p) Rx(r))."""
    if rotation is not None and rpy is not None:
        raise ModelError(f"{what}: give either rotation or rpy, not both")
    if rpy is not None:
        try:
            r, p, y = (float(x) for x in rpy)
        except (TypeError, ValueError):
            raise ModelError(f"{what}: rpy must be three angles (rad), got {rpy!r}") from None
        if not all(np.isfinite((r, p, y))):
            raise ModelError(f"{what}: rpy must be finite, got {rpy!r}")
        cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
        Rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
        Ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
        Rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
        return Rz @ Ry @ Rx
    if rotation is None:
        return np.eye(3)
    R = np.asarray(rotation, dtype=float)
    if R.shape != (3, 3) or not np.allclose(R @ R.T, np.eye(3), atol=1e-9):
        raise ModelError(f"{what}: rotation must be a 3×3 orthonormal matrix")
    if np.linalg.det(R) < 0:
        raise ModelError(f"{what}: rotation has determinant -1 (a reflection)")
    return R


@dataclass
class _BodySpec:
    name: str
    parent: str
    joint: Joint
    joint_name: str
    R: np.ndarray
    p: np.ndarray
    mass: float
    com: np.ndarray
    inertia: np.ndarray
    actuated: bool
    physical: bool = True


@dataclass
class _FrameSpec:
    name: str
    body: str
    R: np.ndarray
    p: np.ndarray


def _check_inertia(name, mass, com, inertia, physical=True):
    try:
        mass = float(mass)
    except (TypeError, ValueError):
        raise ModelError(f"body {name!r}: mass must be a number, got {mass!r}") from None
    if not np.isfinite(mass) or mass <= 0.0:
        raise ModelError(f"body {name!r}: mass must be positive and finite, got {mass}")
    com = np.asarray(com, dtype=float).reshape(-1)
    if com.shape != (3,) or not np.all(np.isfinite(com)):
        raise ModelError(f"body {name!r}: com must be a finite 3-vector, got {com!r}")
    I = np.asarray(inertia, dtype=float)
    if I.shape == (3,):
        I = np.diag(I)
    if I.shape != (3, 3) or not np.all(np.isfinite(I)):
        raise ModelError(f"body {name!r}: inertia must be a 3×3 matrix or 3 principal moments")
    scale = max(np.abs(I).max(), 1e-300)
    if np.abs(I - I.T).max() > 1e-9 * scale:
        raise ModelError(f"body {name!r}: inertia is not symmetric:\n{I}")
    ev = np.linalg.eigvalsh(I)
    if ev[0] <= 0.0:
        raise ModelError(
            f"body {name!r}: inertia about the centre of mass is not positive definite "
            f"(principal moments {ev}); give every moment a positive value"
        )
    if physical and not triangle_inequality(ev):
        raise ModelError(
            f"body {name!r}: principal moments {ev} violate the triangle inequality "
            "(I1 + I2 >= I3) and are not those of any physical body; if they are meant "
            "(a reflected rotor inertia), add the body with physical=False"
        )
    return mass, com, I


def triangle_inequality(moments):
    """Whether principal moments (ascending) are those of a rigid body: I1 + I2 >= I3."""
    return moments[0] + moments[1] >= moments[2] * (1.0 - 1e-9)


class Model:
    """A frozen multibody model: spanning tree, frames and (later) loop closures.

    Build one with :class:`ModelBuilder`.  Attributes: ``nq``, ``nv``, ``nbodies``,
    ``body_names``, ``joint_names``, ``joint_types``, ``parent`` (tuple), ``frames``,
    ``gravity``, ``actuated`` (indices into v), ``q0`` (a consistent configuration
    for catalog models, else the neutral one) and the packed arrays described in the
    module docstring.
    """

    def __init__(self, name, bodies, frames, gravity, planar, closures=()):
        self.name = name
        self._specs = (tuple(bodies), tuple(frames))
        self.planar = bool(planar)
        nb = len(bodies)
        self.nbodies = nb
        self.body_names = tuple(b.name for b in bodies)
        self.joint_names = tuple(b.joint_name for b in bodies)
        self.joint_types = tuple(JOINT_NAMES[b.joint.kind] for b in bodies)
        index = {b.name: i for i, b in enumerate(bodies)}
        self._body_index = index
        self._joint_index = {b.joint_name: i for i, b in enumerate(bodies)}
        topo = np.zeros((nb, 6), dtype=np.int64)
        jgeom = np.zeros((nb, 6, 3))
        inertia = np.zeros((nb, 6, 6))
        iq = iv = 0
        actuated = []
        self.masses = np.array([b.mass for b in bodies])
        for i, b in enumerate(bodies):
            k = b.joint.kind
            topo[i] = (
                index[b.parent] if b.parent != GROUND else -1,
                k,
                iq,
                iv,
                JOINT_NQ[k],
                JOINT_NV[k],
            )
            a1, a2 = b.joint.axes(f"joint {b.joint_name!r}")
            jgeom[i, :3] = b.R
            jgeom[i, 3] = b.p
            jgeom[i, 4] = a1
            jgeom[i, 5] = a2
            inertia[i] = spatial_inertia(b.mass, b.com, b.inertia)
            if b.actuated:
                actuated.extend(range(iv, iv + JOINT_NV[k]))
            iq += JOINT_NQ[k]
            iv += JOINT_NV[k]
        self.nq, self.nv = iq, iv
        self.topo = _readonly(topo)
        self.jgeom = _readonly(jgeom)
        self.inertia = _readonly(inertia)
        self.gravity = _readonly(np.asarray(gravity, dtype=float))
        self.parent = tuple(int(x) for x in topo[:, 0])
        self.actuated = _readonly(np.array(actuated, dtype=np.int64))
        self.has_quaternions = bool(np.any((topo[:, 1] == SPHERICAL) | (topo[:, 1] == FREE)))
        self._quat_starts = np.array(
            [
                topo[i, 2] + (3 if topo[i, 1] == FREE else 0)
                for i in range(nb)
                if topo[i, 1] in (SPHERICAL, FREE)
            ],
            dtype=np.int64,
        )
        self.frames = tuple(f.name for f in frames)
        self._frame_index = {f.name: k for k, f in enumerate(frames)}
        fb = np.array([index[f.body] if f.body != GROUND else -1 for f in frames], dtype=np.int64)
        fX = np.zeros((len(frames), 4, 3))
        for k, f in enumerate(frames):
            fX[k, :3] = f.R
            fX[k, 3] = f.p
        self.frame_body = _readonly(fb)
        self.frame_X = _readonly(fX)
        self._init_closures(closures)
        self.q0 = _readonly(self.neutral())
        self.description = name
        self._data = None
        self._ctx = None

    def _init_closures(self, closures):
        nc = len(closures)
        self.closures = tuple(c.name for c in closures)
        self.closure_kinds = tuple(c.kind for c in closures)
        self._closure_specs = tuple(closures)
        self._closure_index = {c.name: k for k, c in enumerate(closures)}
        cl_body = np.zeros((nc, 2), dtype=np.int64)
        cl_X = np.zeros((nc, 2, 4, 3))
        cl_X[:, :, :3] = np.eye(3)
        rows = []
        slices = []
        for k, c in enumerate(closures):
            if isinstance(c, CouplingSpec):
                r = [self._coupling_row(k, c)]
            else:
                for side, fname in enumerate((c.frame_a, c.frame_b)):
                    fi = self.frame_index(fname)
                    cl_body[k, side] = self.frame_body[fi]
                    cl_X[k, side] = self.frame_X[fi]
                spec_rows = c.rows(self.planar)
                form = rotation_form(c.kind, sum(x[0] == ROTATION for x in spec_rows))
                r = [
                    (kind, u, w, (form if kind == ROTATION else -1, -1, -1, -1))
                    for kind, u, w in spec_rows
                ]
            if isinstance(c, CouplingSpec):
                cl_body[k] = (self._joint_body(c.joint_a), self._joint_body(c.joint_b))
            slices.append(slice(len(rows), len(rows) + len(r)))
            rows.extend((k, *x) for x in r)
        m = len(rows)
        row_int = np.zeros((m, 6), dtype=np.int64)
        row_vec = np.zeros((m, 2, 3))
        for j, (k, kind, u, w, idx) in enumerate(rows):
            row_int[j] = (k, kind, *idx)
            row_vec[j, 0] = u
            row_vec[j, 1] = w
        self.nc, self.m = nc, m
        self.closure_rows = tuple(slices)
        self.cl_body = _readonly(cl_body)
        self.cl_X = _readonly(cl_X)
        self.row_int = _readonly(row_int)
        self.row_vec = _readonly(row_vec)

    def _joint_body(self, name):
        """Index of the body moved by joint ``name`` (a joint or a body name)."""
        i = self._joint_index.get(name)
        return self.body_index(name) if i is None else i

    def _coupling_row(self, k, c):
        """(kind, (ratio, offset, 0), 0, (v_a, v_b, q_a, q_b)) of coupling ``c``."""
        idx = []
        for j in (c.joint_a, c.joint_b):
            i = self._joint_body(j)
            if int(self.topo[i, 1]) not in (REVOLUTE, PRISMATIC):
                raise ModelError(
                    f"coupling {c.name!r}: joint {j!r} is {self.joint_types[i]}; a coupling "
                    "relates two 1-DOF joints (revolute or prismatic)"
                )
            idx.append(i)
        a, b = idx
        if a == b:
            raise ModelError(
                f"coupling {c.name!r}: joint_a and joint_b are the same joint {c.joint_a!r}"
            )
        t = self.topo
        return (COUPLING, np.array([c.ratio, c.offset, 0.0]), np.zeros(3),
                (int(t[a, 3]), int(t[b, 3]), int(t[a, 2]), int(t[b, 2])))  # fmt: skip

    def spanning_tree(self):
        """The same bodies, joints and frames without the closures (a tree ``Model``)."""
        bodies, frames = self._specs
        tree = Model(f"{self.name}_tree", bodies, frames, self.gravity, self.planar)
        tree.q0 = self.q0
        return tree

    def closure_index(self, name):
        """Index of closure ``name``; ModelError if unknown."""
        try:
            return self._closure_index[name]
        except KeyError:
            known = ", ".join(self.closures) or "(none)"
            raise ModelError(
                f"{self.name}: unknown closure {name!r}; closures are {known}"
            ) from None

    # ------------------------------------------------------------------ lookup
    def body_index(self, name):
        """Index of body ``name`` (``-1`` for ``"ground"``); ModelError if unknown."""
        if isinstance(name, (int, np.integer)):
            if -1 <= name < self.nbodies:
                return int(name)
            raise ModelError(f"{self.name}: body index {name} out of range 0..{self.nbodies - 1}")
        if name == GROUND:
            return -1
        try:
            return self._body_index[name]
        except KeyError:
            raise ModelError(
                f"{self.name}: unknown body {name!r}; bodies are {', '.join(self.body_names)}"
            ) from None

    def frame_index(self, name):
        """Index of frame ``name``; ModelError if unknown."""
        if isinstance(name, (int, np.integer)):
            if 0 <= name < len(self.frames):
                return int(name)
            raise ModelError(f"{self.name}: frame index {name} out of range")
        try:
            return self._frame_index[name]
        except KeyError:
            known = ", ".join(self.frames) or "(none)"
            raise ModelError(f"{self.name}: unknown frame {name!r}; frames are {known}") from None

    def joint_index(self, name):
        """Index of the body moved by joint ``name``; ModelError if unknown."""
        try:
            return self._joint_index[name]
        except KeyError:
            raise ModelError(
                f"{self.name}: unknown joint {name!r}; joints are {', '.join(self.joint_names)}"
            ) from None

    def q_slice(self, joint):
        """Slice of q belonging to ``joint`` (a joint or body name, or body index)."""
        return self._slice(joint, 2)

    def v_slice(self, joint):
        """Slice of v belonging to ``joint`` (a joint or body name, or body index)."""
        return self._slice(joint, 3)

    def _slice(self, joint, col):
        """``topo`` columns ``col`` (offset) and ``col + 2`` (size) of ``joint``'s body as a
        slice: col 2 of q, col 3 of v."""
        i = (
            self.joint_index(joint)
            if isinstance(joint, str) and joint in self._joint_index
            else self.body_index(joint)
        )
        t = self.topo[i]
        return slice(int(t[col]), int(t[col] + t[col + 2]))

    # ------------------------------------------------------------------ states
    def neutral(self):
        """The neutral configuration: zero angles/displacements, identity quaternions."""
        q = np.zeros(self.nq)
        q[self._quat_starts] = 1.0
        return q

    def random_configuration(self, rng=None, scale=np.pi):
        """A random configuration (uniform angles in [-scale, scale], random unit quaternions)."""
        rng = np.random.default_rng(rng)
        q = rng.uniform(-scale, scale, self.nq)
        for k in self._quat_starts:
            u = rng.normal(size=4)
            q[k : k + 4] = u / np.linalg.norm(u)
        return q

    def create_data(self):
        """A fresh preallocated workspace for the kernels (one per thread)."""
        from loopdyn.model.data import Data

        return Data(self)

    @property
    def data(self):
        """The model's default workspace, used when no ``data`` is passed (not thread-safe)."""
        if self._data is None:
            self._data = self.create_data()
            self._ctx = self._data.ctx  # the fast paths' handle on it
        return self._data

    def __repr__(self):
        return f"<loopdyn.Model {self.name!r}: {self.nbodies} bodies, nq={self.nq}, nv={self.nv}>"


class ModelBuilder:
    """Assemble a :class:`Model` body by body.

    >>> b = ModelBuilder("pendulum", gravity=(0, 0, -9.81))
    >>> b.add_body("link", joint=Revolute("y"), mass=1.0, com=(0, 0, -0.5),
    ...            inertia=(0.1, 0.1, 1e-3))
    >>> model = b.build()

    Names are validated at ``build()``; every error is a :class:`ModelError` naming
    the culprit.  ``planar=True``: the model moves in the x–y plane, its closures take
    their planar row sets, and ``build()`` refuses a joint that leaves the plane (world
    frame at q = 0: only revolute joints about ±z, prismatic joints along x–y and fixed
    joints, their origins at z = 0; tolerance ``PLANAR_TOL``).
    """

    def __init__(self, name="model", gravity=(0.0, 0.0, -9.81), planar=False):
        self.name = name
        g = np.asarray(gravity, dtype=float).reshape(-1)
        if g.shape != (3,) or not np.all(np.isfinite(g)):
            raise ModelError(f"model {name!r}: gravity must be a finite 3-vector, got {gravity!r}")
        self.gravity = g
        self.planar = planar
        self._bodies = []
        self._frames = []
        self._closures = []
        self._names = {GROUND}
        # frame and closure names (a set: duplicates are checked in O(1), not by a scan
        # of every earlier one, which made building spatial_ladder(1024) quadratic)
        self._frame_names = set()
        self._closure_names = set()
        self._q0 = None

    def add_body(
        self,
        name,
        parent=GROUND,
        joint=None,
        *,
        xyz=(0.0, 0.0, 0.0),
        rotation=None,
        rpy=None,
        mass=1.0,
        com=(0.0, 0.0, 0.0),
        inertia=(1.0, 1.0, 1.0),
        actuated=False,
        joint_name=None,
        physical=True,
    ):
        """Add body ``name`` attached to ``parent`` (a body name or ``"ground"``).

        ``joint`` (default ``Revolute("z")``) is placed in the parent's frame at
        ``xyz`` with orientation ``rotation`` (3×3) or ``rpy``; the body frame is the
        joint frame moved by the joint.  ``mass`` (kg), ``com`` (m, body frame) and
        ``inertia`` (kg·m², about the centre of mass, body frame axes; 3×3 or the 3
        principal moments) describe the body.  ``actuated`` marks the joint's
        coordinates as driven.  The joint is named ``joint_name`` (default: the
        body's name).  ``physical=False`` accepts a positive definite inertia whose
        principal moments violate the triangle inequality I1 + I2 >= I3: no rigid body
        has one, but a lumped model may (a link carrying a motor's reflected rotor
        inertia, Cassie's rotor references); the dynamics is well defined either way.
        Returns the body name.
        """
        if not isinstance(name, str) or not name:
            raise ModelError(
                f"model {self.name!r}: body name must be a non-empty string, got {name!r}"
            )
        joint_name = name if joint_name is None else joint_name
        if name in self._names:
            raise ModelError(f"model {self.name!r}: duplicate name {name!r}")
        if joint_name != name and joint_name in self._names:
            raise ModelError(f"model {self.name!r}: duplicate joint name {joint_name!r}")
        joint = _default_joint() if joint is None else joint
        if not isinstance(joint, Joint):
            raise ModelError(
                f"body {name!r}: joint must be a loopdyn joint (Revolute, ...), got {joint!r}"
            )
        joint.axes(f"joint {joint_name!r}")  # validate axes now
        mass, com, I = _check_inertia(name, mass, com, inertia, physical)
        p = np.asarray(xyz, dtype=float).reshape(-1)
        if p.shape != (3,) or not np.all(np.isfinite(p)):
            raise ModelError(f"joint {joint_name!r}: xyz must be a finite 3-vector")
        R = rotation_from(rotation, rpy, f"joint {joint_name!r}")
        self._names.add(name)
        self._names.add(joint_name)
        self._bodies.append(
            _BodySpec(
                name, parent, joint, joint_name, R, p, mass, com, I, bool(actuated), bool(physical)
            )
        )
        return name

    def add_frame(self, name, body, xyz=(0.0, 0.0, 0.0), rotation=None, rpy=None):
        """Add a named frame fixed to ``body`` (or the ground) at ``xyz`` / ``rotation``."""
        if name in self._names or name in self._frame_names:
            raise ModelError(f"model {self.name!r}: duplicate name {name!r}")
        p = np.asarray(xyz, dtype=float).reshape(-1)
        if p.shape != (3,) or not np.all(np.isfinite(p)):
            raise ModelError(f"frame {name!r}: xyz must be a finite 3-vector")
        R = rotation_from(rotation, rpy, f"frame {name!r}")
        self._frames.append(_FrameSpec(name, body, R, p))
        self._frame_names.add(name)
        return name

    def add_closure(
        self,
        name,
        frame_a,
        frame_b,
        kind="ball",
        *,
        axis=None,
        axis2=None,
        rotation_axes=(),
        translation_axes=(),
    ):
        """Close a loop with a cut joint of ``kind`` between two frames.

        ``frame_a`` and ``frame_b`` are frame names (``add_frame``; a frame may sit
        on the ground).  They must coincide in the assembled mechanism.  ``kind`` is
        one of ``ball``, ``revolute`` (``axis`` in frame A, default z),
        ``universal`` (``axis`` in A, ``axis2`` in B, orthogonal; defaults x, y),
        ``prismatic`` (``axis`` in A, default x), ``weld`` or ``generic`` (give
        ``rotation_axes`` and ``translation_axes``, unit vectors in frame A, that
        the closure constrains).  In a model built with ``planar=True`` the kinds
        take their planar row sets (see ``loopdyn.model.closures``).
        """
        if name in self._names or name in self._closure_names:
            raise ModelError(f"model {self.name!r}: duplicate name {name!r}")
        if kind not in KINDS:
            raise ModelError(
                f"closure {name!r}: unknown kind {kind!r}; use one of {', '.join(KINDS)}"
            )
        spec = ClosureSpec(
            name, frame_a, frame_b, kind, axis, axis2, tuple(rotation_axes), tuple(translation_axes)
        )
        spec.rows(self.planar)  # validate the axes now
        self._closures.append(spec)
        self._closure_names.add(name)
        return name

    def add_coupling(self, joint_a, joint_b, ratio, offset=0.0, *, name=None):
        """Couple two 1-DOF joints: q_b = ratio · q_a + offset (gears, belts, mimic joints).

        ``joint_a``, ``joint_b``: joint (or body) names of revolute or prismatic
        joints of the tree; ``ratio`` and ``offset`` finite numbers.  Adds one
        closure row Φ = q_b - ratio q_a - offset, usable by every method; its
        multiplier is the joint force on b (and -ratio times it on a).  ``name``
        defaults to ``"coupling_<joint_b>"``.  The model's rows hold the closures
        first, then the couplings, each in the order added.  Returns the name.
        """
        name = f"coupling_{joint_b}" if name is None else name
        if name in self._names or name in self._closure_names:
            raise ModelError(f"model {self.name!r}: duplicate name {name!r}")
        try:
            ratio, offset = float(ratio), float(offset)
        except (TypeError, ValueError):
            raise ModelError(
                f"coupling {name!r}: ratio and offset must be numbers, got {ratio!r}, {offset!r}"
            ) from None
        if not (np.isfinite(ratio) and np.isfinite(offset)):
            raise ModelError(f"coupling {name!r}: ratio and offset must be finite")
        self._closures.append(CouplingSpec(name, joint_a, joint_b, ratio, offset))
        self._closure_names.add(name)
        return name

    def set_q0(self, q0):
        """Reference configuration stored as ``model.q0`` (catalog: a consistent one)."""
        try:
            q0 = np.array(q0, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise ModelError(f"model {self.name!r}: q0 must be numbers, got {q0!r}") from None
        if not np.all(np.isfinite(q0)):
            raise ModelError(f"model {self.name!r}: q0 must be finite, got {q0}")
        self._q0 = q0

    def set_actuated(self, *joints):
        """Mark the coordinates of the given joints (or body names) as actuated."""
        for j in joints:
            for b in self._bodies:
                if j in (b.joint_name, b.name):
                    b.actuated = True
                    break
            else:
                raise ModelError(f"model {self.name!r}: unknown joint {j!r} in set_actuated")

    def _ordered_bodies(self):
        """Validate the parent relation and return the bodies in depth-first order."""
        by_name = {b.name: b for b in self._bodies}
        for b in self._bodies:
            if b.parent != GROUND and b.parent not in by_name:
                raise ModelError(
                    f"body {b.name!r}: unknown parent {b.parent!r}; add the parent body first "
                    f"or use 'ground'"
                )
        # a cycle: a body whose chain of parents never reaches the ground (each body has
        # one parent, so following them from every body finds every cycle; no networkx:
        # importing it cost ~0.1 s of every model build)
        grounded = {GROUND}
        for b in self._bodies:
            path, on_path, name = [], set(), b.name
            while name not in grounded and name not in on_path:
                path.append(name)
                on_path.add(name)
                name = by_name[name].parent
            if name in on_path:  # came back to a body of this walk: path[k:] is the cycle
                cycle = path[path.index(name) :][::-1]  # parent -> child order
                names = " -> ".join(cycle)
                raise ModelError(
                    f"model {self.name!r}: the parent relation has a cycle ({names}); a tree "
                    "is required: cut the loop and add it as a closure"
                )
            grounded.update(path)
        children = {GROUND: []}
        for b in self._bodies:
            children.setdefault(b.parent, []).append(b)
        order = []
        stack = list(reversed(children[GROUND]))
        while stack:
            b = stack.pop()
            order.append(b)
            stack.extend(reversed(children.get(b.name, [])))
        if len(order) != len(self._bodies):  # pragma: no cover - guarded by cycle check
            raise ModelError(f"model {self.name!r}: some bodies are not connected to the ground")
        return order

    def _check_planar(self, order):
        """ModelError naming the first joint of a planar model that leaves the x–y plane:
        not revolute, prismatic or fixed, a hinge not about z, a slide out of x–y or an
        origin off z = 0 (world frame at q = 0; in-plane joints before it keep it so at
        every q)."""
        R, p = {GROUND: np.eye(3)}, {GROUND: np.zeros(3)}
        fix = (
            "a planar model moves in the x–y plane, hinge axes along z: place the joint "
            "so, or build the model with planar=False"
        )
        for b in order:
            what = f"joint {b.joint_name!r} of planar model {self.name!r}"
            Rw, pw = R[b.parent] @ b.R, p[b.parent] + R[b.parent] @ b.p
            kind = b.joint.kind
            if kind not in (REVOLUTE, PRISMATIC, FIXED):
                raise ModelError(f"{what}: a {JOINT_NAMES[kind]} joint leaves the plane; {fix}")
            if kind != FIXED:
                a = Rw @ b.joint.axes(what)[0]
                a_in_plane = np.hypot(a[0], a[1])
                if kind == REVOLUTE and a_in_plane > PLANAR_TOL:
                    raise ModelError(
                        f"{what}: its hinge axis is {np.round(a, 6).tolist()} in the world "
                        f"frame, not along z ({np.degrees(np.arcsin(min(a_in_plane, 1.0))):.3g}"
                        f" deg off); {fix}"
                    )
                if kind == PRISMATIC and abs(a[2]) > PLANAR_TOL:
                    raise ModelError(
                        f"{what}: its slide axis is {np.round(a, 6).tolist()} in the world "
                        f"frame, out of the x–y plane; {fix}"
                    )
            if abs(pw[2]) > PLANAR_TOL * max(1.0, float(np.linalg.norm(pw))):
                raise ModelError(
                    f"{what}: it sits at z = {pw[2]:.6g} m (world frame), off the plane "
                    f"z = 0; {fix}"
                )
            R[b.name], p[b.name] = Rw, pw

    def build(self):
        """Validate and freeze the model."""
        order = self._ordered_bodies()
        if self.planar:
            self._check_planar(order)
        names = {b.name for b in order}
        for f in self._frames:
            if f.body != GROUND and f.body not in names:
                raise ModelError(f"frame {f.name!r}: unknown body {f.body!r}")
        frame_body = {f.name: f.body for f in self._frames}
        joints = {b.joint_name for b in order} | names
        for c in self._closures:
            if isinstance(c, CouplingSpec):
                for j in (c.joint_a, c.joint_b):
                    if j not in joints:
                        raise ModelError(f"coupling {c.name!r}: unknown joint {j!r}")
                continue
            for fname in (c.frame_a, c.frame_b):
                if fname not in frame_body:
                    raise ModelError(
                        f"closure {c.name!r}: unknown frame {fname!r}; add it with add_frame"
                    )
            if frame_body[c.frame_a] == frame_body[c.frame_b]:
                raise ModelError(
                    f"closure {c.name!r}: frames {c.frame_a!r} and {c.frame_b!r} are on the same "
                    f"body {frame_body[c.frame_a]!r}; a closure must join two different bodies"
                )
        # rows: the kinematic closures in the order added, then the couplings (a canonical
        # order, which the native file format reproduces exactly)
        closures = [c for c in self._closures if not isinstance(c, CouplingSpec)]
        closures += [c for c in self._closures if isinstance(c, CouplingSpec)]
        model = Model(self.name, order, self._frames, self.gravity, self.planar, closures)
        if self._q0 is not None:
            if self._q0.shape != (model.nq,):
                raise ModelError(f"model {self.name!r}: q0 must have shape ({model.nq},)")
            model.q0 = _readonly(self._q0)
        return model


def _default_joint():
    from loopdyn.model.joints import Revolute

    return Revolute("z")


__all__ = ["GROUND", "Model", "ModelBuilder"]

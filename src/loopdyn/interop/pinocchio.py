"""Export a loopdyn model to Pinocchio, and the maps between the two state layouts.

Pinocchio orders quaternions (x, y, z, w) and free-flyer velocities
``[v_linear; ω]``; loopdyn uses (w, x, y, z) and ``[ω; v_linear]`` (both in body
axes).  Fixed joints become inertia appended to the parent's Pinocchio joint;
universal joints become a composite of two revolutes.

:class:`CoordinateMap` maps loopdyn's q, v (and q̈, τ) to those of any Pinocchio
model of the same mechanism and back, matching joints by name: a ``pin.Model`` that
a user built from the same URDF with ``pin.buildModelFromUrdf`` (free-flyer root
included) orders its joints differently from loopdyn (talos: the legs first in
Pinocchio, the torso first in loopdyn) and stores a continuous joint as
(cos θ, sin θ).  :class:`PinocchioExport` (loopdyn's own export) carries the same
maps for the model it builds.

``ConventionModel`` builds the Pinocchio model of a URDF + loop YAML file (the
parallel-robot convention of ``loopdyn.io.loops``) the way that community's loader
does, without loopdyn's reader: a reference for ``ld.load`` of the same files.
"""

import numpy as np
import pinocchio as pin

from loopdyn.errors import ModelError
from loopdyn.model.joints import FIXED, FREE, PRISMATIC, REVOLUTE, SPHERICAL, UNIVERSAL

# how a Pinocchio joint stores one loopdyn joint's coordinates
_SAME, _UNBOUNDED, _QUAT, _FREE = "same", "unbounded", "quaternion", "free"


def _pin_kind(model, i, J, what):
    """How the Pinocchio joint ``J`` holds loopdyn body i's joint, or a ModelError."""
    jt, nq, nv = int(model.topo[i, 1]), int(model.topo[i, 4]), int(model.topo[i, 5])
    short = J.shortname()
    if jt == FREE:
        if short == "JointModelFreeFlyer":
            return _FREE
    elif jt == SPHERICAL:
        if short == "JointModelSpherical":
            return _QUAT
    elif (J.nq, J.nv) == (nq, nv) and "Spherical" not in short and "Planar" not in short:
        return _SAME  # revolute, prismatic, universal (a composite of two revolutes)
    elif nq == 1 and (J.nq, J.nv) == (2, 1):
        return _UNBOUNDED  # URDF continuous: Pinocchio stores (cos θ, sin θ)
    names = {FREE: "free", SPHERICAL: "spherical", REVOLUTE: "revolute"}
    names.update({PRISMATIC: "prismatic", UNIVERSAL: "universal"})
    raise ModelError(
        f"{what}: loopdyn's {names.get(jt, jt)} joint (nq={nq}, nv={nv}) has no coordinate "
        f"map to Pinocchio's {short} (nq={J.nq}, nv={J.nv})"
    )


def _match_by_name(model, pm):
    """Pinocchio joint id of each loopdyn body (None for a fixed joint), by joint name
    (the file's name where the reader renamed a joint; a free root joint also matches
    Pinocchio's free-flyer root, whatever its name)."""
    renamed = {v: k for k, v in (getattr(model, "metadata", None) or {}).get("renamed", {}).items()}
    ids, missing, used = [], [], set()
    for i, jn in enumerate(model.joint_names):
        if int(model.topo[i, 1]) == FIXED:
            ids.append(None)
            continue
        jid = None
        for name in (renamed.get(jn, jn), jn):
            if pm.existJointName(name):
                jid = pm.getJointId(name)
                break
        if (
            jid is None
            and int(model.topo[i, 1]) == FREE
            and model.parent[i] < 0
            and pm.njoints > 1
            and pm.joints[1].shortname() == "JointModelFreeFlyer"
            and pm.parents[1] == 0
        ):
            jid = 1
        if jid is None:
            missing.append(jn)
        ids.append(jid)
        used.add(jid)
    extra = [pm.names[k] for k in range(1, pm.njoints) if k not in used]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"loopdyn joint(s) {missing} are not in the Pinocchio model")
        if extra:
            parts.append(f"Pinocchio joint(s) {extra} are not in the loopdyn model")
        hint = ""
        if any(int(model.topo[i, 1]) == FREE for i in range(model.nbodies)) != any(
            pm.joints[k].shortname() == "JointModelFreeFlyer" for k in range(1, pm.njoints)
        ):
            hint = (
                " (a floating base on one side only: ld.load(..., floating_base=True) goes "
                "with pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()))"
            )
        raise ModelError(f"model {model.name!r}: " + "; ".join(parts) + hint)
    return ids


class CoordinateMap:
    """loopdyn q, v ↔ the q, v of a Pinocchio model of the same mechanism.

    ``CoordinateMap(model, pin_model)`` matches each loopdyn joint to the Pinocchio
    joint of the same name (the file's joint name where loopdyn's reader renamed it,
    ``model.metadata["renamed"]``; a free root joint also matches Pinocchio's
    free-flyer root).  Every moving joint must have a counterpart on the other side
    (else a ``ModelError`` naming the joints left over).  Per joint:

    - revolute, prismatic, universal: the same coordinates;
    - a URDF continuous joint (Pinocchio's unbounded revolute): θ ↔ (cos θ, sin θ);
    - spherical: quaternion (w, x, y, z) ↔ Pinocchio's (x, y, z, w);
    - free: q = [p; w, x, y, z] ↔ [p; x, y, z, w], v = [ω; v] ↔ Pinocchio's [v; ω]
      (both in body axes).

    ``q(q)`` / ``q_from(q_pin)`` map configurations; ``v(v)`` / ``v_from(v_pin)``
    velocities, accelerations and joint forces; ``matrix_from`` an nv×nv matrix
    (mass matrix), ``jacobian_from`` a 6×nv frame Jacobian.  ``vmap[k]`` is the
    Pinocchio index of loopdyn's velocity index k.
    """

    def __init__(self, model, pin_model, joint_ids=None):
        pm = pin_model
        self.source = model
        self.model = pm
        ids = _match_by_name(model, pm) if joint_ids is None else list(joint_ids)
        qmap = np.empty(model.nq, dtype=np.int64)
        vmap = np.empty(model.nv, dtype=np.int64)
        parts = []
        permutation = True
        for i in range(model.nbodies):
            jt, iq, iv, nq, nv = (int(x) for x in model.topo[i, 1:6])
            if jt == FIXED:
                continue
            J = pm.joints[ids[i]]
            what = f"model {model.name!r}, joint {model.joint_names[i]!r}"
            kind = _pin_kind(model, i, J, what)
            pq, pv = J.idx_q, J.idx_v
            if kind == _QUAT:  # (w, x, y, z) -> (x, y, z, w)
                qmap[iq : iq + 4] = [pq + 3, pq, pq + 1, pq + 2]
                vmap[iv : iv + 3] = range(pv, pv + 3)
            elif kind == _FREE:
                qmap[iq : iq + 7] = [pq, pq + 1, pq + 2, pq + 6, pq + 3, pq + 4, pq + 5]
                vmap[iv : iv + 6] = [pv + 3, pv + 4, pv + 5, pv, pv + 1, pv + 2]
            elif kind == _UNBOUNDED:
                permutation = False
                qmap[iq] = -1
                parts.append((iq, pq))
                vmap[iv] = pv
            else:
                qmap[iq : iq + nq] = range(pq, pq + nq)
                vmap[iv : iv + nv] = range(pv, pv + nv)
        #: Pinocchio q index of each loopdyn q index (-1: a continuous joint's angle)
        self.qmap = qmap
        self.vmap = vmap
        self._unbounded = parts
        self._permutation = permutation
        self._qdirect = np.flatnonzero(qmap >= 0)

    # state maps ---------------------------------------------------------------
    def q(self, q):
        """loopdyn q -> Pinocchio q."""
        out = np.empty(self.model.nq)
        if self._permutation:
            out[self.qmap] = q
            return out
        q = np.asarray(q, dtype=float)
        out[self.qmap[self._qdirect]] = q[self._qdirect]
        for iq, pq in self._unbounded:
            out[pq], out[pq + 1] = np.cos(q[iq]), np.sin(q[iq])
        return out

    def q_from(self, q_pin):
        """Pinocchio q -> loopdyn q."""
        if self._permutation:
            return np.asarray(q_pin)[self.qmap]
        q_pin = np.asarray(q_pin, dtype=float)
        out = np.empty(self.source.nq)
        out[self._qdirect] = q_pin[self.qmap[self._qdirect]]
        for iq, pq in self._unbounded:
            out[iq] = np.arctan2(q_pin[pq + 1], q_pin[pq])
        return out

    def v(self, v):
        """loopdyn v (or q̈, τ) -> Pinocchio's layout."""
        out = np.empty(self.model.nv)
        out[self.vmap] = v
        return out

    def v_from(self, v_pin):
        """Pinocchio v (or a, τ) -> loopdyn's layout."""
        return np.asarray(v_pin)[self.vmap]

    def matrix_from(self, M_pin):
        """An nv×nv Pinocchio matrix -> loopdyn's layout."""
        return np.asarray(M_pin)[np.ix_(self.vmap, self.vmap)]

    def jacobian_from(self, J_pin):
        """A 6×nv Pinocchio Jacobian ``[v; ω]`` -> loopdyn's ``[ω; v]`` rows and columns."""
        J = np.asarray(J_pin)[:, self.vmap]
        return np.vstack([J[3:], J[:3]])


def _se3(R, p):
    return pin.SE3(np.array(R, dtype=float), np.array(p, dtype=float))


def _pose(model, i):
    """Joint placement of body i in its parent body frame."""
    return model.jgeom[i, :3], model.jgeom[i, 3]


class PinocchioExport(CoordinateMap):
    """A Pinocchio model equivalent to a loopdyn model, and the state maps
    (:class:`CoordinateMap`'s ``q``, ``q_from``, ``v``, ``v_from``, ...).

    Attributes: ``model`` (pin.Model), ``constraints`` (a
    ``pin.StdVec_RigidConstraintModel`` of the closures Pinocchio can express:
    Pinocchio's fast path — a Python list is converted on every call, which doubles
    the cost of ``constraintDynamics`` on small models; ``exported`` and
    ``unexported`` name the closures), ``joint_of_body`` (Pinocchio joint id carrying each
    loopdyn body) and ``body_in_joint`` (each body frame's pose in that joint's
    frame, an ``pin.SE3``), ``frame_ids`` (loopdyn frame name -> Pinocchio frame id).
    """

    def __init__(self, model):
        self.source = model
        pm = pin.Model()
        pm.gravity = pin.Motion(np.r_[model.gravity, 0.0, 0.0, 0.0])
        joint_of = []
        body_in = []
        for i in range(model.nbodies):
            lam = model.parent[i]
            jt = int(model.topo[i, 1])
            R, p = _pose(model, i)
            # the joint's placement in the parent Pinocchio joint frame
            if lam >= 0:
                parent_joint = joint_of[lam]
                placement = body_in[lam] * _se3(R, p)
            else:
                parent_joint = 0
                placement = _se3(R, p)
            a1, a2 = model.jgeom[i, 4], model.jgeom[i, 5]
            name = model.joint_names[i]
            inertia = _pin_inertia(model, i)
            if jt == FIXED:
                pm.appendBodyToJoint(parent_joint, inertia.se3Action(placement), pin.SE3.Identity())
                pm.addBodyFrame(model.body_names[i], parent_joint, placement, 0)
                joint_of.append(parent_joint)
                body_in.append(placement)
                continue
            if jt == REVOLUTE:
                jm = pin.JointModelRevoluteUnaligned(np.array(a1))
            elif jt == PRISMATIC:
                jm = pin.JointModelPrismaticUnaligned(np.array(a1))
            elif jt == UNIVERSAL:
                jm = pin.JointModelComposite(pin.JointModelRevoluteUnaligned(np.array(a1)))
                jm.addJoint(pin.JointModelRevoluteUnaligned(np.array(a2)))
            elif jt == SPHERICAL:
                jm = pin.JointModelSpherical()
            elif jt == FREE:
                jm = pin.JointModelFreeFlyer()
            else:  # pragma: no cover
                raise ValueError(f"joint type {jt} has no Pinocchio counterpart")
            jid = pm.addJoint(parent_joint, jm, placement, name)
            pm.appendBodyToJoint(jid, inertia, pin.SE3.Identity())
            pm.addBodyFrame(model.body_names[i], jid, pin.SE3.Identity(), 0)
            joint_of.append(jid)
            body_in.append(pin.SE3.Identity())
        self.frame_ids = {}
        for k, fname in enumerate(model.frames):
            b = int(model.frame_body[k])
            X = model.frame_X[k]
            if b < 0:
                parent_joint, pose = 0, _se3(X[:3], X[3])
            else:
                parent_joint, pose = joint_of[b], body_in[b] * _se3(X[:3], X[3])
            frame = pin.Frame(fname, parent_joint, pose, pin.FrameType.OP_FRAME)
            self.frame_ids[fname] = pm.addFrame(frame, False)
        self.model = pm
        self.joint_of_body = joint_of
        self.body_in_joint = body_in
        self._closures(model)
        CoordinateMap.__init__(self, model, pm, joint_ids=joint_of)

    def _closures(self, model):
        """Ball -> CONTACT_3D, weld -> CONTACT_6D; planar revolute -> CONTACT_3D (its
        out-of-plane row is redundant, which Pinocchio's proximal solver handles);
        other kinds have no Pinocchio counterpart and are listed in ``unexported``."""
        self.constraints = pin.StdVec_RigidConstraintModel()
        self.exported = []
        self.unexported = []
        for k, name in enumerate(model.closures):
            kind = model.closure_kinds[k]
            if kind == "ball" or (kind == "revolute" and model.planar):
                ctype = pin.ContactType.CONTACT_3D
            elif kind == "weld":
                ctype = pin.ContactType.CONTACT_6D
            else:
                self.unexported.append(name)
                continue
            ends = []
            for side in range(2):
                b = int(model.cl_body[k, side])
                X = model.cl_X[k, side]
                if b < 0:
                    ends.append((0, _se3(X[:3], X[3])))
                else:
                    ends.append((self.joint_of_body[b], self.body_in_joint[b] * _se3(X[:3], X[3])))
            cm = pin.RigidConstraintModel(
                ctype,
                self.model,
                ends[0][0],
                ends[0][1],
                ends[1][0],
                ends[1][1],
                pin.ReferenceFrame.LOCAL,
            )
            cm.name = name
            self.constraints.append(cm)
            self.exported.append(name)

    def constraint_datas(self):
        """A ``pin.StdVec_RigidConstraintData`` for ``constraints`` (Pinocchio's fast path)."""
        cds = pin.StdVec_RigidConstraintData()
        for c in self.constraints:
            cds.append(c.createData())
        return cds

    def constraint_dynamics(self, q, v, tau, mu=1e-8, iterations=20, accuracy=1e-14):
        """Pinocchio's ``constraintDynamics`` on loopdyn states; returns q̈ in loopdyn's layout.

        Uses ``ProximalSettings(accuracy, mu, iterations)``: a small ``mu`` and a few
        iterations make the proximal solution exact also for redundant (planar) rows.
        """
        pd = self.model.createData()
        cds = self.constraint_datas()
        pin.initConstraintDynamics(self.model, pd, self.constraints, cds)
        prox = pin.ProximalSettings(accuracy, mu, iterations)
        a = pin.constraintDynamics(
            self.model, pd, self.q(q), self.v(v), self.v(tau), self.constraints, cds, prox
        )
        return self.v_from(a)

    def fext(self, fext):
        """loopdyn (nb, 6) body wrenches ``[n; f]`` -> Pinocchio's per-joint ``pin.Force`` list."""
        out = [pin.Force.Zero() for _ in range(self.model.njoints)]
        for i in range(self.source.nbodies):
            f = pin.Force(np.array(fext[i, 3:]), np.array(fext[i, :3]))
            out[self.joint_of_body[i]] += self.body_in_joint[i].act(f)
        return out


class ConventionModel:
    """The Pinocchio model that the parallel-robot community's loader builds from a URDF
    and its loop YAML file (``loopdyn.io.loops``), with the maps to a loopdyn model of the
    same files (``ld.load(yaml)``): a reference built without loopdyn's reader.

    As their loader does: Pinocchio's URDF parser (``floating_base``: a free-flyer root);
    the ``joint_type`` overrides rebuilt joint by joint (``SPHERICAL`` a spherical joint,
    ``UJOINT_AB`` (and ``CARDAN`` = ``UJOINT_XY``) two revolute joints ``name_A``,
    ``name_B`` about those axes, ``FIXED`` locked at zero by ``buildReducedModel``); one
    ``RigidConstraintModel`` per ``closed_loop`` pair between the named frames (a joint's
    frame, a link's), ``CONTACT_6D`` or ``CONTACT_3D``, ``LOCAL``, named
    ``frameACframeB``.  Attributes: ``model``, ``constraints`` (a
    ``StdVec_RigidConstraintModel``), ``motors`` (``name_mot``); ``constraint_datas()``.
    ``q(ld_model, q)`` / ``v(ld_model, v)`` / ``v_from(ld_model, v_pin)`` convert states of
    the loopdyn model of the same files, matching joints by name.
    """

    def __init__(self, urdf, yaml_file, floating_base=False):
        from pathlib import Path

        import yaml

        spec = yaml.safe_load(Path(yaml_file).read_text(encoding="utf-8")) or {}
        if floating_base:
            src = pin.buildModelFromUrdf(str(urdf), pin.JointModelFreeFlyer())
        else:
            src = pin.buildModelFromUrdf(str(urdf))
        types = [str(t).upper() for t in spec.get("joint_type") or []]
        self.overrides = dict(zip(spec.get("joint_name") or [], types, strict=True))
        self.overrides = {
            k: ("UJOINT_XY" if t == "CARDAN" else t) for k, t in self.overrides.items()
        }
        rev = {"X": pin.JointModelRX, "Y": pin.JointModelRY, "Z": pin.JointModelRZ}
        pm = pin.Model()
        pm.gravity = src.gravity
        new_id, fixed = {0: 0}, []
        for jid in range(1, src.njoints):
            name, parent = src.names[jid], new_id[src.parents[jid]]
            place, jm = src.jointPlacements[jid], src.joints[jid]
            kind = self.overrides.get(name, "")
            if kind == "SPHERICAL":
                jm = pin.JointModelSpherical()
            elif kind.startswith("UJOINT_"):
                a, b = kind[-2], kind[-1]
                parent = pm.addJoint(parent, rev[a](), place, f"{name}_{a}")
                place, jm, name = pin.SE3.Identity(), rev[b](), f"{name}_{b}"
            elif kind == "FIXED":
                fixed.append(src.names[jid])
            new_id[jid] = pm.addJoint(parent, jm, place, name)
            pm.appendBodyToJoint(new_id[jid], src.inertias[jid], pin.SE3.Identity())
        for f in src.frames:
            if f.name != "universe":
                pm.addFrame(pin.Frame(f.name, new_id[f.parentJoint], f.placement, f.type), False)
        if fixed:
            pm = pin.buildReducedModel(pm, [pm.getJointId(n) for n in fixed], pin.neutral(pm))
        self.model = pm
        self.constraints = pin.StdVec_RigidConstraintModel()
        pairs, ctypes = spec.get("closed_loop") or [], spec.get("type")
        ctypes = ["6d"] * len(pairs) if ctypes is None else ctypes
        for (n1, n2), t in zip(pairs, ctypes, strict=True):
            f1, f2 = pm.frames[pm.getFrameId(n1)], pm.frames[pm.getFrameId(n2)]
            c3 = str(t).lower() == "3d"
            cm = pin.RigidConstraintModel(
                pin.ContactType.CONTACT_3D if c3 else pin.ContactType.CONTACT_6D,
                pm,
                f1.parentJoint,
                f1.placement,
                f2.parentJoint,
                f2.placement,
                pin.ReferenceFrame.LOCAL,
            )
            cm.name = f"{n1}C{n2}"
            self.constraints.append(cm)
        self.motors = list(spec.get("name_mot") or [])
        self._maps = {}

    def constraint_datas(self):
        """A ``pin.StdVec_RigidConstraintData`` for ``constraints``."""
        cds = pin.StdVec_RigidConstraintData()
        for c in self.constraints:
            cds.append(c.createData())
        return cds

    def _map(self, model):
        """(q parts, v map) of a loopdyn model of the same files, joints matched by name."""
        key = id(model)
        if key in self._maps:
            return self._maps[key]
        pm = self.model
        renamed = {v: k for k, v in model.metadata.get("renamed", {}).items()}
        qparts, vmap = [], np.zeros(model.nv, dtype=np.int64)
        for i, jn in enumerate(model.joint_names):
            jt, iq, iv, nq, nv = (int(x) for x in model.topo[i, 1:6])
            jn = renamed.get(jn, jn)
            kind = self.overrides.get(jn, "")
            if jt == FIXED:
                continue
            if kind.startswith("UJOINT_"):
                ja = pm.joints[pm.getJointId(f"{jn}_{kind[-2]}")]
                jb = pm.joints[pm.getJointId(f"{jn}_{kind[-1]}")]
                qparts += [(iq, ja.idx_q, 1, 0), (iq + 1, jb.idx_q, 1, 0)]
                vmap[iv], vmap[iv + 1] = ja.idx_v, jb.idx_v
                continue
            J = pm.joints[pm.getJointId(jn)]
            qparts.append((iq, J.idx_q, nq, jt))
            if jt == FREE:  # [ω; v] -> pin [v; ω]
                vmap[iv : iv + 6] = [
                    J.idx_v + 3,
                    J.idx_v + 4,
                    J.idx_v + 5,
                    *range(J.idx_v, J.idx_v + 3),
                ]
            else:
                vmap[iv : iv + nv] = range(J.idx_v, J.idx_v + nv)
        self._maps[key] = (qparts, vmap)
        return self._maps[key]

    def q(self, model, q):
        """loopdyn q (of ``model``) -> Pinocchio q."""
        out = pin.neutral(self.model)
        for iq, pq, nq, jt in self._map(model)[0]:
            if jt == SPHERICAL:  # (w, x, y, z) -> (x, y, z, w)
                out[pq : pq + 4] = [*q[iq + 1 : iq + 4], q[iq]]
            elif jt == FREE:
                out[pq : pq + 7] = [*q[iq : iq + 3], *q[iq + 4 : iq + 7], q[iq + 3]]
            else:
                out[pq : pq + nq] = q[iq : iq + nq]
        return out

    def v(self, model, v):
        """loopdyn v (or a, τ) of ``model`` -> Pinocchio's layout."""
        out = np.zeros(self.model.nv)
        out[self._map(model)[1]] = v
        return out

    def v_from(self, model, v_pin):
        """Pinocchio v (or a, τ) -> the layout of ``model``."""
        return np.asarray(v_pin)[self._map(model)[1]]


def _pin_inertia(model, i):
    I6 = model.inertia[i]
    m = I6[3, 3]
    c = np.array([I6[2, 4], I6[0, 5], I6[1, 3]]) / m  # m[c]× upper-right block
    Ic = I6[:3, :3] - m * (np.dot(c, c) * np.eye(3) - np.outer(c, c))
    return pin.Inertia(m, c, Ic)


def to_pinocchio(model):
    """``(pin.Model, constraint models, constraint datas)`` equivalent to ``model``.

    The constraint containers are Pinocchio's ``StdVec_RigidConstraintModel`` and
    ``StdVec_RigidConstraintData`` (its fast path), ready for
    ``pin.initConstraintDynamics(pm, pm.createData(), models, datas)`` and
    ``pin.constraintDynamics``.  For the state maps and the frame ids use
    :class:`PinocchioExport` directly.
    """
    exp = PinocchioExport(model)
    return exp.model, exp.constraints, exp.constraint_datas()

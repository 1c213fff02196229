"""Export a loopdyn model to MuJoCo (MJCF), for side-by-side checks and benchmarks.

MuJoCo's constraints are soft (a spring-damper regularisation, ``solref`` and
``solimp``), so its accelerations approximate the exact ones loopdyn computes.
Bodies keep loopdyn's frames: each MuJoCo body sits at its joint placement, its
joints at the body origin (a universal joint is two hinges in one body, applied
in order, like loopdyn's).  Closures (all between sites): ball and planar
revolute -> ``connect``; a spatial revolute -> two ``connect`` at two points of its
axis (``REVOLUTE_HALF_SPAN`` either side of the origin; the pair has one redundant
row, which MuJoCo's soft constraints absorb); weld -> ``weld``.  A generic closure
that the file reader made from a ball / revolute / weld by dropping rows that are
redundant at every configuration (``model.metadata["reduced_closures"]``) is
exported as that original kind.  Universal and prismatic closures have no MuJoCo
equality.  Free joints are not exported (MuJoCo's free-joint velocity is in world
axes, loopdyn's in body axes).

``model.q0`` is written as the keyframe ``<key name="q0" qpos="..."/>`` (MuJoCo's
``mj_resetDataKeyframe`` poses the model there; loopdyn's MJCF reader reads it back as
``q0``).  The joints keep ``ref = 0``, so MuJoCo's qpos of a hinge or slide is loopdyn's
q and the bodies sit, in the file, where loopdyn's zero configuration puts them
(``ref`` would shift the joints' zero, i.e. change the coordinates, not the pose).
"""

from xml.sax.saxutils import quoteattr

import numpy as np

from loopdyn.model.joints import FIXED, FREE, PRISMATIC, REVOLUTE, SPHERICAL, UNIVERSAL


def _quat(R):
    """(w, x, y, z) of a rotation matrix."""
    w = np.sqrt(max(0.0, 1.0 + R[0, 0] + R[1, 1] + R[2, 2])) / 2.0
    x = np.copysign(np.sqrt(max(0.0, 1.0 + R[0, 0] - R[1, 1] - R[2, 2])) / 2.0, R[2, 1] - R[1, 2])
    y = np.copysign(np.sqrt(max(0.0, 1.0 - R[0, 0] + R[1, 1] - R[2, 2])) / 2.0, R[0, 2] - R[2, 0])
    z = np.copysign(np.sqrt(max(0.0, 1.0 - R[0, 0] - R[1, 1] + R[2, 2])) / 2.0, R[1, 0] - R[0, 1])
    return np.array([w, x, y, z])


def _v(x):
    return " ".join(f"{float(t):.17g}" for t in x)


#: distance (m) of a spatial revolute closure's two connect points from its origin
REVOLUTE_HALF_SPAN = 0.05


def _q(name):
    """An XML attribute value, quoted and escaped."""
    return quoteattr(str(name))


def _closure_plan(model):
    """[(closure k, "connect" | "weld", [(pose on body a, pose on body b), ...])]."""
    reduced = (getattr(model, "metadata", None) or {}).get("reduced_closures", {})
    plan = []
    for k, name in enumerate(model.closures):
        kind = model.closure_kinds[k]
        if kind == "generic" and isinstance(reduced.get(name), dict):
            kind = reduced[name].get("from", kind)
        XA, XB = model.cl_X[k, 0], model.cl_X[k, 1]
        if kind == "ball" or (kind == "revolute" and model.planar):
            plan.append((k, "connect", [(XA, XB)]))
        elif kind == "revolute":
            spec = model._closure_specs[k]
            from loopdyn.model.joints import _axis

            a = _axis(spec.axis if spec.axis is not None else "z", f"closure {name!r}")
            pairs = []
            for s in (-REVOLUTE_HALF_SPAN, REVOLUTE_HALF_SPAN):
                pa, pb = XA.copy(), XB.copy()
                # the point s·a of frame A; a has the same coordinates in B (a rotation
                # about a relates the two frames once assembled)
                pa[3] = XA[3] + XA[:3].T @ (s * a)
                pb[3] = XB[3] + XB[:3].T @ (s * a)
                pairs.append((pa, pb))
            plan.append((k, "connect", pairs))
        elif kind == "weld":
            plan.append((k, "weld", [(XA, XB)]))
        else:
            raise ValueError(
                f"{model.name}: closure {name!r} of kind {kind!r} has no MuJoCo counterpart"
            )
    return plan


def to_mjcf(model, timestep=1e-3, integrator="RK4", solref=None, solimp=None):
    """MJCF text of ``model`` (see the module docstring for the mapping)."""
    children = {i: [] for i in range(-1, model.nbodies)}
    for i, p in enumerate(model.parent):
        children[p].append(i)
    plan = _closure_plan(model)
    sites = {}
    for k, _, pairs in plan:
        for n, pair in enumerate(pairs):
            for side in range(2):
                sites.setdefault(int(model.cl_body[k, side]), []).append(
                    (f"cl{k}_{n}_{side}", pair[side])
                )

    # q0 in MuJoCo's qpos order: the order in which the joints appear in the file
    q0 = np.asarray(model.q0, dtype=float)
    qpos = []

    def body_xml(i, indent):
        jt = int(model.topo[i, 1])
        if jt == FREE:
            raise ValueError(
                f"{model.name}: free joint {model.joint_names[i]!r} is not exported to MuJoCo"
            )
        R, p = model.jgeom[i, :3], model.jgeom[i, 3]
        I6 = model.inertia[i]
        m = I6[3, 3]
        c = np.array([I6[2, 4], I6[0, 5], I6[1, 3]]) / m
        Ic = I6[:3, :3] - m * (c @ c * np.eye(3) - np.outer(c, c))
        pad = "  " * indent
        out = [f'{pad}<body name={_q(model.body_names[i])} pos="{_v(p)}" quat="{_v(_quat(R))}">']
        a1, a2 = model.jgeom[i, 4], model.jgeom[i, 5]
        name = model.joint_names[i]
        if jt == REVOLUTE:
            out.append(
                f'{pad}  <joint name={_q(name)} type="hinge" axis="{_v(a1)}" limited="false"/>'
            )
        elif jt == PRISMATIC:
            out.append(
                f'{pad}  <joint name={_q(name)} type="slide" axis="{_v(a1)}" limited="false"/>'
            )
        elif jt == UNIVERSAL:
            jn = _q(name + "_1")
            out.append(f'{pad}  <joint name={jn} type="hinge" axis="{_v(a1)}" limited="false"/>')
            jn = _q(name + "_2")
            out.append(f'{pad}  <joint name={jn} type="hinge" axis="{_v(a2)}" limited="false"/>')
        elif jt == SPHERICAL:
            out.append(f'{pad}  <joint name={_q(name)} type="ball" limited="false"/>')
        elif jt != FIXED:  # pragma: no cover
            raise ValueError(f"joint type {jt} has no MuJoCo counterpart")
        iq, nq = int(model.topo[i, 2]), int(model.topo[i, 4])
        qpos.extend(q0[iq : iq + nq])
        full = [Ic[0, 0], Ic[1, 1], Ic[2, 2], Ic[0, 1], Ic[0, 2], Ic[1, 2]]
        out.append(f'{pad}  <inertial pos="{_v(c)}" mass="{m:.17g}" fullinertia="{_v(full)}"/>')
        for sname, X in sites.get(i, []):
            out.append(f'{pad}  <site name="{sname}" pos="{_v(X[3])}" quat="{_v(_quat(X[:3]))}"/>')
        for ch in children[i]:
            out.extend(body_xml(ch, indent + 1))
        out.append(f"{pad}</body>")
        return out

    lines = [f"<mujoco model={_q(model.name)}>"]
    lines.append(
        f'  <option gravity="{_v(model.gravity)}" timestep="{timestep}" integrator="{integrator}"/>'
    )
    lines.append("  <worldbody>")
    for sname, X in sites.get(-1, []):
        lines.append(f'    <site name="{sname}" pos="{_v(X[3])}" quat="{_v(_quat(X[:3]))}"/>')
    for i in children[-1]:
        lines.extend(body_xml(i, 2))
    lines.append("  </worldbody>")
    extra = ""
    if solref is not None:
        extra += f' solref="{_v(solref)}"'
    if solimp is not None:
        extra += f' solimp="{_v(solimp)}"'
    eq = []
    for k, tag, pairs in plan:
        name = model.closures[k]
        for n in range(len(pairs)):
            label = name if len(pairs) == 1 else f"{name}_{n}"
            eq.append(
                f'    <{tag} name={_q(label)} site1="cl{k}_{n}_0" site2="cl{k}_{n}_1"{extra}/>'
            )
    if eq:
        lines += ["  <equality>", *eq, "  </equality>"]
    if qpos:
        lines += ["  <keyframe>", f'    <key name="q0" qpos="{_v(qpos)}"/>', "  </keyframe>"]
    lines.append("</mujoco>")
    return "\n".join(lines)


class MujocoExport:
    """A MuJoCo model equivalent to ``model``: ``.model`` (MjModel), ``.data``, ``.xml``.

    Every loopdyn joint except free maps to MuJoCo coordinates in the same order,
    so q and v are copied as they are.
    """

    def __init__(self, model, **kwargs):
        import mujoco

        self.source = model
        self.xml = to_mjcf(model, **kwargs)
        self.model = mujoco.MjModel.from_xml_string(self.xml)
        self.data = mujoco.MjData(self.model)
        assert self.model.nq == model.nq and self.model.nv == model.nv

    def forward(self, q, v, tau):
        """MuJoCo's q̈ (soft constraints) at (q, v) under joint forces ``tau``."""
        import mujoco

        d = self.data
        d.qpos[:] = q
        d.qvel[:] = v
        d.qfrc_applied[:] = tau
        mujoco.mj_forward(self.model, d)
        return d.qacc.copy()

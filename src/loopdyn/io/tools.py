"""What the command line needs: ``describe(model)`` and ``convert(src, dst)``."""

import numpy as np

from loopdyn.errors import LoopdynError


def describe(model, methods=True):
    """A plain dict (JSON-ready) describing ``model`` for ``loopdyn info``.

    Keys: ``name``, ``description``, ``file`` and ``format`` (from
    ``model.metadata`` when the model was loaded), ``nq``, ``nv``, ``planar``,
    ``gravity``, ``bodies`` (name, parent, joint, mass), ``joints`` (name, type,
    body, q and v index ranges, actuated), ``loops`` (closure name, kind, frames,
    bodies, number of rows), ``couplings`` (from the file), ``m`` (constraint rows),
    ``rank`` (of the closure Jacobian at ``q0``), ``dof`` (nv − rank),
    ``closure_residual`` (max |Φ(q0)|), ``actuated`` (joint names) and, when
    ``methods``, ``methods``: for each forward-dynamics method, ``"ok"`` or why it
    does not apply (tried at q0 with v = 0, τ = 0).
    """
    from loopdyn.kinematics.closures import closure_residual, constraint_rank
    from loopdyn.model.joints import JOINT_NAMES

    meta = getattr(model, "metadata", None) or {}
    q0 = np.asarray(model.q0, dtype=float)
    act = set(int(i) for i in model.actuated)
    bodies, joints = [], []
    for i in range(model.nbodies):
        p = model.parent[i]
        t = model.topo[i]
        bodies.append(
            {
                "name": model.body_names[i],
                "parent": "ground" if p < 0 else model.body_names[p],
                "joint": model.joint_names[i],
                "mass": float(model.masses[i]),
            }
        )
        iq, iv, nq, nv = (int(x) for x in t[2:6])
        joints.append(
            {
                "name": model.joint_names[i],
                "type": JOINT_NAMES[int(t[1])],
                "body": model.body_names[i],
                "q": [iq, iq + nq],
                "v": [iv, iv + nv],
                "actuated": nv > 0 and all(k in act for k in range(iv, iv + nv)),
            }
        )
    loops = []
    specs = model._closure_specs
    for k, name in enumerate(model.closures):
        sl = model.closure_rows[k]
        ba, bb = (int(x) for x in model.cl_body[k])
        loops.append(
            {
                "name": name,
                "kind": model.closure_kinds[k],
                "frame_a": getattr(specs[k], "frame_a", None),
                "frame_b": getattr(specs[k], "frame_b", None),
                "body_a": "ground" if ba < 0 else model.body_names[ba],
                "body_b": "ground" if bb < 0 else model.body_names[bb],
                "rows": sl.stop - sl.start,
            }
        )
    if model.m:
        rank = int(constraint_rank(model, q0).rank)
        residual = float(np.abs(closure_residual(model, q0)).max())
    else:
        rank, residual = 0, 0.0
    out = {
        "name": model.name,
        "description": getattr(model, "description", model.name),
        "file": meta.get("file"),
        "format": meta.get("format"),
        "nq": int(model.nq),
        "nv": int(model.nv),
        "planar": bool(model.planar),
        "gravity": [float(x) for x in model.gravity],
        "bodies": bodies,
        "joints": joints,
        "loops": loops,
        "couplings": list(meta.get("couplings", [])),
        "m": int(model.m),
        "rank": rank,
        "dof": int(model.nv - rank),
        "closure_residual": residual,
        "actuated": [j["name"] for j in joints if j["actuated"]],
    }
    if methods:
        out["methods"] = _applicable_methods(model, q0)
    return out


def _applicable_methods(model, q0):
    from loopdyn.methods.dynamics import METHODS, forward_dynamics

    res = {}
    zeros = np.zeros(model.nv)
    for name in METHODS:
        try:
            forward_dynamics(model, q0, zeros, zeros, method=name)
            res[name] = "ok"
        except (LoopdynError, ValueError) as e:
            res[name] = f"{type(e).__name__}: {e}"
    return res


def convert(src, dst, src_format=None, dst_format=None, **options):
    """Read ``src`` (any format ``ld.load`` reads, with its ``options``) and write ``dst``
    (``.toml`` native or ``.xml`` MJCF).  Returns the model.  A model that the target
    format cannot express raises :class:`loopdyn.ModelError` saying what is missing."""
    from loopdyn.io import load, save

    model = load(src, format=src_format, **options)
    save(model, dst, format=dst_format)
    return model


__all__ = ["convert", "describe"]

"""``ld.interop.pinocchio.CoordinateMap``: loopdyn's coordinates ↔ those of a ``pin.Model``
that a user built from the same URDF (issue 42).  loopdyn and Pinocchio order a URDF's
joints differently (talos: q̈ differed by ~1 until reordered by joint name), store
quaternions as (w, x, y, z) vs (x, y, z, w), free-flyer velocities as [ω; v] vs [v; ω]
and a continuous joint as θ vs (cos θ, sin θ)."""

from pathlib import Path

import numpy as np
import pytest

import loopdyn as ld
from closed_helpers import erd_root

pin = pytest.importorskip("pinocchio")


ERD = erd_root()
needs_erd = pytest.mark.skipif(ERD is None, reason="example-robot-data is not installed")

ROBOTS = [
    "talos_data/robots/talos_reduced.urdf",  # joints in another order than Pinocchio's
    "double_pendulum_description/urdf/double_pendulum_continuous.urdf",  # (cos θ, sin θ)
    "ur_description/urdf/ur5_robot.urdf",
]


def _rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.abs(a - b).max() / max(1.0, float(np.abs(b).max())))


@needs_erd
@pytest.mark.parametrize("floating", [True, False], ids=["free-flyer", "fixed"])
@pytest.mark.parametrize("robot", ROBOTS, ids=lambda r: Path(r).stem)
def test_coordinate_map_aba_rnea_crba_agree_with_pinocchio(robot, floating):
    path = str(ERD / robot)
    model = ld.load(path, floating_base=floating, couplings="ignore")
    pm = (pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating
          else pin.buildModelFromUrdf(path))  # fmt: skip
    pd = pm.createData()
    cmap = ld.interop.pinocchio.CoordinateMap(model, pm)
    assert sorted(cmap.vmap) == list(range(pm.nv))
    rng = np.random.default_rng(3)
    # loopdyn -> Pinocchio
    q = model.random_configuration(rng, scale=1.0)
    v, a, tau = (rng.normal(size=model.nv) for _ in range(3))
    qp = cmap.q(q)
    assert np.abs(cmap.q_from(qp) - q).max() < 1e-14
    qdd = ld.aba(model, q, v, tau)
    assert _rel(cmap.v_from(pin.aba(pm, pd, qp, cmap.v(v), cmap.v(tau))), qdd) < 1e-10
    assert (
        _rel(cmap.v_from(pin.rnea(pm, pd, qp, cmap.v(v), cmap.v(a))), ld.rnea(model, q, v, a))
        < 1e-10
    )
    M = pin.crba(pm, pd, qp)
    M = np.triu(M) + np.triu(M, 1).T
    assert _rel(cmap.matrix_from(M), ld.crba(model, q)) < 1e-10
    # Pinocchio -> loopdyn, from a configuration of Pinocchio's own
    qp = pin.integrate(pm, pin.neutral(pm), rng.normal(size=pm.nv))
    vp, taup = rng.normal(size=pm.nv), rng.normal(size=pm.nv)
    q = cmap.q_from(qp)
    assert np.abs(cmap.q(q) - qp).max() < 1e-14
    ap = pin.aba(pm, pd, qp, vp, taup)
    assert _rel(ld.aba(model, q, cmap.v_from(vp), cmap.v_from(taup)), cmap.v_from(ap)) < 1e-10
    assert np.array_equal(cmap.v(cmap.v_from(ap)), ap)


@needs_erd
def test_talos_needs_the_map():
    """The issue's case: the raw arrays in the same order do not match Pinocchio."""
    path = str(ERD / ROBOTS[0])
    model = ld.load(path, floating_base=True)
    pm = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer())
    assert model.joint_names[1] != pm.names[2]  # torso first in loopdyn, the legs in pin
    rng = np.random.default_rng(0)
    q = model.random_configuration(rng, scale=0.5)
    v, tau = rng.normal(size=model.nv), rng.normal(size=model.nv)
    cmap = ld.interop.pinocchio.CoordinateMap(model, pm)
    pd = pm.createData()
    exact = ld.aba(model, q, v, tau)
    naive = np.asarray(pin.aba(pm, pd, cmap.q(q), v, tau))  # v, τ not reordered
    assert _rel(naive, exact) > 1e-3
    assert _rel(cmap.v_from(pin.aba(pm, pd, cmap.q(q), cmap.v(v), cmap.v(tau))), exact) < 1e-10


@needs_erd
def test_coordinate_map_mismatch_is_one_line_naming_the_joints():
    path = str(ERD / ROBOTS[2])
    model = ld.load(path, floating_base=True)
    pm = pin.buildModelFromUrdf(path)  # no free flyer
    with pytest.raises(ld.ModelError, match=r"root_joint.*JointModelFreeFlyer") as err:
        ld.interop.pinocchio.CoordinateMap(model, pm)
    assert "\n" not in str(err.value)
    # a Pinocchio model of another robot: the joints left over are named
    other = pin.buildModelFromUrdf(str(ERD / ROBOTS[1]))
    with pytest.raises(ld.ModelError, match=r"shoulder_pan_joint.*joint1"):
        ld.interop.pinocchio.CoordinateMap(ld.load(path), other)


def test_coordinate_map_of_exported_models_with_balls_and_universals():
    """PinocchioExport's maps are CoordinateMap's; matching the exported model by name
    gives the same maps (spherical quaternions, universal composites, fixed joints)."""
    from loopdyn.interop.pinocchio import CoordinateMap, PinocchioExport

    for name in ("stewart", "spatial_ladder", "closed_knee_leg"):
        model = ld.examples.get(name)
        exp = PinocchioExport(model)
        cmap = CoordinateMap(model, exp.model)
        assert np.array_equal(cmap.qmap, exp.qmap) and np.array_equal(cmap.vmap, exp.vmap)
        q = model.random_configuration(np.random.default_rng(1), scale=1.0)
        assert np.array_equal(cmap.q(q), exp.q(q))
        assert np.array_equal(cmap.q_from(exp.q(q)), q)

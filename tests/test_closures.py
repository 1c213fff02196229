"""Closures: constraint kinematics against finite differences, catalog, assembly, errors."""

import numpy as np
import pytest

import loopdyn as ld
from closed_helpers import CLOSED, DOF, closed_model, mixed_mechanism

KINDS = ["ball", "revolute", "universal", "prismatic", "weld", "generic"]


def _fd(model, q, v, f, eps=1e-6):
    """Central difference of f along the manifold curve q(t) = q ⊕ t v."""
    return (f(ld.integrate(model, q, v, eps)) - f(ld.integrate(model, q, v, -eps))) / (2 * eps)


@pytest.mark.parametrize("kind", KINDS)
def test_jacobian_and_bias_equal_finite_differences(kind):
    model = mixed_mechanism(kind)
    rng = np.random.default_rng(3)
    for _ in range(3):
        q = model.random_configuration(rng)
        v = rng.normal(size=model.nv)
        Phi, J, gamma = ld.constraints(model, q, v)
        assert Phi.shape == (model.m,) and J.shape == (model.m, model.nv)
        np.testing.assert_allclose(
            J @ v, _fd(model, q, v, lambda x: ld.closure_residual(model, x)), atol=1e-7
        )
        jdot_v = _fd(model, q, v, lambda x, v=v: ld.constraint_jacobian(model, x) @ v)
        np.testing.assert_allclose(gamma, -jdot_v, atol=1e-6)


@pytest.mark.parametrize("kind", ["revolute", "prismatic", "weld", "generic"])
def test_planar_kinds_equal_finite_differences(kind):
    model = mixed_mechanism(kind, planar=True)
    rng = np.random.default_rng(4)
    q = model.random_configuration(rng)
    v = rng.normal(size=model.nv)
    _, J, gamma = ld.constraints(model, q, v)
    np.testing.assert_allclose(
        J @ v, _fd(model, q, v, lambda x: ld.closure_residual(model, x)), atol=1e-7
    )
    np.testing.assert_allclose(
        gamma, -_fd(model, q, v, lambda x: ld.constraint_jacobian(model, x) @ v), atol=1e-6
    )


def test_row_counts_of_every_kind():
    rows = {k: mixed_mechanism(k).closure_rows[0] for k in KINDS}
    counts = {k: s.stop - s.start for k, s in rows.items()}
    assert counts == {
        "ball": 3,
        "revolute": 5,
        "universal": 4,
        "prismatic": 5,
        "weld": 6,
        "generic": 2,
    }
    planar = {
        k: mixed_mechanism(k, planar=True).closure_rows[0]
        for k in ["revolute", "prismatic", "weld"]
    }
    assert {k: s.stop - s.start for k, s in planar.items()} == {
        "revolute": 2,
        "prismatic": 2,
        "weld": 3,
    }


@pytest.mark.parametrize("name", list(CLOSED))
def test_catalog_q0_is_consistent_with_the_stated_dof(name):
    model = closed_model(name)
    assert np.abs(ld.closure_residual(model, model.q0)).max() < 1e-12
    assert ld.degrees_of_freedom(model) == DOF[name]
    assert model.actuated.size == DOF[name]


def test_four_bar_geometry_matches_the_paper():
    model = ld.examples.four_bar()
    assert model.q0[0] == pytest.approx(np.deg2rad(30.0))
    _, p = ld.frame_placement(model, model.q0, "rocker_tip")
    assert np.linalg.norm(p - [1.0, 0.0, 0.0]) == pytest.approx(0.6)  # rocker pivot at (a4, 0)
    assert p[1] > 0  # coupler-rocker hinge above the ground line
    _, pc = ld.frame_placement(model, model.q0, "coupler_tip")
    np.testing.assert_allclose(pc, p, atol=1e-12)
    assert model.masses.tolist() == [1.5, 5.0, 3.0]


@pytest.mark.parametrize("name", list(CLOSED))
def test_assemble_keeps_the_fixed_coordinates(name):
    model = closed_model(name)
    rng = np.random.default_rng(5)
    guess = np.array(model.q0) + rng.uniform(-0.05, 0.05, model.nq)
    q = ld.assemble(model, guess)
    assert np.abs(ld.closure_residual(model, q)).max() < 1e-12
    # model.actuated indexes v; the actuated joints are scalar, at the same offset in q
    t = model.topo
    iq = [t[i, 2] + a - t[i, 3] for a in model.actuated
          for i in range(model.nbodies) if t[i, 3] <= a < t[i, 3] + t[i, 5]]  # fmt: skip
    np.testing.assert_array_equal(q[iq], guess[iq])


def test_assemble_with_nothing_fixed_and_chosen_fixed():
    model = closed_model("five_bar")
    guess = np.array(model.q0) + 0.1
    q = ld.assemble(model, guess, fixed=[])
    assert np.abs(ld.closure_residual(model, q)).max() < 1e-12
    q = ld.assemble(model, guess, fixed=[1, 3])
    np.testing.assert_array_equal(q[[1, 3]], guess[[1, 3]])


def test_assembly_error_names_the_closure():
    model = closed_model("five_bar")
    guess = np.array(model.q0)
    guess[[0, 2]] = [np.pi, 0.0]  # distal tips 2.5 m apart > 1.1 + 0.8 m
    with pytest.raises(ld.AssemblyError, match="end_effector"):
        ld.assemble(model, guess)


def test_complete_velocity():
    model = closed_model("four_bar")
    v = ld.complete_velocity(model, model.q0, [2.0, 5.0, -1.0])
    assert v[0] == 2.0
    np.testing.assert_allclose(ld.constraint_jacobian(model, model.q0) @ v, 0, atol=1e-12)
    with pytest.raises(ld.AssemblyError, match="violate the closures"):
        ld.complete_velocity(model, model.q0, [2.0, 0.0, 7.0], fixed=[0, 2])


@pytest.mark.parametrize("name", list(CLOSED))
def test_partition_gives_a_nonsingular_dependent_block(name):
    model = closed_model(name)
    part = ld.partition(model, model.q0)
    assert part.independent.size == DOF[name]
    J = ld.constraint_jacobian(model, model.q0)
    assert np.linalg.matrix_rank(J[:, part.dependent]) == part.dependent.size
    assert np.isfinite(part.condition)


def test_partition_avoids_a_singular_choice():
    """Five-bar with both distal links aligned: the distal angles cannot be the dependent set."""
    from loopdyn.examples.planar import circle_intersection

    model = closed_model("five_bar")
    A1 = np.array([0.0, 0.6])  # θ1⁽¹⁾ = 90°
    A2 = circle_intersection(A1, 1.9, (1.2, 0.0), 0.7)  # distal links stretched: 1.1 + 0.8
    e = (A2 - A1) / 1.9
    th_e = np.arctan2(e[1], e[0])
    th2 = np.arctan2(A2[1], A2[0] - 1.2)
    q = np.array([np.pi / 2, th_e - np.pi / 2, th2, th_e + np.pi - th2])
    assert np.abs(ld.closure_residual(model, q)).max() < 1e-12
    J = ld.constraint_jacobian(model, q)
    assert np.linalg.cond(J[:, [1, 3]]) > 1e12
    part = ld.partition(model, q)
    assert part.dependent.tolist() != [1, 3]
    assert part.condition < 1e3


def _builder():
    b = ld.ModelBuilder("bad", planar=False)
    b.add_body("l1", "ground", ld.Revolute("z"), mass=1, inertia=(1, 1, 1))
    b.add_body("l2", "ground", ld.Revolute("z"), xyz=(1, 0, 0), mass=1, inertia=(1, 1, 1))
    b.add_frame("f1", "l1", xyz=(1, 0, 0))
    b.add_frame("f1b", "l1", xyz=(0.5, 0, 0))
    b.add_frame("f2", "l2")
    return b


def test_closure_model_errors_name_the_culprit():
    b = _builder()
    b.add_closure("cut", "f1", "nowhere")
    with pytest.raises(ld.ModelError, match=r"cut.*nowhere"):
        b.build()
    b = _builder()
    b.add_closure("same", "f1", "f1b")
    with pytest.raises(ld.ModelError, match="same"):
        b.build()
    with pytest.raises(ld.ModelError, match="hinge"):
        _builder().add_closure("hinge", "f1", "f2", "cylindrical")
    with pytest.raises(ld.ModelError, match="tilted"):
        _builder().add_closure("tilted", "f1", "f2", "universal", axis="x", axis2=(1, 1, 0))
    planar = ld.ModelBuilder("p", planar=True)
    with pytest.raises(ld.ModelError, match="pin"):
        planar.add_closure("pin", "a", "b", "ball")
    with pytest.raises(ld.ModelError, match="empty"):
        _builder().add_closure("empty", "f1", "f2", "generic")


def test_pinocchio_export_lists_closures_it_cannot_express():
    pytest.importorskip("pinocchio")
    from loopdyn.interop.pinocchio import PinocchioExport

    ex = PinocchioExport(mixed_mechanism("universal"))
    assert ex.unexported == ["c1"] and ex.exported == ["c2"]
    _, constraints, datas = ld.interop.to_pinocchio(closed_model("spatial_ladder"))
    assert len(datas) == len(constraints)
    assert type(constraints).__name__ == "StdVec_RigidConstraintModel"
    assert len(constraints) == 3

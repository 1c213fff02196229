"""Model building: validation errors, depth-first numbering, sizes and lookups."""

import numpy as np
import pytest

import loopdyn as ld
from conftest import TREE_CASES, build_model


def _builder():
    b = ld.ModelBuilder("m")
    b.add_body("base", joint=ld.Revolute("z"))
    return b


# ---------------------------------------------------------------- ModelError
def test_unknown_parent():
    b = _builder()
    b.add_body("arm", "nope")
    with pytest.raises(ld.ModelError, match=r"'arm'.*unknown parent 'nope'"):
        b.build()


def test_duplicate_name():
    b = _builder()
    with pytest.raises(ld.ModelError, match="duplicate name 'base'"):
        b.add_body("base", "ground")
    with pytest.raises(ld.ModelError, match="duplicate name 'ground'"):
        b.add_body("ground")
    with pytest.raises(ld.ModelError, match="duplicate joint name 'base'"):
        b.add_body("other", joint_name="base")
    b.add_frame("site", "base")
    with pytest.raises(ld.ModelError, match="duplicate name 'site'"):
        b.add_frame("site", "base")
    with pytest.raises(ld.ModelError, match="duplicate name 'base'"):
        b.add_frame("base", "ground")


@pytest.mark.parametrize("mass", [0.0, -1.0, np.nan, np.inf])
def test_non_positive_mass(mass):
    b = _builder()
    with pytest.raises(ld.ModelError, match=r"'heavy'.*mass"):
        b.add_body("heavy", "base", mass=mass)


def test_mass_not_a_number():
    with pytest.raises(ld.ModelError, match=r"'heavy'.*mass"):
        _builder().add_body("heavy", "base", mass="lots")


def test_inertia_not_symmetric():
    I = np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    with pytest.raises(ld.ModelError, match=r"'lopsided'.*not symmetric"):
        _builder().add_body("lopsided", "base", inertia=I)


@pytest.mark.parametrize(
    "inertia", [(1.0, 1.0, -1.0), (0.0, 1.0, 1.0), np.diag([2.0, 2.0, 0.0])], ids=str
)
def test_inertia_not_positive_definite(inertia):
    with pytest.raises(ld.ModelError, match=r"'flat'.*not positive definite"):
        _builder().add_body("flat", "base", inertia=inertia)


@pytest.mark.parametrize("inertia", [(1.0, 1.0, 3.0), np.diag([3.0, 1.0, 1.0])], ids=str)
def test_inertia_violates_triangle_inequality(inertia):
    with pytest.raises(ld.ModelError, match=r"'impossible'.*triangle inequality"):
        _builder().add_body("impossible", "base", inertia=inertia)


def test_inertia_triangle_inequality_boundary_is_accepted():
    """A thin disc/rod has I1 + I2 == I3 exactly: physical, must be accepted."""
    b = _builder()
    b.add_body("disc", "base", inertia=(1.0, 1.0, 2.0))
    assert b.build().nbodies == 2


def test_inertia_wrong_shape():
    with pytest.raises(ld.ModelError, match="'odd'"):
        _builder().add_body("odd", "base", inertia=np.eye(2))


@pytest.mark.parametrize(
    "joint",
    [
        ld.Revolute((0, 0, 0)),
        ld.Prismatic((0.0, 0.0, 0.0)),
        ld.Universal("x", (0, 0, 0)),
        ld.Revolute((np.nan, 0, 1)),
        ld.Revolute("w"),
    ],
    ids=["revolute", "prismatic", "universal", "nan", "unknown-name"],
)
def test_bad_joint_axis(joint):
    with pytest.raises(ld.ModelError, match="'hinge'"):
        _builder().add_body("hinge", "base", joint)


def test_zero_axis_names_the_joint():
    with pytest.raises(ld.ModelError, match=r"'elbow_joint'.*zero joint axis"):
        _builder().add_body("forearm", "base", ld.Revolute((0, 0, 0)), joint_name="elbow_joint")


def test_universal_parallel_axes():
    with pytest.raises(ld.ModelError, match=r"'cardan'.*parallel"):
        _builder().add_body("cardan", "base", ld.Universal("x", (-2.0, 0.0, 0.0)))


def test_cycle_in_parent_relation():
    b = _builder()
    b.add_body("a", "b")
    b.add_body("b", "a")
    with pytest.raises(ld.ModelError, match=r"cycle \((a -> b|b -> a)\)"):
        b.build()


def test_self_parent_is_a_cycle():
    b = _builder()
    b.add_body("loner", "loner")
    with pytest.raises(ld.ModelError, match="loner"):
        b.build()


def test_bad_placement_and_joint_type():
    b = _builder()
    with pytest.raises(ld.ModelError, match="'tilted'"):
        b.add_body("tilted", "base", rotation=np.diag([1.0, 1.0, -1.0]))
    with pytest.raises(ld.ModelError, match="'tilted'"):
        b.add_body("tilted", "base", rotation=2 * np.eye(3))
    with pytest.raises(ld.ModelError, match="'tilted'"):
        b.add_body("tilted", "base", rotation=np.eye(3), rpy=(0, 0, 0))
    with pytest.raises(ld.ModelError, match="'offset'"):
        b.add_body("offset", "base", xyz=(0.0, 1.0))
    with pytest.raises(ld.ModelError, match="'odd'"):
        b.add_body("odd", "base", joint="revolute")
    with pytest.raises(ld.ModelError, match="'odd'"):
        b.add_body("odd", "base", com=(0.0, np.inf, 0.0))
    with pytest.raises(ld.ModelError):
        b.add_body("", "base")
    # a failed add_body leaves the builder usable and the name free
    b.add_body("tilted", "base")
    assert b.build().body_names == ("base", "tilted")


def test_frame_on_unknown_body():
    b = _builder()
    b.add_frame("site", "ghost")
    with pytest.raises(ld.ModelError, match=r"'site'.*'ghost'"):
        b.build()


def test_set_actuated_unknown_joint():
    with pytest.raises(ld.ModelError, match="'phantom'"):
        _builder().set_actuated("phantom")


def test_bad_gravity():
    with pytest.raises(ld.ModelError, match="gravity"):
        ld.ModelBuilder("g", gravity=(0.0, -9.81))


def test_model_error_is_value_error_and_loopdyn_error():
    assert issubclass(ld.ModelError, ValueError)
    assert issubclass(ld.ModelError, ld.LoopdynError)


# ----------------------------------------------------- depth-first numbering
def _shuffled_builder():
    """Bodies added children-first and interleaved; depth-first order is fixed."""
    b = ld.ModelBuilder("shuffled", gravity=(0.0, 0.0, -9.81))
    b.add_body("leaf", "mid", ld.Prismatic("x"), xyz=(0.0, 0.0, -1.0))
    b.add_body("other_root", "ground", ld.Free())
    b.add_body("mid", "root", ld.Spherical(), xyz=(0.0, 0.0, -1.0))
    b.add_body("root", "ground", ld.Universal("x", "y"))
    b.add_body("root_child2", "root", ld.Revolute("y"), xyz=(1.0, 0.0, 0.0))
    b.add_body("welded", "leaf", ld.Fixed(), xyz=(0.5, 0.0, 0.0))
    b.add_frame("leaf_tip", "leaf", xyz=(0.2, 0.0, 0.0))
    return b


def test_bodies_renumbered_depth_first():
    model = _shuffled_builder().build()
    # ground's children in insertion order: other_root, root; then depth-first
    assert model.body_names == ("other_root", "root", "mid", "leaf", "welded", "root_child2")
    assert model.parent == (-1, -1, 1, 2, 3, 1)
    assert all(p < i for i, p in enumerate(model.parent))
    assert model.joint_types == ("free", "universal", "spherical", "prismatic", "fixed", "revolute")
    # q and v layouts follow the body order
    assert (model.nq, model.nv) == (7 + 2 + 4 + 1 + 0 + 1, 6 + 2 + 3 + 1 + 0 + 1)
    assert model.q_slice("other_root") == slice(0, 7)
    assert model.q_slice("root") == slice(7, 9)
    assert model.q_slice("mid") == slice(9, 13)
    assert model.q_slice("leaf") == slice(13, 14)
    assert model.q_slice("welded") == slice(14, 14)
    assert model.q_slice("root_child2") == slice(14, 15)
    assert model.v_slice("mid") == slice(6 + 2, 6 + 2 + 3)
    assert model.v_slice("root_child2") == slice(12, 13)
    for i, name in enumerate(model.body_names):
        assert model.body_index(name) == i
        assert model.q_slice(i) == model.q_slice(name)


def test_q_layout_follows_depth_first_order():
    """Moving q[q_slice(body)] moves exactly that body (and its subtree)."""
    model = _shuffled_builder().build()
    q = model.neutral()
    _, tip0 = ld.frame_placement(model, q, "leaf_tip")
    q[model.q_slice("leaf")] = 0.3  # prismatic along x
    _, tip1 = ld.frame_placement(model, q, "leaf_tip")
    np.testing.assert_allclose(tip1 - tip0, [0.3, 0.0, 0.0], atol=1e-15)
    # the universal joint of "root" rotates mid, leaf, welded and root_child2, not other_root
    q = model.neutral()
    before = {n: ld.frame_placement(model, q, n)[1] for n in model.body_names}
    q[model.q_slice("root")] = [0.4, -0.2]
    after = {n: ld.frame_placement(model, q, n)[1] for n in model.body_names}
    np.testing.assert_array_equal(after["other_root"], before["other_root"])
    for n in ("mid", "leaf", "welded", "root_child2"):
        assert np.linalg.norm(after[n] - before[n]) > 0.1, n
    # the free joint's position moves only other_root
    q = model.neutral()
    q[0:3] = [1.0, 2.0, 3.0]
    np.testing.assert_array_equal(ld.frame_placement(model, q, "other_root")[1], [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(ld.frame_placement(model, q, "leaf")[1], before["leaf"])


def test_renumbering_preserves_dynamics():
    """Same tree added in a different order: same dynamics after permuting q and v."""
    b = ld.ModelBuilder("ordered", gravity=(0.0, 0.0, -9.81))
    b.add_body("root", "ground", ld.Universal("x", "y"))
    b.add_body("root_child2", "root", ld.Revolute("y"), xyz=(1.0, 0.0, 0.0))
    b.add_body("mid", "root", ld.Spherical(), xyz=(0.0, 0.0, -1.0))
    b.add_body("leaf", "mid", ld.Prismatic("x"), xyz=(0.0, 0.0, -1.0))
    b.add_body("welded", "leaf", ld.Fixed(), xyz=(0.5, 0.0, 0.0))
    b.add_body("other_root", "ground", ld.Free())
    ordered = b.build()
    shuffled = _shuffled_builder().build()
    assert ordered.body_names == ("root", "root_child2", "mid", "leaf", "welded", "other_root")
    assert set(ordered.body_names) == set(shuffled.body_names)
    # permutation of coordinates: shuffled index -> ordered index
    qperm = np.concatenate([np.arange(ordered.nq)[ordered.q_slice(n)] for n in shuffled.body_names])
    vperm = np.concatenate([np.arange(ordered.nv)[ordered.v_slice(n)] for n in shuffled.body_names])
    rng = np.random.default_rng(0)
    q = ordered.random_configuration(rng)
    v, tau = rng.normal(size=ordered.nv), rng.normal(size=ordered.nv)
    qdd_o = ld.aba(ordered, q, v, tau)
    qdd_s = ld.aba(shuffled, q[qperm], v[vperm], tau[vperm])
    np.testing.assert_allclose(qdd_s, qdd_o[vperm], rtol=1e-12, atol=1e-12)
    M_o = ld.crba(ordered, q)
    np.testing.assert_allclose(ld.crba(shuffled, q[qperm]), M_o[np.ix_(vperm, vperm)], atol=1e-12)


# ------------------------------------------------------------ sizes & lookup
def test_joint_sizes():
    joints = {
        ld.Revolute("x"): (1, 1),
        ld.Prismatic("y"): (1, 1),
        ld.Fixed(): (0, 0),
        ld.Universal("x", "z"): (2, 2),
        ld.Spherical(): (4, 3),
        ld.Free(): (7, 6),
    }
    for joint, (nq, nv) in joints.items():
        b = ld.ModelBuilder("one")
        b.add_body("body", joint=joint)
        model = b.build()
        assert (model.nq, model.nv) == (nq, nv), joint
        assert model.neutral().shape == (nq,)
        assert ld.crba(model, model.neutral()).shape == (nv, nv)


def test_model_arrays_are_frozen():
    model = build_model("random10-s1")
    for name in ("topo", "jgeom", "inertia", "gravity", "actuated", "q0"):
        arr = getattr(model, name)
        with pytest.raises(ValueError, match="read-only"):
            arr[...] = 0


def test_actuated_indices():
    b = ld.ModelBuilder("act")
    b.add_body("a", joint=ld.Revolute("z"))
    b.add_body("b", "a", ld.Spherical(), actuated=True)
    b.add_body("c", "b", ld.Prismatic("x"))
    b.set_actuated("c")
    model = b.build()
    np.testing.assert_array_equal(model.actuated, [1, 2, 3, 4])
    arm = ld.examples.serial_arm()
    np.testing.assert_array_equal(arm.actuated, np.arange(6))


def test_lookup_errors_name_the_culprit():
    model = build_model("serial_arm")
    with pytest.raises(ld.ModelError, match="'hand'"):
        model.body_index("hand")
    with pytest.raises(ld.ModelError, match="'hand'"):
        model.frame_index("hand")
    with pytest.raises(ld.ModelError, match="'hand'"):
        model.joint_index("hand")
    with pytest.raises(ld.ModelError, match="out of range"):
        model.body_index(model.nbodies)
    assert model.body_index("ground") == -1
    with pytest.raises(ld.ModelError, match="'hand'"):
        ld.examples.get("hand")


def test_spatial_inertia_packing():
    """inertia[i] is the 6×6 spatial inertia about the body origin, [angular; linear]."""
    m, c, Ic = 2.0, np.array([0.1, -0.3, 0.2]), np.diag([0.3, 0.4, 0.5])
    b = ld.ModelBuilder("one")
    b.add_body("body", joint=ld.Free(), mass=m, com=c, inertia=Ic)
    I6 = b.build().inertia[0]
    cx = np.array([[0, -c[2], c[1]], [c[2], 0, -c[0]], [-c[1], c[0], 0]])
    expected = np.block([[Ic + m * cx @ cx.T, m * cx], [m * cx.T, m * np.eye(3)]])
    np.testing.assert_allclose(I6, expected, atol=1e-15)


def test_tree_cases_cover_every_joint_type():
    """The Pinocchio cross-checks really exercise every joint type."""
    seen = set()
    for case in TREE_CASES:
        seen.update(build_model(case).joint_types)
    assert seen == {"revolute", "prismatic", "universal", "spherical", "free", "fixed"}
    big = build_model("random60-s0")
    assert set(big.joint_types) == seen
    # fixed joints directly under the ground and deep in the tree both occur
    assert any(p >= 0 for p, t in zip(big.parent, big.joint_types, strict=True) if t == "fixed")


def test_catalog():
    assert {"serial_arm", "random_tree", "spatial_ladder_tree"} <= set(ld.examples.names())
    model = ld.examples.get("spatial_ladder_tree", L=3)
    assert (model.nbodies, model.nv) == (7, 4 * 2 + 3)
    assert "post3_end" in model.frames and "rung2_tip" in model.frames


def test_tree_workspace_memory_is_linear_in_the_bodies():
    """Data of a tree holds O(n) floats: no dense nv × nv method blocks."""
    sizes = {L: ld.examples.spatial_ladder_tree(L).create_data().ctx.size for L in (8, 16, 32)}
    per_body = [sizes[L] / (2 * L + 1) for L in sizes]
    assert max(per_body) - min(per_body) < 0.05 * min(per_body)


def test_block_is_a_view_like_reshape():
    """``block`` (the entry kernels' views) equals slice + reshape and shares memory."""
    from numba import njit

    from loopdyn.kernels.numba_internals import block

    @njit
    def views(buf, n):
        a = block(buf, 2, (n, 3))
        b = block(buf, 1, 4)
        c = block(buf, 0, (2, 2, 2))
        a[1, 2] = -1.0
        return a, b, c

    buf = np.arange(20.0)
    a, b, c = views(buf, 2)
    expected = np.arange(2.0, 8.0).reshape(2, 3)
    expected[1, 2] = -1.0
    np.testing.assert_array_equal(a, expected)
    assert buf[7] == -1.0 and a[1, 2] == -1.0  # a write through the view reaches the buffer
    np.testing.assert_array_equal(b, buf[1:5])
    np.testing.assert_array_equal(c, buf[:8].reshape(2, 2, 2))
    assert a.flags.c_contiguous and np.shares_memory(a, buf) and np.shares_memory(c, buf)

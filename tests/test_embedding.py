"""Constraint embedding (Jain): the aggregation graph layer, X_𝒮 and ζ_𝒮, and
``ld.forward_dynamics(..., method="embedding")`` against the augmented oracle."""

import networkx as nx
import numpy as np
import pytest

import loopdyn as ld
import mechanisms as mx
from closed_helpers import CLOSED, closed_model, consistent_state, flat_four_bar, mixed_mechanism
from loopdyn.methods import embedding as E
from loopdyn.methods.embedding import aggregation
from loopdyn.topology.aggregation import (
    GROUND,
    aggregated_tree,
    aggregation_subgraph,
    merge_subgraphs,
)

NEW = {
    "four_bar_internal": lambda: ld.examples.four_bar_cut("internal"),
    "four_bar_terminal": lambda: ld.examples.four_bar_cut("terminal"),
    "four_bar_chain_1": lambda: ld.examples.four_bar_chain(1),
    "four_bar_chain_5": lambda: ld.examples.four_bar_chain(5),
    "closed_knee_leg": lambda: ld.examples.closed_knee_leg(),
    "geared_chain_1": lambda: ld.examples.geared_chain(1),
    "geared_chain_4": lambda: ld.examples.geared_chain(4, ratio=9.0),
    "closed_knee_leg_geared": lambda: ld.examples.closed_knee_leg(geared=True),
    # legged robots' legs (loopdyn.examples.legs); as_file: the dependent rows kept
    "cassie_leg": lambda: ld.examples.cassie_leg(),
    "digit_leg": lambda: ld.examples.digit_leg(),
    "five_bar_leg_as_file": lambda: ld.examples.five_bar_leg(closures="as_file"),
    "kangaroo_leg_as_file": lambda: ld.examples.kangaroo_leg(closures="as_file"),
    "wl16_leg": lambda: ld.examples.wl16_leg(),
}


def rel_err(a, b):
    return float(np.abs(np.asarray(a) - b).max() / max(1.0, np.abs(b).max()))


def embedded(model, q, v, tau, data=None):
    """``forward_dynamics(method="embedding")``, asserting it did not fall back."""
    res = ld.forward_dynamics(model, q, v, tau, method="embedding", data=data)
    assert res.method == "embedding"
    return res


# --------------------------------------------------------------------------- Fig. 4
def _tree(edges, root="g"):
    t = nx.DiGraph()
    t.add_node(root)
    t.add_edges_from(edges)
    return t


def test_fig4_example1_disjoint_subgraphs_stay_split():
    # g→1→2→3→4→5 with cut-edges (1, 3) and (3, 5): {2, 3} and {4, 5}, not one {2..5}
    t = _tree([("g", 1), (1, 2), (2, 3), (3, 4), (4, 5)])
    r1, s1 = aggregation_subgraph(t, (1, 3))
    r2, s2 = aggregation_subgraph(t, (3, 5))
    assert (r1, s1, r2, s2) == (1, {2, 3}, 3, {4, 5})
    groups = merge_subgraphs([s1, s2])
    assert [g for g, _ in groups] == [{2, 3}, {4, 5}]
    agg = aggregated_tree(t, [g for g, _ in groups])
    a, b = frozenset({2, 3}), frozenset({4, 5})
    assert set(agg.edges) == {("g", 1), (1, a), (a, b)}


def test_fig4_example2_cut_edge_across_trees_takes_every_ancestor():
    t = _tree([("g", 1), (1, 2), ("g", 3), (3, 4), (4, 5)])
    root, sub = aggregation_subgraph(t, (2, 5))
    assert root == "g" and sub == {1, 2, 3, 4, 5}
    agg = aggregated_tree(t, [sub])
    assert list(agg.successors("g")) == [frozenset(sub)]  # a root node of the forest


def test_fig4_example3_cut_edges_sharing_a_node_merge():
    t = _tree([("g", "a"), ("a", "b"), ("g", "c"), ("g", "d"), ("b", "e")])
    _, s1 = aggregation_subgraph(t, ("b", "c"))
    _, s2 = aggregation_subgraph(t, ("b", "d"))
    groups = merge_subgraphs([s1, s2, {"e"}])
    assert groups == [(frozenset("abcd"), [0, 1]), (frozenset("e"), [2])]
    agg = aggregated_tree(t, [g for g, _ in groups])
    assert nx.is_arborescence(agg)
    assert (frozenset("abcd"), frozenset("e")) in agg.edges


def test_closure_to_the_ground_and_within_a_chain():
    t = _tree([("g", 1), (1, 2), (2, 3)])
    assert aggregation_subgraph(t, (3, "g")) == ("g", frozenset({1, 2, 3}))
    assert aggregation_subgraph(t, (1, 3)) == (1, frozenset({2, 3}))  # terminal cut


def test_aggregation_condition_is_checked():
    t = _tree([("g", 1), (1, 2), ("g", 3)])
    with pytest.raises(ld.ModelError, match="aggregation condition"):
        aggregated_tree(t, [{2, 3}])  # two parents outside it: 1 and g


def test_models_aggregate_as_in_the_paper():
    chain_model = ld.examples.four_bar_chain(3)
    chain = aggregation(chain_model)
    assert [s.body_names for s in chain.bodies] == [
        (f"crank{k}", f"coupler{k}", f"rocker{k}") for k in range(3)
    ]
    parents = [s.parent for s in chain.bodies]
    assert parents[0] == -1 and parents[1] == chain.bodies[0].bodies[0]  # on crank0
    assert nx.is_arborescence(chain.aggregated) and chain.dof == 3
    cranks = [(chain_model.v_slice(f"crank{k}").start,) for k in range(3)]
    assert [s.independent for s in chain.bodies] == cranks  # the actuated ones
    internal = aggregation(ld.examples.four_bar_cut("internal")).bodies[0]
    terminal = aggregation(ld.examples.four_bar_cut("terminal")).bodies[0]
    assert len(internal.base_bodies) == 2 and len(terminal.base_bodies) == 1  # Sec. 5.2, 5.3
    five = aggregation(ld.examples.five_bar()).bodies[0]  # example 2: across two trees
    assert five.parent == -1 and len(five.bodies) == 4 and five.dof == 2
    geared = aggregation(ld.examples.geared_chain(3))  # Sec. 5.1: {motor, link} on link k-1
    assert [s.body_names for s in geared.bodies] == [(f"rotor{k}", f"link{k}") for k in range(3)]
    assert [s.couplings for s in geared.bodies] == [(0,), (1,), (2,)]
    leg = aggregation(ld.examples.closed_knee_leg(geared=True))  # gear and loop share a body
    assert leg.bodies[0].body_names == ("knee_rotor", "knee_crank", "pushrod", "shank")
    assert (leg.bodies[0].rank, leg.bodies[0].dof) == (3, 1)  # 5 + 1 rows, 3 independent
    text = str(leg)
    assert "θ_R = [knee_rotor]" in text and "knee_link, knee_gear" in text
    g = leg.graph
    assert {d["kind"] for _, _, d in g.edges(data=True)} == {"joint", "closure", "coupling"}
    assert GROUND in leg.tree and ld.aggregation is aggregation


def test_couplings_are_checked_by_the_builder():
    b = ld.ModelBuilder("bad_gear")
    b.add_body("a", "ground", ld.Spherical())
    b.add_body("c", "ground", ld.Revolute("z"))
    b.add_coupling("a", "c", 2.0)
    with pytest.raises(ld.ModelError, match="revolute or prismatic"):
        b.build()


# --------------------------------------------------------------------------- dynamics
@pytest.mark.parametrize("name", list(CLOSED) + list(NEW))
def test_embedding_equals_augmented(name):
    """q̈ and λ (row by row, minimum-norm where rows are redundant) equal the dense KKT
    solve's; the catalog's planar-in-3D loops (closed_knee_leg) have dropped rows."""
    model = closed_model(name) if name in CLOSED else NEW[name]()
    rng = np.random.default_rng(7)
    worst_a = worst_l = 0.0
    d = model.create_data()
    for _ in range(4):
        q, v, tau = consistent_state(model, rng)
        ref = ld.forward_dynamics(model, q, v, tau, method="augmented")
        res = embedded(model, q, v, tau, data=d)
        worst_a = max(worst_a, rel_err(res.qdd, ref.qdd))
        worst_l = max(worst_l, rel_err(res.lam, ref.lam))
        assert res.rank == ref.rank and np.array_equal(res.dropped, ref.dropped)
    assert worst_a < 1e-10 and worst_l < 1e-9


def test_every_catalog_model_is_covered():
    """A new catalog model must join one of the lists of this file (or be a tree)."""
    covered = set(CLOSED) | {"four_bar_chain", "four_bar_cut", "closed_knee_leg", "geared_chain"}
    covered |= {"cassie_leg", "digit_leg", "five_bar_leg", "kangaroo_leg", "wl16_leg"}
    for name in set(ld.examples.names()) - covered:
        assert ld.examples.get(name).m == 0, name


def _decorated_four_bars():
    """A four-bar whose coupler carries a pendulum, whose rocker carries a slider, and a
    second four-bar standing on the pendulum: ordinary bodies on non-head members, and
    an aggregated body whose parent is an ordinary body."""
    from loopdyn.examples.planar import G_PLANAR
    from loopdyn.examples.shapes import rod

    b = ld.ModelBuilder("decorated", gravity=G_PLANAR, planar=True)
    z = ld.Revolute("z")
    b.add_body("crank", "ground", z, actuated=True, **rod(1.5, 0.3))
    b.add_body("coupler", "crank", z, xyz=(0.3, 0, 0), **rod(5.0, 1.0))
    b.add_body("pendulum", "coupler", z, xyz=(0.5, 0, 0), actuated=True, **rod(1.0, 0.7))
    b.add_body("crank2", "pendulum", z, xyz=(0.7, 0, 0), actuated=True, **rod(0.5, 0.2))
    b.add_body("coupler2", "crank2", z, xyz=(0.2, 0, 0), **rod(0.5, 0.5))
    b.add_body("rocker2", "pendulum", z, xyz=(0.2, 0, 0), **rod(0.5, 0.4))
    b.add_body("rocker", "ground", z, xyz=(1.0, 0, 0), **rod(3.0, 0.6))
    slider = ld.examples.box(0.4, (0.1, 0.05, 0.05))
    b.add_body("slider", "rocker", ld.Prismatic("x"), actuated=True, **slider)
    for name, body, x in [("ct", "coupler", 1.0), ("rt", "rocker", 0.6),
                          ("ct2", "coupler2", 0.5), ("rt2", "rocker2", 0.4)]:  # fmt: skip
        b.add_frame(name, body, xyz=(x, 0, 0))
    b.add_closure("loop", "ct", "rt", "revolute")
    b.add_closure("loop2", "ct2", "rt2", "revolute")
    model = b.build()
    guess = np.zeros(model.nq)
    start = dict(crank=0.5, coupler=0.7, rocker=1.9, pendulum=-1.0, crank2=2.5, coupler2=-2.4,
                 rocker2=1.2, slider=0.1)  # fmt: skip
    for j, val in start.items():
        guess[model.q_slice(j)] = val
    model.q0 = ld.assemble(model, guess)
    return model


def test_ordinary_bodies_on_members_and_nested_aggregates():
    model = _decorated_four_bars()
    agg = aggregation(model)
    assert [s.body_names for s in agg.bodies] == [
        ("crank", "coupler", "rocker"),
        ("crank2", "coupler2", "rocker2"),
    ]
    assert model.body_names[agg.bodies[1].parent] == "pendulum"
    rng = np.random.default_rng(4)
    for _ in range(4):
        q, v, tau = consistent_state(model, rng, spread=0.1)
        ref = ld.forward_dynamics(model, q, v, tau, method="augmented")
        res = embedded(model, q, v, tau)
        assert rel_err(res.qdd, ref.qdd) < 1e-10 and rel_err(res.lam, ref.lam) < 1e-9


@pytest.mark.parametrize("kind", ["weld", "generic", "universal"])
def test_spatial_joints_and_unassembled_states(kind):
    """Spherical, universal and free joints inside an aggregated body; at any (q, v) both
    methods solve M q̈ + h = τ + Jᵀλ, J q̈ = γ, so the state need not be consistent; and
    both agree with the independent dense oracle of the random-mechanism tests."""
    model = mixed_mechanism(kind)
    rng = np.random.default_rng(3)
    for _ in range(3):
        q = model.random_configuration(rng, scale=1.0)
        v, tau = rng.normal(size=model.nv), rng.normal(size=model.nv)
        res = embedded(model, q, v, tau)
        ref = ld.forward_dynamics(model, q, v, tau, method="augmented")
        assert rel_err(res.qdd, ref.qdd) < 1e-9 and rel_err(res.lam, ref.lam) < 1e-8
        assert mx.relative_error(res.qdd, mx.dense_oracle(model, q, v, tau)) < 1e-9


@pytest.mark.parametrize(
    "make",
    [ld.examples.serial_arm, lambda: ld.examples.random_tree(25, 2),
     lambda: ld.examples.spatial_ladder_tree(3)],
)  # fmt: skip
def test_the_kernel_on_a_tree_is_aba(make):
    """No closure, no aggregated body: the kernel's ordinary steps are ABA's (the runner
    calls ``ld.aba`` for trees, so the entry is called directly here)."""
    model = make()
    d = model.create_data()
    assert len(aggregation(model)) == 0
    rng = np.random.default_rng(0)
    q = model.random_configuration(rng)
    v, tau = rng.normal(size=model.nv), rng.normal(size=model.nv)
    qdd = np.empty(model.nv)
    assert E.bind(model, d)(q, v, tau, qdd, np.empty(0)) == 1.0
    assert rel_err(qdd, ld.aba(model, q, v, tau)) < 1e-12


def test_no_dense_jacobian_without_redundant_rows():
    """O(n): the fast path forms J_𝒮 per aggregated body only, never the dense m × nv J
    (which the runner's rank detection wrote at the first call)."""
    model = ld.examples.four_bar_chain(4)
    d = model.create_data()
    rng = np.random.default_rng(1)
    q, v, tau = consistent_state(model, rng)
    ref = embedded(model, q, v, tau, data=d)
    assert "embedding" in d.bound and ref.dropped.size == 0
    d.J[...] = 7.0
    res = embedded(model, q, v, tau, data=d)
    assert np.all(d.J == 7.0)
    np.testing.assert_array_equal(res.qdd, ref.qdd)


@pytest.mark.parametrize(
    "make",
    [
        lambda: ld.examples.four_bar_chain(3),
        ld.examples.closed_knee_leg,
        lambda: ld.examples.geared_chain(3),
        lambda: ld.examples.closed_knee_leg(geared=True),
    ],
)
def test_power_balance(make):
    """d/dt (T + V) = τ·q̇ along the motion: closure and gear forces do no work."""
    model = make()
    rng = np.random.default_rng(9)
    q, v, tau = consistent_state(model, rng, spread=0.1)
    qdd = embedded(model, q, v, tau).qdd
    h = 1e-5

    def energy(t):
        qt = ld.integrate(model, q, v * t + 0.5 * qdd * t * t)
        return ld.total_energy(model, qt, v + qdd * t)

    dE = (energy(h) - energy(-h)) / (2 * h)
    assert dE == pytest.approx(tau @ v, abs=1e-6 * (1 + abs(energy(0.0))))


def test_both_four_bar_cuts_give_the_same_motion():
    """Internal and terminal cut (Jain Sec. 5.2–5.3): θ3 = θ1 + θ2 + θ3', so
    q̈_int = T q̈_term and τ_term = Tᵀ τ_int."""
    internal = ld.examples.four_bar_cut("internal")
    terminal = ld.examples.four_bar_cut("terminal")
    T = np.array([[1, 0, 0], [0, 1, 0], [1, 1, 1.0]])
    wrap = np.angle(np.exp(1j * (T @ terminal.q0 - internal.q0)))  # same q0 modulo 2π
    np.testing.assert_allclose(wrap, 0.0, atol=1e-12)
    rng = np.random.default_rng(5)
    for _ in range(5):
        q_i, v_i, tau_i = consistent_state(internal, rng)
        q_t = np.linalg.solve(T, q_i)
        v_t = np.linalg.solve(T, v_i)
        a_i = embedded(internal, q_i, v_i, tau_i).qdd
        a_t = embedded(terminal, q_t, v_t, T.T @ tau_i).qdd
        np.testing.assert_allclose(T @ a_t, a_i, rtol=0, atol=1e-11 * np.abs(a_i).max())


# --------------------------------------------------------------------------- X_𝒮, ζ_𝒮
@pytest.mark.parametrize(
    "make",
    [
        ld.examples.four_bar,
        lambda: ld.examples.four_bar_cut("terminal"),
        ld.examples.closed_knee_leg,
        lambda: ld.examples.closed_knee_leg(geared=True),
        ld.examples.five_bar,
        lambda: ld.examples.geared_chain(2),
    ],
)
def test_constraint_map_against_finite_differences(make):
    """X_𝒮 = ∂θ_𝒮/∂θ_R along the constraint manifold (eq. 25, Sec. 8), and
    ζ_𝒮 = Ẋ_𝒮 θ̇_R (eq. 34, 61) as the central difference of X_𝒮 along the motion."""
    model = make()  # revolute joints only: q and v indices coincide
    d = model.create_data()
    rng = np.random.default_rng(2)
    q, v, tau = consistent_state(model, rng, spread=0.1)
    embedded(model, q, v, tau, data=d)
    plan = E.plan_for(model, d)
    s = 0
    X, zeta = plan.constraint_map(s)
    cols = list(plan.columns[s])
    order = plan.column_order(s)
    r = int(plan.agg[s, E.A_R])
    ind = [cols[c] for c in order[r:]]
    keep = [i for i in range(model.nv) if i not in cols] + ind  # θ_R and the rest held
    h = 1e-6
    for c, iv in enumerate(ind):
        steps = []
        for sign in (1.0, -1.0):
            g = np.array(q)
            g[iv] += sign * h
            steps.append(ld.assemble(model, g, fixed=keep))
        fd = (steps[0] - steps[1])[cols] / (2 * h)
        np.testing.assert_allclose(fd, X[:, c], rtol=0, atol=1e-7 * max(1, np.abs(X).max()))
    # ζ = Ẋ θ̇_R: X at q(±h) on the trajectory through q with velocity v
    Xs = []
    for sign in (1.0, -1.0):
        qs = ld.assemble(model, ld.integrate(model, q, sign * h * v), fixed=keep)
        vs = ld.complete_velocity(model, qs, v, fixed=keep)
        embedded(model, qs, vs, tau, data=d)
        assert np.array_equal(plan.column_order(s), order)  # same partition
        Xs.append(plan.constraint_map(s)[0])
    fd = (Xs[0] - Xs[1]) / (2 * h) @ v[ind]
    np.testing.assert_allclose(fd, zeta, rtol=0, atol=1e-6 * max(1, np.abs(zeta).max()))


# --------------------------------------------------------------------------- singularities
def test_singular_loop_raises():
    """At the collinear configuration J has rank 1: no q̈ satisfies both rows (γ is not in
    J's range), embedding and its fallback refuse."""
    model = flat_four_bar(0.5)
    q = np.zeros(3)
    assert np.abs(ld.closure_residual(model, q)).max() < 1e-12
    with pytest.raises(ld.SingularityError, match="singular configuration"):
        ld.forward_dynamics(model, q, np.array([1.0, -1.5, 0.0]), np.zeros(3),
                            method="embedding", data=model.create_data())  # fmt: skip


@pytest.mark.parametrize(
    "method", ["augmented", "slm", "sslm", "recursive_lambda", "embedding", "rcr"]
)
def test_a_singular_call_leaves_the_workspace_as_new(method):
    """After a SingularityError at the collinear configuration the same Data, back at a
    regular state, answers like a fresh one (it used to keep the rows detected there:
    embedding and rcr then ignored a closure row, |J q̈ − γ| = 2.1)."""
    model = flat_four_bar(0.5)
    q = model.q0
    v = ld.complete_velocity(model, q, [1.0, 0, 0])
    tau = np.array([0.3, -0.2, 0.1])
    d = model.create_data()
    with pytest.raises(ld.SingularityError):
        ld.forward_dynamics(model, np.zeros(3), np.array([1.0, -1.5, 0.0]), np.zeros(3),
                            method=method, data=d)  # fmt: skip
    ref = ld.forward_dynamics(model, q, v, tau, method=method, data=model.create_data())
    for _ in range(2):  # the checked path, then the fast path
        got = ld.forward_dynamics(model, q, v, tau, method=method, data=d)
        assert rel_err(got.qdd, ref.qdd) < 1e-12 and got.rank == 2


def test_poor_partition_is_reselected():
    """At the rocker's dead centre (crank and coupler aligned) a partition with the
    rocker independent has a singular Y1; the kernel makes the rocker dependent."""
    model = ld.examples.four_bar()
    d = model.create_data()
    embedded(model, model.q0, np.zeros(3), np.zeros(3), data=d)
    plan = E.plan_for(model, d)
    plan.set_column_order(0, [0, 1, 2])  # dependent crank, coupler; rocker independent
    B = ld.examples.planar.circle_intersection((0, 0), 1.3, (1.0, 0), 0.6)
    th = np.arctan2(B[1], B[0])
    q = ld.assemble(model, [th, 0.0, np.arctan2(B[1], B[0] - 1.0)], fixed=[0])
    v = ld.complete_velocity(model, q, [1.0, 0, 0])
    tau = np.array([0.3, -0.2, 0.1])
    res = embedded(model, q, v, tau, data=d)
    ref = ld.forward_dynamics(model, q, v, tau, method="augmented")
    assert rel_err(res.qdd, ref.qdd) < 1e-9 and rel_err(res.lam, ref.lam) < 1e-9
    assert 2 in plan.column_order(0)[:2]  # the rocker is dependent now


def test_actuated_coordinates_are_kept_independent():
    for model in (ld.examples.four_bar(), ld.examples.five_bar(), ld.examples.excavator()):
        ind = [i for s in aggregation(model).bodies for i in s.independent]
        assert sorted(ind) == sorted(model.actuated.tolist()), model.name


def test_bad_input():
    model = ld.examples.four_bar()
    with pytest.raises(ValueError, match="NaN"):
        ld.forward_dynamics(model, model.q0, np.full(3, np.nan), np.zeros(3), method="embedding")
    with pytest.raises(ValueError, match="shape"):
        ld.forward_dynamics(model, model.q0, np.zeros(4), np.zeros(3), method="embedding")
    # read-only, list and float32 inputs take the checked path and give the same result
    q = model.q0
    v = ld.complete_velocity(model, q, [1.0, 0, 0])
    ref = embedded(model, np.array(q), v, np.ones(3)).qdd
    np.testing.assert_array_equal(embedded(model, q, list(v), np.ones(3, np.float32)).qdd, ref)
    np.testing.assert_array_equal(
        embedded(model, q, v, None).qdd, embedded(model, q, v, np.zeros(3)).qdd
    )


def test_embedding_runs_in_linear_memory_without_the_dense_rank_detection():
    """A fresh Data has no dense blocks: embedding starts from every row (its plan and
    kernel refuse dependent ones) and leaves the buffer O(n); a dense method then
    reallocates it once, and both methods keep answering on the same Data."""
    model = ld.examples.four_bar_chain(N=32)
    d = model.create_data()
    rng = np.random.default_rng(3)
    q, v, tau = consistent_state(model, rng)
    res = ld.forward_dynamics(model, q, v, tau, method="embedding", data=d)
    assert not d.dense and d.J.shape == (0, model.nv) and d.M.size == 0 and d.rank_info is None
    lazy = d.ctx.nbytes
    ref = ld.forward_dynamics(model, q, v, tau, method="augmented", data=d)
    assert d.dense and d.J.shape == (model.m, model.nv) and d.ctx.nbytes > 2 * lazy
    again = ld.forward_dynamics(model, q, v, tau, method="embedding", data=d)
    for r in (res, again):
        assert rel_err(r.qdd, ref.qdd) < 1e-12 and rel_err(r.lam, ref.lam) < 1e-10
    # the model's own Data: the tree fast paths follow the reallocated buffer
    ld.forward_dynamics(model, q, v, tau, method="embedding")
    ld.constraint_jacobian(model, q)
    np.testing.assert_allclose(ld.aba(model, q, v, tau), ld.aba(model, q, v, tau, data=d))

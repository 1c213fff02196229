"""SSLM (subsystem-level multipliers), the GICM, topology and the paper's mechanisms."""

import networkx as nx
import numpy as np
import pytest

import loopdyn as ld
from closed_helpers import CLOSED, catalog_states, closed_model, consistent_state, mixed_mechanism
from loopdyn import topology as T
from loopdyn.examples.paper_mechanisms import (
    CARPET_SCRAPER_THETA1_DOT,
    THREE_RRR_THETA,
    carpet_scraper_positions,
)
from loopdyn.examples.shapes import rod
from loopdyn.methods import sslm
from loopdyn.methods.common import DIAG_REFINED

PAPER = ["carpet_scraper", "three_rrr", "excavator"]


def _close(actual, desired, rtol=1e-10):
    desired = np.asarray(desired)
    np.testing.assert_allclose(actual, desired, rtol=0, atol=rtol * np.abs(desired).max())


# --------------------------------------------------------------- against the oracle
@pytest.mark.parametrize("name", list(CLOSED))
def test_sslm_equals_augmented(name):
    model, states = catalog_states(name)
    for q, v, tau in states:
        a = ld.forward_dynamics(model, q, v, tau, method="augmented")
        s = ld.forward_dynamics(model, q, v, tau, method="sslm")
        _close(s.qdd, a.qdd)
        _close(s.lam, a.lam)
        assert s.method == "sslm" and s.rank == a.rank


def test_weld_pivot_block_schur_complement_census_case_271():
    """Census seed 11, case 271 (``python benchmarks/random_census.py --n 500 --seed 11
    --no-assembly --methods augmented,sslm``): a planar mechanism whose weld gives the
    GICM a 3 × 3 pivot block of cond 4.5e5 (det / Π diag 8e-9), eliminated first; the
    Schur complement left on the other loops' rows has a smallest eigenvalue of 7e-5.
    With the block's explicit (adjugate) inverse that complement was off by 1.2e-5 and
    refinement did not converge in its 6 steps (the call fell back to augmented); with
    the block factored (``sslm._chol_block``) sslm answers itself, as SLM does, in at
    most 2 refinement steps, equal to the dense oracle (q̈ is ~1e-25 here: the
    structure is rigid, so the oracle's acceleration scale judges it)."""
    import mechanisms as mx

    mech = mx.random_mechanism((11, 271), max_bodies=25)
    oracle = mx.dense_oracle(mech.model, mech.q, mech.v, mech.tau)
    assert oracle.well
    d = mech.model.create_data()
    res = ld.forward_dynamics(
        mech.model, mech.q, mech.v, mech.tau, method="sslm", data=d, fallback=False
    )
    assert res.method == "sslm"
    assert d.diag[DIAG_REFINED] <= 2
    out = mx.classify(mech, res, oracle)
    assert out.kind == mx.AGREES, (out.kind, out.error)  # 1e-8 of the problem's scale


def _ring(n=4, seed=0):
    """n posts on universal joints, each with a rung, closed into a ring by ball joints.

    The loop graph is a cycle of n loops: its elimination creates fill-in.  Not
    assembled: forward dynamics is a well-defined linear problem at any q.
    """
    b = ld.ModelBuilder(f"ring{n}", gravity=(0, 0, -9.81))
    for k in range(n):
        ang = 2 * np.pi * k / n
        b.add_body(
            f"post{k}", "ground", ld.Universal("x", "y"), xyz=(np.cos(ang), np.sin(ang), 0),
            **rod(2.0, 1.0, "-z"),
        )  # fmt: skip
        b.add_body(f"rung{k}", f"post{k}", ld.Revolute("z"), xyz=(0, 0, -1), **rod(1.0, 0.8, "x"))
        b.add_frame(f"end{k}", f"post{k}", xyz=(0, 0, -1))
        b.add_frame(f"tip{k}", f"rung{k}", xyz=(0.8, 0, 0))
    for k in range(n):
        b.add_closure(f"loop{k}", f"tip{k}", f"end{(k + 1) % n}", "ball")
    model = b.build()
    rng = np.random.default_rng(seed)
    return model, [
        (model.random_configuration(rng, 0.5), rng.normal(size=model.nv), rng.normal(size=model.nv))
        for _ in range(3)
    ]


def test_sslm_with_fill_in_and_unassembledcatalog_states():
    model, states = _ring(5)
    plan = sslm.SSLMPlan(model, np.arange(model.m))
    assert len(plan.fill) > 0  # a cycle of loops cannot be eliminated without fill
    for q, v, tau in states:
        a = ld.forward_dynamics(model, q, v, tau)
        s = ld.forward_dynamics(model, q, v, tau, method="sslm")
        _close(s.qdd, a.qdd)
        _close(s.lam, a.lam)


@pytest.mark.parametrize("kind", ["ball", "revolute", "universal", "prismatic", "weld", "generic"])
def test_sslm_on_mixed_joints_and_closures(kind):
    """Spherical, universal, free and revolute joints; every closure kind; a closure to ground."""
    model = mixed_mechanism(kind)
    rng = np.random.default_rng(3)
    for _ in range(3):
        q = model.random_configuration(rng)
        v, tau = rng.normal(size=model.nv), rng.normal(size=model.nv)
        a = ld.forward_dynamics(model, q, v, tau)
        s = ld.forward_dynamics(model, q, v, tau, method="sslm")
        _close(s.qdd, a.qdd)
        _close(s.lam, a.lam)


def _four_bar_3d(kind):
    b = ld.ModelBuilder(f"four_bar_3d_{kind}", gravity=(0, -9.81, 0))
    b.add_body("crank", "ground", ld.Revolute("z"), actuated=True, **rod(1.5, 0.3))
    b.add_body("coupler", "crank", ld.Revolute("z"), xyz=(0.3, 0, 0), **rod(5.0, 1.0))
    b.add_body("rocker", "ground", ld.Revolute("z"), xyz=(1, 0, 0), **rod(3.0, 0.6))
    b.add_frame("coupler_tip", "coupler", xyz=(1, 0, 0))
    b.add_frame("rocker_tip", "rocker", xyz=(0.6, 0, 0))
    b.add_closure("coupler_rocker", "coupler_tip", "rocker_tip", kind)
    return b.build()


@pytest.mark.parametrize(("kind", "dropped"), [("ball", 1), ("revolute", 3)])
def test_sslm_redundant_closures(kind, dropped):
    """Redundant rows are dropped: the GICM is built on the independent rows only."""
    model = _four_bar_3d(kind)
    rng = np.random.default_rng(6)
    for q, v, tau in [consistent_state(closed_model("four_bar"), rng) for _ in range(2)]:
        a = ld.forward_dynamics(model, q, v, tau)
        s = ld.forward_dynamics(model, q, v, tau, method="sslm")
        assert s.rank == 2 and s.dropped.size == dropped
        _close(s.qdd, a.qdd)
        _close(s.lam, a.lam)


@pytest.mark.parametrize("name", PAPER)
def test_inverse_then_forward_dynamics(name):
    model, states = catalog_states(name, n=2, seed=3)
    rng = np.random.default_rng(1)
    for q, v, _ in states:
        tau = np.zeros(model.nv)
        tau[model.actuated] = rng.normal(size=model.actuated.size)
        fd = ld.forward_dynamics(model, q, v, tau, method="sslm")
        inv = ld.inverse_dynamics(model, q, v, fd.qdd)
        np.testing.assert_allclose(inv.tau, tau, atol=1e-8 * (1 + np.abs(tau).max()))


def _pinned_twice():
    """A double pendulum whose first pivot is also "closed" to the ground: J = 0 there."""
    b = ld.ModelBuilder("pinned_twice", gravity=(0, -9.81, 0), planar=True)
    b.add_body("a", "ground", ld.Revolute("z"), **rod(1.0, 1.0))
    b.add_body("b", "a", ld.Revolute("z"), xyz=(1, 0, 0), **rod(1.0, 1.0))
    b.add_frame("pivot", "a")
    b.add_frame("g", "ground")
    b.add_closure("c", "g", "pivot", "revolute")
    return b.build()


def test_singular_gicm_is_reported_and_redundant_rows_dropped():
    model = _pinned_twice()
    q, v, tau = np.array([0.3, -0.2]), np.array([0.5, 1.0]), np.array([0.1, 0.0])
    d = model.create_data()
    d.set_rows(np.arange(model.m))
    qdd, lam = np.empty(model.nv), np.empty(model.m)
    status = sslm.bind(model, d)(q, v, tau, qdd, lam)
    assert status < 0  # every row kept: the GICM is zero, a status and no result
    res = ld.forward_dynamics(model, q, v, tau, method="sslm")  # rows dropped: a free tree
    assert res.rank == 0
    _close(res.qdd, ld.aba(model, q, v, tau))


# --------------------------------------------------------------- the λ stage alone
@pytest.mark.parametrize("name", PAPER)
def test_lambda_stage_slm_and_sslm_agree(name):
    model, states = catalog_states(name, n=1, seed=5)
    q, v, tau = states[0]
    out = {}
    for method in ("slm", "sslm"):
        kernel, args, result = sslm.lambda_stage(model, q, v, tau, method)
        assert kernel(*args) > 0
        out[method] = result()
    _close(out["sslm"], out["slm"])
    _close(out["sslm"], ld.forward_dynamics(model, q, v, tau).lam)


@pytest.mark.parametrize("parallel", [False, True])
def test_subsystems_are_independent_once_lambda_is_known(parallel):
    model, states = catalog_states("carpet_scraper", n=2, seed=7)
    for q, v, tau in states:
        fd = ld.forward_dynamics(model, q, v, tau, method="sslm")
        qdd = sslm.subsystem_accelerations(model, q, v, tau, fd.lam, parallel=parallel)
        _close(qdd, fd.qdd, 1e-13)


# --------------------------------------------------------------- the GICM
@pytest.mark.parametrize("name", list(CLOSED))
def test_gicm_spd_with_zero_blocks_exactly_where_loops_share_no_subsystem(name):
    model, states = catalog_states(name, n=2, seed=11)
    topo = T.topology(model)
    for q, v, tau in states:
        g = ld.gicm(model, q, v, tau)
        G = g.matrix
        assert np.array_equal(G, G.T)
        assert np.linalg.eigvalsh(G).min() > 0
        J = ld.constraint_jacobian(model, q)
        _close(G, J @ np.linalg.solve(ld.crba(model, q), J.T), 1e-12)
        for r in range(len(topo.loops)):
            for s in range(r + 1):
                shared = set(topo.loops[r].subsystems) & set(topo.loops[s].subsystems)
                blk = g.block(r, s)
                if shared:
                    assert (r, s) in g.blocks and np.abs(blk).max() > 0
                    assert g.contributions[(r, s)] == tuple(sorted(shared))
                    _close(sum(g.terms[(r, s, j)] for j in shared), g.blocks[(r, s)], 1e-12)
                else:
                    assert (r, s) not in g.blocks and not blk.any()
        # Ψ̄ = γ - J I⁻¹ φ (eq. 25)
        _, _, gamma = ld.constraints(model, q, v)
        phi = tau - ld.nonlinear_effects(model, q, v)
        _close(g.psi, gamma - J @ np.linalg.solve(ld.crba(model, q), phi), 1e-10)


def test_gicm_blocks_of_the_paper_mechanisms():
    """The physical interpretation of eqs. (32) and (43), and the zero block of eq. (31)."""
    g = ld.gicm(closed_model("carpet_scraper"), closed_model("carpet_scraper").q0)
    assert g.contributions == {
        (0, 0): (0, 1),
        (1, 0): (1,),
        (1, 1): (1, 2),
        (2, 1): (2,),
        (2, 2): (2,),
    }
    assert not g.block(2, 0).any()
    g = ld.gicm(closed_model("three_rrr"), closed_model("three_rrr").q0)
    assert g.contributions == {(0, 0): (0, 1), (1, 0): (0,), (1, 1): (0, 2)}
    g = ld.gicm(closed_model("excavator"), closed_model("excavator").q0)
    assert (3, 1) not in g.contributions and not g.block(3, 1).any()
    assert g.contributions[(3, 3)] == (0, 2) and g.contributions[(1, 1)] == (1,)
    text = str(g)
    assert "𝓘⁴⁴_I + 𝓘⁴⁴_III" in text and "O (no shared subsystem)" in text
    assert "elimination order" in text


# --------------------------------------------------------------- topology and patterns
PATTERNS = {  # eqs. (26), (37), (14)
    "carpet_scraper": [[1, 1, 0], [0, 1, 1], [0, 0, 1]],
    "three_rrr": [[1, 1, 0], [1, 0, 1]],
    "excavator": [[1, 1, 0], [0, 1, 0], [1, 1, 0], [1, 0, 1]],
}


@pytest.mark.parametrize("name", PAPER)
def test_J_block_pattern_matches_the_paper(name):
    model = closed_model(name)
    topo = T.topology(model)
    np.testing.assert_array_equal(topo.incidence, np.array(PATTERNS[name], bool))
    _, states = catalog_states(name, n=2, seed=13)
    for q, _, _ in states:
        J = ld.constraint_jacobian(model, q)
        for i, lp in enumerate(topo.loops):
            for j, s in enumerate(topo.subsystems):
                blk = J[lp.rows, s.v_slice]
                assert blk.any() == bool(PATTERNS[name][i][j]), (i, j)


def test_block_sizes_and_zero_columns_of_the_appendix():
    """Carpet scraper App. A.1: J2,3 = [x x 0 0]; 3-RRR App. A.2: J1,1 ends in 0, J2,1 skips θ4."""
    model = closed_model("carpet_scraper")
    topo = T.topology(model)
    assert [s.nv for s in topo.subsystems] == [1, 2, 4]
    assert [s.kind for s in topo.subsystems] == ["serial", "serial", "tree"]
    J = ld.constraint_jacobian(model, model.q0)
    J23 = J[topo.loops[1].rows, topo.subsystems[2].v_slice]
    assert J23.shape == (2, 4) and not J23[:, 2:].any() and J23[:, :2].all()
    model = closed_model("three_rrr")
    topo = T.topology(model)
    assert [s.nv for s in topo.subsystems] == [5, 1, 1]
    J = ld.constraint_jacobian(model, model.q0)
    J11 = J[topo.loops[0].rows, topo.subsystems[0].v_slice]
    J21 = J[topo.loops[1].rows, topo.subsystems[0].v_slice]
    assert not J11[:, 4].any() and not J21[:, 3].any()


def test_topology_of_the_excavator():
    model = closed_model("excavator")
    topo = T.topology(model)
    assert model.nbodies == 11 and model.nc == 4 and ld.degrees_of_freedom(model) == 3
    assert [s.kind for s in topo.subsystems] == ["serial", "tree", "serial"]
    assert model.closures == ("j15", "j14", "j8", "j11")
    assert sorted(
        model.joint_names[i] for i in range(11) if model.topo[i, 3] in model.actuated
    ) == [
        "j10",
        "j13",
        "j4",
    ]
    assert "J4,1   O      J4,3" in topo.block_pattern()
    # the loops' links: loop 2 (7-14-13-12-7) is formed by links #5, #6, #8, #9 of subsystem II
    names = {model.body_names[i] for i in topo.loops[1].links}
    assert names == {"stick", "lower_boom", "stick_rod", "stick_cyl"}


def test_elimination_order_is_minimum_degree():
    chain = nx.path_graph(5)
    assert T.elimination_order(chain) == ([0, 1, 2, 3, 4], [])
    star = nx.star_graph(4)  # the hub last: no fill
    order, fill = T.elimination_order(star)
    assert fill == [] and 0 in order[-2:]
    cycle = nx.cycle_graph(6)
    order, fill = T.elimination_order(cycle)
    assert len(fill) == 3  # a cycle of n needs n - 3 fill edges


# --------------------------------------------------------------- automatic cuts
@pytest.mark.parametrize(
    ("name", "cuts"),
    [
        ("carpet_scraper", {"j8", "j9", "j10"}),
        ("three_rrr", {"j6", "j7"}),
        ("excavator", {"j15", "j14", "j8", "j11"}),
    ],
)
def test_automatic_cuts_reproduce_the_papers_choice(name, cuts):
    model = closed_model(name)
    choice = T.choose_cuts(T.mechanism_graph(model))
    assert set(choice.cuts) == cuts and choice.method == "exhaustive"
    assert choice.determinate == (name != "excavator")


def test_recut_model_has_the_same_dynamics():
    """Rebuilt on another spanning tree, the mechanism moves the same way (world accelerations)."""
    model = closed_model("carpet_scraper")
    q = np.array(model.q0)
    other = T.recut(model, cuts=["j3", "j9", "j10"])  # link 3 hangs from the crank instead
    assert set(other.closures) == {"j3", "j9", "j10"}
    assert [s.nv for s in T.subsystems(other)] == [2, 1, 4]
    Phi = ld.closure_residual(other, other.q0)
    assert np.abs(Phi).max() < 1e-12
    a = ld.forward_dynamics(model, q, np.zeros(model.nv), method="sslm").qdd
    b = ld.forward_dynamics(other, other.q0, np.zeros(other.nv), method="sslm").qdd
    for body in model.body_names:
        Ja = ld.frame_jacobian(model, q, body)
        Jb = ld.frame_jacobian(other, other.q0, body)
        np.testing.assert_allclose(Ja[:3] @ a, Jb[:3] @ b, atol=1e-9)  # angular accelerations
    auto = T.recut(model)
    assert set(auto.closures) == {"j8", "j9", "j10"} and auto.cut_choice.determinate


def test_greedy_cuts_for_large_graphs():
    graph = T.mechanism_graph(ld.examples.planar_ladder(4))
    choice = T.choose_cuts(graph, max_candidates=1)
    assert choice.method == "greedy"
    model = T.build_mechanism(graph, choice.cuts)
    assert max(s.nv for s in T.subsystems(model)) <= 2


# --------------------------------------------------------------- the catalog models
def test_carpet_scraper_parameters_and_full_crank_turn():
    model = closed_model("carpet_scraper")
    np.testing.assert_allclose(model.masses, [1.5, 3, 5, 4.2, 3, 10.5, 3])
    assert ld.degrees_of_freedom(model) == 1 and model.q0[0] == 0.0
    assert CARPET_SCRAPER_THETA1_DOT == 4.7124
    q = np.array(model.q0)
    for th in np.linspace(0, 2 * np.pi, 13)[1:]:
        guess = q.copy()
        guess[0] = th
        q = ld.assemble(model, guess)
        P = carpet_scraper_positions(th)
        _, p3 = ld.frame_placement(model, q, "link3")
        np.testing.assert_allclose(p3[:2], P[3], atol=1e-9)
        sv = np.linalg.svd(ld.constraint_jacobian(model, q), compute_uv=False)
        assert sv.min() > 1e-3 * sv.max()


def test_three_rrr_parameters():
    model = closed_model("three_rrr")
    # Table 1: proximal #1, #6, #7 3 kg; distal #2, #4, #5 4 kg; platform #3 8 kg
    np.testing.assert_allclose(model.masses, [3, 4, 8, 4, 4, 3, 3])
    np.testing.assert_allclose(model.q0[model.actuated], THREE_RRR_THETA)
    # Table 1's lengths: proximal 0.4 m (joint 1 to joint 2), distal 0.6 m (joint 2 to 3)
    q = model.q0
    _, j2 = ld.frame_placement(model, q, "link2")
    _, j3 = ld.frame_placement(model, q, "link3")
    _, j1 = ld.frame_placement(model, q, "link1")
    assert np.linalg.norm(j2 - j1) == pytest.approx(0.4, abs=1e-12)
    assert np.linalg.norm(j3 - j2) == pytest.approx(0.6, abs=1e-12)
    # the platform is an equilateral triangle of side 0.4 m
    P = [ld.frame_placement(model, model.q0, f)[1] for f in ("link3", "link4", "link5")]
    for a, b in [(0, 1), (1, 2), (2, 0)]:
        assert np.linalg.norm(P[a] - P[b]) == pytest.approx(0.4, abs=1e-12)


def test_catalog_lists_the_paper_mechanisms():
    for name in PAPER:
        assert name in ld.examples.names()
    assert "sslm" in ld.methods.dynamics.METHODS


@pytest.mark.parametrize("name", PAPER)
def test_eq21_qdd_from_phi_hat_and_I_hat(name):
    """q̈_j = φ̂_j + Σ_i Î_{i,j}ᵀ λ_i (eqs. 19–21); Î has the block pattern of J (eq. 22)."""
    model, states = catalog_states(name, n=1, seed=17)
    q, v, tau = states[0]
    g = ld.gicm(model, q, v, tau)
    fd = ld.forward_dynamics(model, q, v, tau, method="sslm")
    topo = T.topology(model)
    qdd = g.phi_hat.copy()
    for (i, j), Ih in g.I_hat.items():
        assert topo.incidence[i, j]
        qdd[topo.subsystems[j].v_slice] += Ih.T @ fd.lam[topo.loops[i].rows]
    assert len(g.I_hat) == topo.incidence.sum()
    _close(qdd, fd.qdd, 1e-9)


def test_nonfinite_state_is_rejected():
    model = closed_model("three_rrr")
    d = model.create_data()
    ld.forward_dynamics(model, model.q0, np.zeros(model.nv), method="sslm", data=d)
    v = np.zeros(model.nv)
    v[2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        ld.forward_dynamics(model, model.q0, v, method="sslm", data=d)

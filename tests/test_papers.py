"""The paper reproductions (``examples/papers/*.py``, docs/papers.md): each script runs with
``--quick`` (figures into a temporary folder) and the key numbers it prints are checked
against the papers' values where the papers give numbers, else against the independent
reference the page names (the dense ``augmented`` solve, Pinocchio, ``ld.inverse_dynamics``,
the equivalent pendulum).  No timing is checked: the timing keys are printed only."""

import ast
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "examples" / "papers"


def _run(name, tmp_path_factory):
    out = tmp_path_factory.mktemp(name)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MPLBACKEND": "Agg"}
    r = subprocess.run(
        [sys.executable, str(SCRIPTS / f"{name}.py"), "--quick", "--out", str(out)],
        capture_output=True, text=True, env=env, timeout=900, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    keys = {}
    for line in r.stdout.splitlines():
        if line.startswith("KEY "):
            k, v = line[4:].split(" = ", 1)
            keys[k] = math.nan if v == "nan" else ast.literal_eval(v)
    figures = sorted(p.name for p in out.glob("*.png"))
    return keys, figures


@pytest.fixture(scope="module")
def sslm(tmp_path_factory):
    return _run("sslm_paper", tmp_path_factory)


@pytest.fixture(scope="module")
def denoc(tmp_path_factory):
    return _run("denoc_paper", tmp_path_factory)


@pytest.fixture(scope="module")
def rcr(tmp_path_factory):
    return _run("rcr_paper", tmp_path_factory)


@pytest.fixture(scope="module")
def jain(tmp_path_factory):
    return _run("jain_paper", tmp_path_factory)


def test_sslm_tables_1_2_and_cuts(sslm):
    k, figs = sslm
    for name in ("carpet_scraper", "three_rrr"):
        assert k[f"{name}_table1_length_error"] < 1e-12  # Table 1's lengths
        assert k[f"{name}_table1_mass_error"] == 0  # and masses
        assert k[f"{name}_subsystem_sizes_match"] is True  # Figs. 4, 6: (1, 2, 4), (5, 1, 1)
    assert k["three_rrr_table2_angle_error"] < 1e-12  # Table 2
    assert k["carpet_scraper_table2_rate"] == 4.7124
    assert figs == ["sslm_fig7_carpet_scraper.png", "sslm_fig8_three_rrr.png"]


def test_sslm_figs_7_8(sslm):
    k, _ = sslm
    for name in ("carpet_scraper", "three_rrr"):
        # (a) free runs verified against an independent formulation (the paper: RecurDyn)
        assert k[f"{name}_free_sslm_vs_augmented"] < 1e-7
        assert k[f"{name}_free_energy_drift_rel"] < 1e-5
        # (b-c) "the deviation was very less": with the light PD; open loop it grows
        assert k[f"{name}_forced_pd_max_deviation"] < 1e-6
        assert k[f"{name}_forced_open_loop_deviation_1s"] < 1e-4
        assert 1.0 < k[f"{name}_forced_open_loop_exceeds_0.01rad_at"] < 5.0


def test_denoc_four_bar(denoc):
    k, figs = denoc
    assert k["four_bar_fig5_rates_11b_vs_null_space"] < 1e-12
    assert k["four_bar_fig6_ida_vs_inverse_dynamics"] < 1e-9
    assert k["four_bar_fig6_tau1_start"] == pytest.approx(8.634, abs=1e-3)
    assert k["four_bar_fig7_energy_drift"] < 1e-6
    assert k["four_bar_fig7_denoc_vs_ld_simulate"] < 1e-5
    # Fig. 8: the open loop leaves the path (paper: ~2.25 s; ours later, docs/papers.md)
    assert 5.0 < k["four_bar_fig8_open_loop_leaves_at_rtol1e-6"] < 12.0
    assert k["four_bar_fig8_feedback_max_error"] < 1e-8  # eq. (37): "followed exactly"
    assert {f"denoc_fig{i}" for i in (5, 6, 7, 8, 10, 11, 12, 13)} == {
        f.split("_")[0] + "_" + f.split("_")[1] for f in figs
    }


def test_denoc_five_bar(denoc):
    k, _ = denoc
    assert k["five_bar_fig11_ida_vs_inverse_dynamics"] < 1e-9
    assert k["five_bar_fig11_tau_start"] == pytest.approx([15.334, 13.034], abs=1e-3)
    lo1, hi1 = k["five_bar_fig10_leg1_theta2_range_deg"]
    assert -125 < lo1 < hi1 < -60
    # Fig. 12: "after about 1.4 sec ... singular"
    assert k["five_bar_fig12_denoc_stops_at_below"] == pytest.approx(1.4, abs=0.15)
    # Fig. 13: the paper's run stops at 3.2 s; ours leaves the path later (docs/papers.md)
    assert 3.0 < k["five_bar_fig13_open_loop_leaves_at"] < 8.0
    assert k["five_bar_fig13_feedback_max_error"] < 1e-8


def test_rcr_figs_5_6(rcr):
    k, _ = rcr
    # AC drifts "with an expected logarithmic trend (~ quadratic in time)"
    assert 1.7 < k["rcr_fig6_ac_drift_exponent"] < 2.3
    # VC: slow drift from the ninth decimal, far below AC's
    assert k["rcr_fig6_vc_drift_at_end"] < 1e-5
    assert k["rcr_fig6_vc_drift_at_end"] < 1e-2 * k["rcr_fig6_ac_drift_at_end"]
    assert k["rcr_fig6_vc_fallbacks"] == 0
    assert k["rcr_fig6_partitioning_max_residual"] < 1e-10
    assert k["rcr_fig5_theta1_vc_vs_ac"] < 0.1  # Fig. 5: overlapping trajectories


def test_rcr_figs_8_10_11(rcr):
    k, figs = rcr
    assert k["rcr_fig8_n_m"] == [6, 4]
    assert k["rcr_fig8_independent"] == [0, 1]  # leg 1's joints, "assigned consecutively"
    assert k["rcr_fig8_fallbacks"] == 0
    assert k["rcr_fig8_rcr_vs_augmented"] < 1e-8
    assert k["rcr_fig8_rcr_vs_pinocchio_qdd"] < 1e-8
    assert k["rcr_fig10_ladders_vs_pendulum"] < 1e-9
    assert k["rcr_fig11_n_is_4L_plus_2"] is True
    assert 0.9 < k["rcr_fig11_count_slope_rcr"] < 1.1  # O(n + m)
    assert k["rcr_fig11_count_slope_recursive_lambda"] > 1.8  # "O(n³) performance"
    assert len(figs) == 4


def test_jain_sections_5_and_7_3(jain):
    k, figs = jain
    assert k["jain_5_1_X_constant"] < 1e-10  # eq. (37): X constant
    assert k["jain_5_2_base_bodies"] == 1  # terminal cut
    assert k["jain_5_3_base_bodies"] == 2  # internal cut: E_S with two entries
    assert k["jain_5_2_members_k"] == k["jain_5_3_members_k"] == [3, 1]
    assert k["jain_5_embedding_vs_augmented"] < 1e-10
    assert k["jain_5_native"] is True
    assert k["jain_7_3_planar_ladder_slope_count_embedding"] > 2.0  # one growing aggregate
    assert k["jain_7_3_four_bar_chain_slope_count_embedding"] == pytest.approx(1.0, abs=0.05)
    assert figs == ["jain_sec7_3_aggregate_cost.png"]

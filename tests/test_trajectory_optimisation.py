"""examples/trajectory_optimisation.py run as a user runs it (``--quick``).

The five-bar's minimum-effort pick-and-place through ``ld.inverse_dynamics``, optimised
by SLSQP with the analytic gradient (the chain rule through
``ld.inverse_dynamics_derivatives`` and the closures) and with scipy's finite
differences.  Checked from the printed numbers, independently of the example's own
verdict: the analytic gradient against central differences (< 1e-6 relative), both runs
converged (status 0) to the same cost (relative 1e-9: the example's doc says why) below
the start's, the actuated trajectories equal (1e-4 rad), and the final trajectory closes
the loop (< 1e-9 m) and ends at the place point (< 1e-9 m).
"""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NUM = r"([-+0-9.eE]+)"


def _one(pattern, text):
    found = re.findall(pattern, text)
    assert len(found) == 1, (pattern, text)
    return found[0]


def test_trajectory_optimisation_quick():
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "trajectory_optimisation.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    assert float(_one(r"gradient check at c = 0: relative error " + NUM, text)) < 1e-6, text

    runs = {}
    for name in ("analytic", "finite-difference"):
        F, F0, status = _one(
            rf"{name} gradient: F = {NUM} N\^2 m\^2 s \(start {NUM}\).*status (\d+)", text
        )
        runs[name] = float(F)
        assert int(status) == 0, text
        assert float(F) < 0.95 * float(F0), text  # the optimisation did something
    Fa, Ff = runs["analytic"], runs["finite-difference"]
    assert abs(Fa - Ff) <= 1e-9 * abs(Ff), text
    assert float(_one(r"max \|Δy\| = " + NUM + " rad", text)) < 1e-4, text

    resid, miss = _one(rf"closure residual {NUM} m, end-effector to place point {NUM} m", text)
    assert float(resid) < 1e-9, text
    assert float(miss) < 1e-9, text
    assert "checks: all passed" in text, text

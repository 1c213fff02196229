"""Every ``ld.load`` option reaches the command line: ``--loops`` (issue 39) and
``--load-option KEY=VALUE`` (issue 42) on info, simulate, convert and view; convert also
takes catalog names."""

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import loopdyn as ld
from loopdyn.cli import app

runner = CliRunner()
LEGS = Path(__file__).parent / "data" / "legs"
ENV = {"COLUMNS": "200"}


def test_info_reads_the_loops_beside_a_urdf():
    urdf, yaml = LEGS / "digit_leg.urdf", LEGS / "digit_leg.yaml"
    plain = runner.invoke(app, ["info", str(urdf)], env=ENV)
    assert plain.exit_code == 0, plain.output
    assert "loops (closures)" not in plain.output  # the URDF alone is a tree
    looped = runner.invoke(app, ["info", str(urdf), "--loops", str(yaml)], env=ENV)
    assert looped.exit_code == 0, looped.output
    assert "loops (closures)" in looped.output
    model = ld.load(urdf, loops=yaml)
    assert f"closure rows m = {model.m}" in looped.output


def test_simulate_and_convert_take_the_loops_and_load_options(tmp_path):
    urdf, yaml = LEGS / "cassie_leg.urdf", LEGS / "cassie_leg.yaml"
    out = tmp_path / "leg.toml"
    res = runner.invoke(app, ["convert", str(urdf), str(out), "--loops", str(yaml)], env=ENV)
    assert res.exit_code == 0, res.output
    back = ld.load(out)
    ref = ld.load(urdf, loops=yaml)
    assert back.m == ref.m and back.closure_kinds == ref.closure_kinds
    np.testing.assert_allclose(back.q0, ref.q0, atol=1e-12)
    csv = tmp_path / "t.csv"
    res = runner.invoke(
        app,
        ["simulate", str(urdf), "--loops", str(yaml), "-L", "floating_base=false",
         "--t-end", "0.02", "--points", "3", "--out", str(csv), "-q"],
        env=ENV,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert csv.is_file()


def test_convert_takes_a_catalog_name(tmp_path):
    out = tmp_path / "fb.toml"
    res = runner.invoke(app, ["convert", "four_bar", str(out)], env=ENV)
    assert res.exit_code == 0, res.output
    np.testing.assert_allclose(ld.load(out).q0, ld.examples.four_bar().q0, atol=1e-14)


def test_a_load_option_changes_what_is_loaded():
    urdf = LEGS / "cassie_leg.urdf"
    base = runner.invoke(app, ["info", str(urdf)], env=ENV)
    floating = runner.invoke(app, ["info", str(urdf), "-L", "floating_base=true"], env=ENV)
    assert base.exit_code == 0 and floating.exit_code == 0, floating.output
    nv = ld.load(urdf).nv
    assert f"nv = {nv}," in base.output and f"nv = {nv + 6}," in floating.output


@pytest.mark.parametrize(
    "args, words",
    [
        (["info", str(LEGS / "cassie_leg.urdf"), "-L", "nope=1"], "unknown key 'nope'"),
        (["info", str(LEGS / "cassie_leg.urdf"), "-L", "floating_base"], "KEY=VALUE"),
        (["info", str(LEGS / "cassie_leg.urdf"), "-L", "floating_base=maybe"], "true or false"),
        (["info", "four_bar", "--loops", str(LEGS / "cassie_leg.yaml")], "model file"),
        (["simulate", "four_bar", "-L", "planar=true"], "model file"),
        (["info", str(LEGS / "cassie_leg.urdf"), "--loops", "/nonexistent/x.yaml"], "x.yaml"),
    ],
)
def test_bad_load_options_are_one_line_exit_2(args, words):
    res = runner.invoke(app, args, env=ENV)
    assert res.exit_code == 2, res.output
    assert words in res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1, res.output

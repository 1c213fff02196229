"""Bad inputs across the public API and the CLI: a clear error naming the culprit (issue 11).

Required behaviour, asserted case by case:

- Python API: a ``ld.LoopdynError`` subclass, or a ``ValueError`` / ``TypeError`` (an
  ``OSError`` for files), raised within a few seconds, whose message names the culprit
  (the argument, parameter, joint, ...); never a silent NaN, a wrapped index, a hang
  or an unbounded allocation.
- CLI: exit code 2, exactly one line on stderr naming the culprit, no traceback.
  Usage errors caught by the argument parser itself (a non-number where a number is
  expected) may print the parser's usage block: exit 2, the option named, no
  traceback.

Each case records in ``today`` what the code did when issue 11 was filed (None: it
already complied); the ids in ``OPEN`` still fail and are marked
``xfail(strict=True)``, so each flips visibly when fixed.  ``python
tests/test_bad_inputs.py`` prints the table of what every case did then and does
now (named loopdyn error / useful generic error / confusing / silent / hang).
"""

import re
import signal
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache

import numpy as np
import pytest
from typer.testing import CliRunner

import loopdyn as ld
from loopdyn.cli import app

NAN, INF = float("nan"), float("inf")
LIMIT_S = 2  # after the warm-up, a validation error comes at once; longer: it never stops


class _Hang(BaseException):
    """Raised by the alarm: the call did not return within LIMIT_S (BaseException, so
    that no ``except Exception`` inside the library swallows it)."""


@contextmanager
def time_limit(seconds=LIMIT_S):
    def handler(signum, frame):
        raise _Hang(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@cache
def fb():
    return ld.examples.four_bar()


@cache
def warm():
    """Load the compiled kernels once (a cold numba cache can take seconds), so that
    the time limit measures the call, not the compiler."""
    m = fb()
    ld.simulate(m, t_end=1e-3, t_eval=2)
    ld.integrate(m, m.q0, np.zeros(m.nv), 0.1)
    ld.complete_velocity(m, m.q0, np.ones(m.nv))
    z = np.zeros(m.nv)
    ld.aba(m, m.q0, z, z), ld.rnea(m, m.q0, z, z), ld.crba(m, m.q0)
    a = ld.forward_dynamics(m, m.q0, z).qdd
    ld.inverse_dynamics(m, m.q0, z, a), ld.inverse_dynamics(m, m.q0, z, a, method="denoc")
    return True


def _state():
    m = fb()
    return np.array(m.q0), ld.complete_velocity(m, m.q0, [1.0, 0.0, 0.0]), np.zeros(m.nv)


def _with(x, i, value, dtype=float):
    x = np.array(x, dtype=dtype)
    x[i] = value
    return x


def _builder(**body):
    """A one-body builder with ``body`` overriding add_body's keywords, then build()."""
    b = ld.ModelBuilder("bad")
    kw = dict(mass=1.0, inertia=(0.1, 0.1, 0.1))
    kw.update(body)
    joint = kw.pop("joint", ld.Revolute("z"))
    b.add_body("link", "ground", joint, **kw)
    return b.build()


def _frame_rpy_nan():
    b = ld.ModelBuilder("bad")
    b.add_body("link", "ground", ld.Revolute("z"))
    b.add_frame("f", "link", rpy=(0.0, NAN, 0.0))
    return b.build()


def _planar_ball():
    b = ld.ModelBuilder("bad", planar=True)
    b.add_body("link", "ground", ld.Revolute("z"))
    b.add_frame("f", "link")
    b.add_frame("g", "ground")
    b.add_closure("c", "f", "g", "ball")
    return b.build()


def _q0_nan():
    b = ld.ModelBuilder("bad")
    b.add_body("link", "ground", ld.Revolute("z"))
    b.set_q0([NAN])
    return b.build()


def _fd(q=None, v=None, tau=None, **kw):
    q0, v0, t0 = _state()
    q, v, tau = (q0 if q is None else q), (v0 if v is None else v), (t0 if tau is None else tau)
    return ld.forward_dynamics(fb(), q, v, tau, **kw)


def _inverse(**kw):
    m = fb()
    q, v, _ = _state()
    qdd = ld.forward_dynamics(m, q, v, np.zeros(m.nv)).qdd
    qdd = qdd + kw.pop("extra", 0.0)
    return ld.inverse_dynamics(m, kw.pop("q", q), kw.pop("v", v), qdd, **kw)


def _sim(**kw):
    kw.setdefault("t_end", 0.01)
    return ld.simulate(fb(), **kw)


@dataclass(frozen=True)
class Case:
    """``call`` must raise one of ``kinds`` whose message matches ``culprit`` (regex,
    case-insensitive) and not ``vague`` (a message that lists every suspect names none);
    ``today``: what the current code does (None when it already complies)."""

    id: str
    call: object
    culprit: str
    today: str | None = None
    kinds: tuple = (ld.LoopdynError, ValueError, TypeError)
    vague: str | None = None


# simulate's arguments are checked before it starts: a SimulationError "stopped at
# t = 0" that carries scipy's message is not that
ARG = (ValueError, TypeError)


QVT = r"q, v,? or tau"  # today's message for any non-finite state: names no culprit
API = [
    # forward dynamics and the tree algorithms
    Case("fd-q-nan", lambda: _fd(q=_with(fb().q0, 1, NAN)), r"\bq\b", "confusing", vague=QVT),
    Case("fd-v-inf", lambda: _fd(v=[INF, 0, 0]), r"\bv\b", "confusing", vague=QVT),
    Case("fd-tau-nan", lambda: _fd(tau=[0, NAN, 0]), r"\btau\b|τ", "confusing", vague=QVT),
    Case("fd-q-complex", lambda: _fd(q=np.array(fb().q0) + 1e-3j), r"\bq\b|complex"),
    Case("fd-tau-complex", lambda: _fd(tau=[1j, 0, 0]), r"\btau\b|complex"),
    Case("fd-q-short", lambda: _fd(q=fb().q0[:2]), r"\bq\b"),
    Case("fd-v-3x3", lambda: _fd(v=np.eye(3)), r"\bv\b"),
    Case("fd-q-string", lambda: _fd(q="abc"), r"\bq\b"),
    Case("fd-q-none", lambda: ld.forward_dynamics(fb(), None, *_state()[1:]), r"\bq\b"),
    Case("fd-method-unknown", lambda: _fd(method="nosuch"), r"nosuch"),
    Case("fd-foreign-data", lambda: _fd(data=ld.examples.five_bar().create_data()), r"data"),
    Case("aba-q-nan", lambda: ld.aba(fb(), [NAN, 0, 0], [0, 0, 0], [0, 0, 0]), r"\bq\b"),
    Case("rnea-a-short", lambda: ld.rnea(fb(), fb().q0, [0, 0, 0], [0, 0]), r"\ba\b|qdd"),
    Case("crba-q-inf", lambda: ld.crba(fb(), [INF, 0, 0]), r"\bq\b"),
    # configuration space
    Case(
        "integrate-dt-nan", lambda: ld.integrate(fb(), fb().q0, [1, 0, 0], NAN), r"\bdt\b", "silent"
    ),
    Case(
        "integrate-dt-inf", lambda: ld.integrate(fb(), fb().q0, [1, 0, 0], INF), r"\bdt\b", "silent"
    ),
    Case(
        "integrate-dt-text",
        lambda: ld.integrate(fb(), fb().q0, [1, 0, 0], "abc"),
        r"\bdt\b",
        "confusing",
    ),
    Case(
        "integrate-v-nan", lambda: ld.integrate(fb(), fb().q0, [NAN, 0, 0], 0.1), r"\bv\b", "silent"
    ),
    # assembly and velocities
    Case("assemble-guess-nan", lambda: ld.assemble(fb(), [NAN, 0, 0]), r"\bq|guess"),
    Case(
        "assemble-tol-negative", lambda: ld.assemble(fb(), fb().q0, tol=-1), r"\btol\b", "confusing"
    ),
    Case("assemble-tol-nan", lambda: ld.assemble(fb(), fb().q0, tol=NAN), r"\btol\b", "confusing"),
    Case(
        "assemble-max-iter-negative",
        lambda: ld.assemble(fb(), [0.5, 0, 0], max_iter=-1),
        r"max_iter",
        "confusing",
    ),
    Case("assemble-fixed-9", lambda: ld.assemble(fb(), fb().q0, fixed=[9]), r"fixed"),
    Case("assemble-fixed-minus-1", lambda: ld.assemble(fb(), fb().q0, fixed=[-1]), r"fixed"),
    Case(
        "complete-velocity-guess-nan",
        lambda: ld.complete_velocity(fb(), fb().q0, [NAN, 0, 0]),
        r"\bv",
        "silent",
    ),
    Case(
        "complete-velocity-q-nan",
        lambda: ld.complete_velocity(fb(), [NAN, 0, 0], [1, 0, 0]),
        r"\bq\b",
    ),
    Case(
        "complete-velocity-fixed-7",
        lambda: ld.complete_velocity(fb(), fb().q0, [1, 0, 0], fixed=[7]),
        r"fixed",
    ),
    # inverse dynamics
    Case(
        "inverse-violates-closure",
        lambda: _inverse(extra=np.array([0.0, 5.0, 0.0])),
        r"closure|constraint",
        "silent",
        kinds=(ld.ActuationError,),
    ),
    Case(
        "inverse-v-violates-closure",
        lambda: _inverse(v=np.array([1.0, 0.0, 0.0])),
        r"closure|constraint|veloc",
        "silent",
        kinds=(ld.ActuationError,),
    ),
    Case("inverse-actuated-minus-1", lambda: _inverse(actuated=[-1]), r"actuated", "silent"),
    Case("inverse-actuated-9", lambda: _inverse(actuated=[9]), r"actuated", "confusing"),
    Case("inverse-tol-negative", lambda: _inverse(tol=-1.0), r"\btol\b", "confusing"),
    # the compiled solves take the inputs as given; what they refuse the checked path names
    Case("inverse-qdd-nan", lambda: _inverse(extra=np.array([0.0, NAN, 0.0])), r"\bqdd\b"),
    Case("inverse-tol-nan", lambda: _inverse(tol=NAN), r"\btol\b"),
    Case("inverse-closure-tol-zero", lambda: _inverse(closure_tol=0.0), r"closure_tol"),
    Case("inverse-v-short", lambda: _inverse(v=[0.0, 0.0]), r"\bv\b"),
    Case(
        "inverse-denoc-qdd-nan",
        lambda: _inverse(extra=np.array([0.0, NAN, 0.0]), method="denoc"),
        r"\bqdd\b",
    ),
    Case("inverse-denoc-v-short", lambda: _inverse(v=[0.0, 0.0], method="denoc"), r"\bv\b"),
    Case("inverse-denoc-q-text", lambda: _inverse(q="abc", method="denoc"), r"\bq\b"),
    # the builder
    Case("body-rpy-nan", lambda: _builder(rpy=(0, NAN, 0)), r"rpy", "silent"),
    Case("frame-rpy-nan", _frame_rpy_nan, r"rpy", "silent"),
    Case("body-xyz-nan", lambda: _builder(xyz=(0, NAN, 0)), r"xyz"),
    Case("body-mass-negative", lambda: _builder(mass=-1.0), r"mass"),
    Case("body-mass-text", lambda: _builder(mass="heavy"), r"mass"),
    Case("body-inertia-not-pd", lambda: _builder(inertia=(1.0, -1.0, 1.0)), r"inertia"),
    Case("body-rotation-not-orthonormal", lambda: _builder(rotation=np.ones((3, 3))), r"rotation"),
    Case("joint-zero-axis", lambda: _builder(joint=ld.Revolute((0, 0, 0))), r"axis"),
    Case("joint-unknown-axis", lambda: _builder(joint=ld.Revolute("w")), r"axis"),
    Case("joint-as-text", lambda: _builder(joint="revolute"), r"joint"),
    Case("joint-universal-parallel", lambda: _builder(joint=ld.Universal("x", "x")), r"parallel"),
    Case("gravity-nan", lambda: ld.ModelBuilder("bad", gravity=(0, 0, NAN)), r"gravity"),
    Case("planar-ball-closure", _planar_ball, r"ball|planar"),
    Case("q0-nan", _q0_nan, r"q0", "silent"),
    # simulation
    Case("simulate-t-end-inf", lambda: _sim(t_end=INF), r"t_end", "hang", ARG),
    Case("simulate-t-end-nan", lambda: _sim(t_end=NAN), r"t_end", None, ARG),
    Case("simulate-t-eval-1e8", lambda: _sim(t_end=1.0, t_eval=10**8), r"t_eval", "hang", ARG),
    Case("simulate-t-eval-decreasing", lambda: _sim(t_eval=[0.01, 0.005]), r"t_eval", None, ARG),
    Case("simulate-rtol-negative", lambda: _sim(rtol=-1.0), r"rtol", "silent", ARG),
    Case("simulate-rtol-nan", lambda: _sim(rtol=NAN), r"rtol", "confusing", ARG),
    Case("simulate-atol-negative", lambda: _sim(atol=-1.0), r"atol", "confusing", ARG),
    Case(
        "simulate-baumgarte-negative",
        lambda: _sim(stabilization="baumgarte", baumgarte=(-1.0, -1.0)),
        r"baumgarte|gain",
        "silent",
        ARG,
    ),
    Case("simulate-rk4-dt-nan", lambda: _sim(integrator="RK4", dt=NAN), r"\bdt\b", None, ARG),
    Case("simulate-rk4-dt-inf", lambda: _sim(integrator="RK4", dt=INF), r"\bdt\b", "silent", ARG),
    Case("simulate-max-step-negative", lambda: _sim(max_step=-1.0), r"max_step", "confusing", ARG),
    Case(
        "simulate-v0-1e200",
        lambda: _sim(v0=[1e200, 0, 0]),
        r"v0|velocit",
        "confusing",
        vague=r"singular",
    ),
    Case(
        "simulate-constraint-tol-negative",
        lambda: _sim(constraint_tol=-1.0),
        r"constraint_tol",
        "confusing",
        ARG,
    ),
    Case(
        "simulate-tau-wrong-shape", lambda: _sim(tau=lambda t, q, v: np.zeros(5)), r"tau", None, ARG
    ),
    Case("simulate-method-unknown", lambda: _sim(method="nosuch"), r"nosuch", None, ARG),
    # catalog, lookup, files
    Case("examples-unknown", lambda: ld.examples.get("nosuch"), r"nosuch"),
    Case("examples-theta1-nan", lambda: ld.examples.four_bar(theta1=NAN), r"theta1", "confusing"),
    Case("examples-unknown-parameter", lambda: ld.examples.get("four_bar", L=2.5), r"\bL\b"),
    Case("frame-unknown", lambda: ld.frame_placement(fb(), fb().q0, "nosuch"), r"nosuch"),
    Case(
        "constraint-rank-tol-negative",
        lambda: ld.constraint_rank(fb(), fb().q0, tol=-1.0),
        r"\btol\b",
        "silent",
    ),
    Case(
        "trajectory-load-missing",
        lambda: ld.Trajectory.load("/no/such/dir/x.npz"),
        r"x\.npz",
        kinds=(ld.LoopdynError, ValueError, OSError),
    ),
]


def classify(case):
    """What ``case.call`` does now: 'named loopdyn error', 'useful generic error',
    'confusing' (an error that does not name the culprit, or of another type),
    'silent' (it returns) or 'hang' (no answer within LIMIT_S)."""
    warm()
    try:
        with time_limit():
            case.call()
    except _Hang:
        return "hang", ""
    except Exception as e:  # classified
        msg = f"{type(e).__name__}: {e}"
        if _names(case, str(e)) and isinstance(e, case.kinds):
            if isinstance(e, ld.LoopdynError):
                return "named loopdyn error", msg
            return "useful generic error", msg
        return "confusing", msg
    return "silent", ""


def _names(case, message):
    if case.vague and re.search(case.vague, message, re.I):
        return False
    return re.search(case.culprit, message, re.I) is not None


# cases that still fail (their issue-11 fix has not landed)
OPEN = set()


def _param(case, today_ok=None):
    if case.id not in OPEN:
        return pytest.param(case, id=case.id)
    mark = pytest.mark.xfail(strict=True, reason=f"issue 11: {case.today} today")
    return pytest.param(case, id=case.id, marks=mark)


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("case", [_param(c) for c in API])
def test_bad_api_input_raises_an_error_naming_the_culprit(case):
    warm()
    try:
        with time_limit():
            case.call()
    except _Hang:
        pytest.fail(f"{case.id}: no answer within {LIMIT_S} s")
    except case.kinds as e:
        assert _names(case, str(e)), f"{case.id}: {type(e).__name__}: {e}"
        return
    pytest.fail(f"{case.id}: no error")


# --------------------------------------------------------------------------- the CLI
runner = CliRunner()
ENV = {"COLUMNS": "2000"}  # no wrapping by the console: "one line" is the message's own


@dataclass(frozen=True)
class CliCase:
    """``args`` must exit 2 with one stderr line matching ``culprit`` and no traceback
    (``usage``: a parser usage error, several lines allowed); ``today`` as in Case."""

    id: str
    args: tuple
    culprit: str
    today: str | None = None
    usage: bool = False


SIM = ("simulate", "four_bar", "--t-end", "0.01", "--points", "3", "-q")
CLI = [
    CliCase("bench-unknown-model", ("bench", "nosuch"), r"nosuch", "traceback"),
    CliCase(
        "bench-param-not-a-number",
        ("bench", "four_bar", "-p", "theta1=abc"),
        r"theta1",
        "traceback",
    ),
    CliCase("bench-unknown-method", ("bench", "four_bar", "-m", "nosuch"), r"nosuch", usage=True),
    CliCase("simulate-unknown-model", ("simulate", "nosuch"), r"nosuch"),
    CliCase("simulate-param-not-a-number", (*SIM, "-p", "theta1=abc"), r"theta1", "confusing"),
    CliCase(
        "simulate-unknown-parameter",
        (*SIM, "-p", "L=2.5"),
        r"\bL\b.*theta1|theta1.*\bL\b",
        "confusing",
    ),
    CliCase("simulate-param-without-value", (*SIM, "-p", "theta1"), r"theta1|--param", usage=True),
    CliCase(
        "simulate-unwritable-out", (*SIM, "--out", "AFILE/traj.csv"), r"traj.csv|--out", "traceback"
    ),
    CliCase(
        "simulate-plot-unknown-format",
        (*SIM, "--plot", "PLOTDIR/x.xyz"),
        r"xyz|--plot",
        "traceback",
    ),
    CliCase(
        "simulate-t-end-inf", ("simulate", "four_bar", "--t-end", "inf", "-q"), r"t.end", "hang"
    ),
    CliCase("simulate-t-end-negative", ("simulate", "four_bar", "--t-end", "-1", "-q"), r"t.end"),
    CliCase(
        "simulate-t-end-text", ("simulate", "four_bar", "--t-end", "abc"), r"t-end", usage=True
    ),
    CliCase(
        "simulate-points-1e8",
        ("simulate", "four_bar", "--t-end", "1", "--points", "100000000", "-q"),
        r"points|t_eval",
        "hang",
    ),
    CliCase("simulate-rtol-negative", (*SIM, "--rtol", "-1"), r"rtol", "silent"),
    CliCase("simulate-unknown-method", (*SIM, "--method", "nosuch"), r"nosuch"),
    CliCase("simulate-unknown-integrator", (*SIM, "--integrator", "nosuch"), r"nosuch"),
    CliCase("simulate-q0-wrong-length", (*SIM, "--q0", "1,2"), r"q0|\bq\b"),
    CliCase("simulate-tau-not-numbers", (*SIM, "--tau", "abc"), r"tau", usage=True),
    CliCase(
        "simulate-independent-out-of-range",
        (*SIM, "--stabilization", "partitioning", "--independent", "9"),
        r"independent",
    ),
]


def _run_cli(args, tmp):
    """Invoke the CLI; PLOTDIR in ``args`` is the folder ``tmp``, AFILE a regular file
    in it (a path below a file cannot be written, even by root)."""
    warm()
    afile = tmp / "a_file"
    afile.write_text("")
    args = [a.replace("PLOTDIR", str(tmp)).replace("AFILE", str(afile)) for a in args]
    with time_limit():
        return runner.invoke(app, args, env=ENV)


def classify_cli(case):
    """What the CLI does now with ``case.args`` (as ``classify``), plus its stderr."""
    import tempfile
    from pathlib import Path

    try:
        with tempfile.TemporaryDirectory() as tmp:
            r = _run_cli(case.args, Path(tmp))
    except _Hang:
        return "hang", ""
    err = r.stderr.strip()
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        return "traceback", f"{type(r.exception).__name__}: {r.exception}"
    if r.exit_code == 0:
        return "silent", ""
    lines = err.splitlines()
    named = re.search(case.culprit, err, re.I) is not None
    if r.exit_code == 2 and named and (len(lines) == 1 or case.usage):
        return "named loopdyn error", err
    return "confusing", f"exit {r.exit_code}: {err}"


@pytest.mark.parametrize("case", [_param(c) for c in CLI])
def test_bad_cli_input_exits_2_with_one_line_naming_the_culprit(case, tmp_path):
    try:
        r = _run_cli(case.args, tmp_path)
    except _Hang:
        pytest.fail(f"{case.id}: no answer within {LIMIT_S} s")
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in r.output
    assert r.exit_code == 2, r.output
    err = r.stderr.strip()
    assert re.search(case.culprit, err, re.I), err
    if not case.usage:
        assert len(err.splitlines()) == 1, err


def test_an_angle_without_unit_is_degrees_or_rejected(tmp_path):
    """``-p theta1=90``: either read as 90° (the same run as ``theta1=90deg``) or
    rejected with exit 2 and one line naming theta1 (issue 11 lets the lead choose)."""
    out, ref = tmp_path / "a.csv", tmp_path / "b.csv"
    r = runner.invoke(app, [*SIM, "-p", "theta1=90", "--out", str(out)], env=ENV)
    if r.exit_code == 2:
        err = r.stderr.strip()
        assert len(err.splitlines()) == 1 and "theta1" in err, err
        return
    assert r.exit_code == 0, r.output
    r2 = runner.invoke(app, [*SIM, "-p", "theta1=90deg", "--out", str(ref)], env=ENV)
    assert r2.exit_code == 0, r2.output
    a = np.loadtxt(out, delimiter=",", skiprows=1)
    b = np.loadtxt(ref, delimiter=",", skiprows=1)
    np.testing.assert_allclose(a, b)


def survey():
    """Print what every case does now (the before/after table of issue 11)."""
    import warnings

    warnings.simplefilter("ignore")
    rows = [(c.id, c.today, *classify(c)) for c in API]
    rows += [(f"cli {c.id}", c.today, *classify_cli(c)) for c in CLI]
    width = max(len(r[0]) for r in rows)
    print(f"{'input':{width}s}  {'before (issue 11)':22s}  {'now':22s}  message")
    for name, before, kind, msg in rows:
        first = msg.splitlines()[0][:90] if msg else ""
        print(f"{name:{width}s}  {before or 'complied':22s}  {kind:22s}  {first}")
    for label, col in (("before", 1), ("now", 2)):
        counts = {}
        for r in rows:
            k = r[col] or "complied"
            counts[k] = counts.get(k, 0) + 1
        print(
            f"{label}: {len(rows)} inputs: "
            + ", ".join(f"{k} {n}" for k, n in sorted(counts.items()))
        )


if __name__ == "__main__":
    sys.exit(survey())

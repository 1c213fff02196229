"""Parameter sweeps on Dask: ``ld.sweep(model, params, run=...)``.

    df = ld.sweep("four_bar", {"theta1": np.deg2rad(np.linspace(30, 90, 20)),
                               "tau": np.linspace(-5, 5, 50)},
                  run="simulate", t_end=5, store="results.parquet")

``params`` is a grid (dict name -> values: their cartesian product, the first name
varying slowest) or a table (a pandas DataFrame or a list of dicts: one case per row).
Case ``i`` is row ``i`` of that table.  A name the model factory takes (for a catalog
model: ``ld.examples.parameters(name)``) sets the geometry; the others are the run's
(see ``RUNS``).  ``run`` is a built-in analysis by name or a picklable callable
``run(model, case) -> dict`` of scalar outcomes (``case``: the case's parameters,
``options`` given to ``sweep`` are passed as keyword arguments).

Execution: the cases are chunked into tasks of ``chunk`` cases (the model is built once
per task and geometry) and run on a Dask cluster: ``client`` (a
``distributed.Client`` or a scheduler address ``"tcp://host:8786"``), or else an embedded
``LocalCluster`` of ``n_workers`` processes (default one per core, one thread each);
``n_workers=0`` runs them in this process, without Dask.  Each worker loads the compiled
kernels once when it starts (a worker plugin), so a case's ``wall_time`` is its run.

Results: a pandas DataFrame, one row per case, sorted by ``case``: the case id, its
parameters, the run's outcomes, ``wall_time`` (s, the run's call; the model build is not
counted) and ``error`` (``"Type: message"`` if the case raised, else None; its outcomes
are then missing).  A case that raises is recorded, never fatal.

Store (``store=``, a directory, e.g. ``results.parquet``): ``_manifest.json`` (model,
run, options), ``_cases.parquet`` (the case table) and one ``part-*.parquet`` per
finished task, written by the client as each task completes (to a temporary name, then
renamed: a part is complete or absent).  ``resume=True`` reads the stored parts and
runs only the missing cases, so a sweep killed half-way finishes with every case stored
once; ``read_sweep(path)`` returns the table.  The files starting with ``_`` are
ignored by ``pandas.read_parquet(path)``.  A worker that dies has its tasks re-run by
Dask (the client stores a task's result once, when its future completes); a task that
cannot be run at all (Dask's ``KilledWorker`` after repeated worker deaths) stores
nothing and ``sweep`` raises a ``LoopdynError`` after storing all the others:
``resume=True`` runs its cases again.
"""

import inspect
import itertools
import json
import logging
import math
import os
import time
import uuid
from pathlib import Path

import numpy as np

from loopdyn.errors import LoopdynError, ModelError

RESERVED = ("case", "error", "wall_time")
# cases of a grid (``max_cases``, default): its case table takes ~300 bytes a case in
# memory before any case runs (measured: 10⁶ cases, 290 MB, 11-17 s to build), and a
# grid of a few START:STOP:NUM ranges multiplies quickly
MAX_CASES = 1_000_000
_CASE_BYTES = 300
_MANIFEST, _CASES = "_manifest.json", "_cases.parquet"
_INSTALL = 'the sweeps need Dask, pandas and pyarrow: pip install "loopdyn[sweep]"'


def _need(module):
    """Import an optional dependency, or say how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise LoopdynError(f"{_INSTALL} ({module} is missing)") from None


# ------------------------------------------------------------------ built-in runs
def _actuated_vector(model, case, key, what):
    """An nv vector from case keys ``key`` (every actuated coordinate) and ``key_<k>``
    (the k-th actuated coordinate); None when the case has neither."""
    hit = [k for k in case if k == key or k.startswith(key + "_")]
    if not hit:
        return None
    x = np.zeros(model.nv)
    if key in case:
        x[model.actuated] = float(case[key])
    for k in hit:
        if k == key:
            continue
        i = k[len(key) + 1 :]
        if not i.isdigit() or int(i) >= model.actuated.size:
            raise ModelError(
                f"{model.name}: case parameter {k!r}: {what} of actuated coordinate k is "
                f"{key}_k with k in 0..{model.actuated.size - 1}"
            )
        x[model.actuated[int(i)]] = float(case[k])
    return x


def _simulate_options(options, case):
    """``ld.simulate`` keyword arguments: the sweep's options overridden by the case's."""
    kw = {"t_end": 1.0}  # integrator: ld.simulate's default (DOP853, compiled)
    kw.update(options)
    kw.update({k: case[k] for k in case if k in _SIMULATE_KEYS})
    return kw


_SIMULATE_KEYS = (
    "t_end", "method", "integrator", "stabilization", "rtol", "atol", "dt", "max_step",
    "t_eval", "baumgarte", "constraint_tol", "singularities", "max_steps", "compiled",
    "max_outputs",
)  # fmt: skip


def run_simulate(model, case, **options):
    """Built-in run ``"simulate"``: ``ld.simulate`` from ``model.q0`` (velocities from
    case keys ``v0`` / ``v0_<k>`` on the actuated coordinates, made consistent), constant
    actuator forces ``tau`` / ``tau_<k>``; options (and case keys of the same names):
    ``ld.simulate``'s (``t_end``, ``method``, ``integrator`` (default ``ld.simulate``'s,
    DOP853 in the compiled loop), ``rtol``, ...).

    Outcomes: ``status`` ("completed", "singular": a change of mobility stopped it,
    "stopped": another ``SimulationError``), ``t_final`` (s: the time reached, the
    time to singularity when singular), ``steps``, ``nfev``, ``energy_drift`` (J: max over
    the outputs of |E(t) - E(0) - W(t)|, W the work of the constant τ, τ·(q(t) - q(0))),
    ``max_residual`` (max |Φ|), ``max_residual_velocity`` (max |J v|), ``max_abs_lambda``
    (largest closure multiplier), ``max_abs_qdd``.
    """
    import loopdyn as ld

    v0 = _actuated_vector(model, case, "v0", "initial velocity")
    tau = _actuated_vector(model, case, "tau", "constant force")
    kw = _simulate_options(options, case)
    if v0 is not None and model.m:
        v0 = ld.complete_velocity(model, model.q0, v0)
    status = "completed"
    try:
        traj = ld.simulate(model, model.q0, v0, tau=tau, **kw)
    except ld.SimulationSingularityError as e:
        traj, status = e.trajectory, "singular"
    except ld.SimulationError as e:
        traj, status = e.trajectory, "stopped"
    if traj is None or len(traj) == 0:
        return {"status": status, "t_final": 0.0}
    energy = traj.energy - traj.energy[0]
    if tau is not None and np.any(tau):
        if model.nq != model.nv:
            raise ModelError(
                f"{model.name}: the work of τ needs q's chart to be v's (no spherical or free "
                "joints) for the energy drift"
            )
        energy = energy - (traj.q - traj.q[0]) @ tau
    s = traj.summary()
    lam = traj.lam[np.isfinite(traj.lam)]
    return {
        "status": status,
        "t_final": float(traj.t[-1]),
        "steps": s["steps"],
        "nfev": s["nfev"],
        "energy_drift": float(np.max(np.abs(energy))),
        "max_residual": s["max_residual_position"],
        "max_residual_velocity": s["max_residual_velocity"],
        "max_abs_lambda": float(np.max(np.abs(lam))) if lam.size else 0.0,
        "max_abs_qdd": float(np.max(np.abs(traj.qdd))),
    }


def run_forward_dynamics(model, case, n_states=100, seed=0, spread=0.2, method="augmented"):
    """Built-in run ``"forward_dynamics"``: ``ld.forward_dynamics_batch`` over
    ``n_states`` states near ``model.q0``: the actuated coordinates moved by
    uniform(-``spread``, ``spread``) (rad or m) and the closures assembled, actuated
    velocities and forces standard normal (seeded by ``seed`` + the case id).

    Outcomes: ``n_states``, ``n_unassembled`` (perturbed states the closures cannot
    reach), ``n_failed`` (elements with a negative status), ``max_abs_qdd``,
    ``max_abs_lambda``, ``min_quality`` (smallest 1/condition of the solves),
    ``max_rel_error`` (max |q̈ - q̈_augmented| / max |q̈_augmented|: the method against
    the dense oracle; 0 for ``"augmented"``).
    """
    import loopdyn as ld

    rng = np.random.default_rng([int(seed), int(case.get("case", 0))])
    act = model.actuated
    Q, V, T, unassembled = [], [], [], 0
    for _ in range(int(n_states)):
        dq = np.zeros(model.nv)
        dq[act] = rng.uniform(-spread, spread, act.size)
        q = ld.integrate(model, model.q0, dq)  # the actuated coordinates moved
        v = np.zeros(model.nv)
        v[act] = rng.normal(size=act.size)
        tau = np.zeros(model.nv)
        tau[act] = rng.normal(size=act.size)
        try:
            if model.m:
                q = ld.assemble(model, q)
                v = ld.complete_velocity(model, q, v)
        except ld.AssemblyError:
            unassembled += 1
            continue
        Q.append(q), V.append(v), T.append(tau)
    out = {"n_states": int(n_states), "n_unassembled": unassembled}
    if not Q:
        return out | {"n_failed": 0}
    Q, V, T = np.array(Q), np.array(V), np.array(T)
    res = ld.forward_dynamics_batch(model, Q, V, T, method=method, on_error="report")
    ok = res.status >= 0
    out["n_failed"] = int(np.sum(~ok))
    if not ok.any():
        return out
    qdd = res.qdd[ok]
    out["max_abs_qdd"] = float(np.max(np.abs(qdd)))
    out["max_abs_lambda"] = float(np.max(np.abs(res.lam[ok]))) if res.lam is not None else 0.0
    out["min_quality"] = float(np.min(res.status[ok]))
    if method == "augmented":
        out["max_rel_error"] = 0.0
    else:
        ref = ld.forward_dynamics_batch(model, Q[ok], V[ok], T[ok], on_error="report").qdd
        out["max_rel_error"] = float(np.nanmax(np.abs(qdd - ref)) / max(np.abs(ref).max(), 1e-300))
    return out


def run_singularity_map(model, case, tol=1e-8):
    """Built-in run ``"singularity_map"``: the closures at ``model.q0`` (the catalog
    factories assemble q0 from their angle parameters: sweep those).

    Outcomes: ``max_residual`` (max |Φ(q0)|), ``rank`` of J, ``dof`` (nv - rank),
    ``sigma_min`` (J's smallest singular value relative to its largest: 0 where the
    closures lose rank, a constraint singularity), ``sigma_min_passive`` (the same for
    J's passive columns, the non-actuated coordinates: 0 where the actuators cannot
    hold the mechanism, a direct-kinematics singularity), ``status`` ("regular",
    "constraint", "actuation": the relative value below ``tol``).
    """
    import loopdyn as ld

    q = np.array(model.q0)
    out = {"max_residual": float(np.abs(ld.closure_residual(model, q)).max()) if model.m else 0.0}
    if not model.m:
        return out | {"rank": 0, "dof": model.nv, "status": "regular"}
    J = ld.constraint_jacobian(model, q)
    rank = ld.constraint_rank(model, q).rank
    sv = np.linalg.svd(J, compute_uv=False)
    passive = np.setdiff1d(np.arange(model.nv), model.actuated)
    svp = np.linalg.svd(J[:, passive], compute_uv=False) if passive.size else np.zeros(1)
    scale = max(sv[0], 1e-300)
    smin, sminp = float(sv[-1] / scale), float(svp[-1] / scale)
    status = "constraint" if smin < tol else ("actuation" if sminp < tol else "regular")
    return out | {
        "rank": int(rank),
        "dof": int(model.nv - rank),
        "sigma_min": smin,
        "sigma_min_passive": sminp,
        "status": status,
    }


RUNS = {
    "simulate": run_simulate,
    "forward_dynamics": run_forward_dynamics,
    "singularity_map": run_singularity_map,
}
# case keys of each built-in run besides its options (prefixes: key and key_<k>)
_RUN_KEYS = {"simulate": ("v0", "tau"), "forward_dynamics": (), "singularity_map": ()}


# ------------------------------------------------------------------ cases
def grid_too_large(sizes, max_cases, cap="max_cases"):
    """The message refusing a grid of ``sizes`` (parameter name -> number of values) that
    holds more than ``max_cases`` cases, with the memory it would take; None if it fits.
    ``cap``: how the message names the limit (the command line: ``--max-cases``)."""
    n = math.prod(sizes.values())
    if n <= max_cases:
        return None
    b = n * _CASE_BYTES
    size = next(f"{b / u:.3g} {s}" for u, s in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1, "B"))
                if b >= u or u == 1)  # fmt: skip
    grid = " × ".join(f"{k}: {v:,}" for k, v in sizes.items())
    return (
        f"sweep: the grid holds {n:,} cases ({grid}), over the limit of {max_cases:,}: its "
        f"case table alone takes ~{_CASE_BYTES} bytes a case, ~{size}, before any case "
        f"runs; sweep fewer values, or pass a larger {cap}"
    )


def case_table(params, max_cases=MAX_CASES):
    """The case table of ``params`` (grid dict or table): a DataFrame with ``case`` first.
    A grid of more than ``max_cases`` cases is refused (ValueError) before it is built."""
    pd = _need("pandas")
    if isinstance(params, dict):
        if not params:
            raise ValueError("sweep: params is an empty grid")
        names = list(params)
        sizes = {k: 1 if isinstance(params[k], str) else int(np.size(params[k])) for k in names}
        too_large = grid_too_large(sizes, max_cases)
        if too_large:
            raise ValueError(too_large)
        axes = []
        for k in names:
            v = params[k]
            vals = list(np.ravel(np.asarray(v, dtype=object))) if not isinstance(v, str) else [v]
            if not vals:
                raise ValueError(f"sweep: parameter {k!r} has no values")
            axes.append([_scalar(x, k) for x in vals])
        df = pd.DataFrame(list(itertools.product(*axes)), columns=names)
    elif isinstance(params, pd.DataFrame):
        df = params.reset_index(drop=True).copy()
    elif isinstance(params, (list, tuple)) and all(isinstance(r, dict) for r in params):
        df = pd.DataFrame(list(params))
    else:
        raise TypeError(
            "sweep: params must be a grid (dict name -> values), a pandas DataFrame or a list "
            f"of dicts, got {type(params).__name__}"
        )
    if len(df) == 0:
        raise ValueError("sweep: params holds no case")
    for k in df.columns:
        if not isinstance(k, str) or not k:
            raise ValueError(f"sweep: parameter names must be strings, got {k!r}")
        if k in RESERVED:
            raise ValueError(f"sweep: {k!r} is a result column, not a parameter name")
        if df[k].isna().any():
            raise ValueError(f"sweep: parameter {k!r} has missing values")
    df.insert(0, "case", np.arange(len(df), dtype=np.int64))
    return df


def _scalar(x, name):
    if isinstance(x, np.generic):
        x = x.item()
    if not isinstance(x, (int, float, str, bool)):
        raise ValueError(f"sweep: parameter {name!r} values must be numbers or strings, got {x!r}")
    return x


def _factory_keys(model):
    """(factory(**kw) -> Model, the keyword names it takes or None for any)."""
    import loopdyn as ld

    if isinstance(model, str):
        keys = tuple(p.name for p in ld.examples.parameters(model))  # ModelError if unknown
        return model, keys
    if not callable(model):
        raise TypeError(
            f"sweep: model must be a catalog name or a factory callable, got {type(model).__name__}"
        )
    sig = inspect.signature(model)
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return model, None
    return model, tuple(
        n for n, p in sig.parameters.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    )


def _split(columns, factory_keys, run):
    """(model parameter names, run parameter names); unknown names refused for the
    built-in runs (a callable run receives every name)."""
    names = [c for c in columns if c != "case"]
    if factory_keys is None:  # a factory taking **kwargs: what a built-in run does not claim
        run_keys = [n for n in names if isinstance(run, str) and _claimed(n, run)]
        return [n for n in names if n not in run_keys], run_keys
    model_keys = [n for n in names if n in factory_keys]
    rest = [n for n in names if n not in factory_keys]
    if isinstance(run, str):
        bad = [n for n in rest if not _claimed(n, run)]
        if bad:
            known = ", ".join(factory_keys) or "none"
            runs = ", ".join(_RUN_KEYS[run] + (_SIMULATE_KEYS if run == "simulate" else ()))
            raise ModelError(
                f"sweep: unknown parameter {bad[0]!r}: the model's parameters are {known}; "
                f"run {run!r} takes {runs or 'no case parameter'}"
            )
    return model_keys, rest


def _check_options(run, options):
    """Refuse, before any work, an option a built-in run does not take."""
    if not isinstance(run, str):
        return
    if run == "simulate":
        known = _SIMULATE_KEYS
    else:
        known = tuple(inspect.signature(RUNS[run]).parameters)[2:]
    bad = [k for k in options if k not in known]
    if bad:
        raise ValueError(
            f"sweep: run {run!r} has no option {bad[0]!r}; its options: {', '.join(known)}"
        )


def _check_shared_simulate_options(run, options, columns):
    """``run="simulate"``: its options checked as ``ld.simulate`` does (ValueError naming
    the culprit) when no case varies one of them: an invalid option would fail every case."""
    from loopdyn.sim.simulate import check_arguments

    if run != "simulate":
        return
    args = set(inspect.signature(check_arguments).parameters) - {"names"}
    if args & set(columns):
        return  # a case's value decides: a case that fails is recorded as such
    try:
        check_arguments(**{"t_end": 1.0, **{k: v for k, v in options.items() if k in args}})
    except ValueError as e:
        raise ValueError(f"sweep: {e}") from None


def _check_choices(run, options, table):
    """A built-in run's ``method``, ``integrator`` and ``stabilization`` (an option or a
    case column) refused before any case runs when not one of the choices: a ValueError
    listing them (else every case would fail the same way)."""
    from loopdyn.methods.dynamics import METHODS
    from loopdyn.sim.integrators import INTEGRATORS
    from loopdyn.sim.stabilization import STABILIZATIONS

    if not isinstance(run, str) or run == "singularity_map":
        return
    choices = {"method": METHODS}
    if run == "simulate":
        choices |= {"integrator": INTEGRATORS, "stabilization": STABILIZATIONS}
    for key, allowed in choices.items():
        if key in table.columns:
            values = table[key].tolist()
        elif key in options:
            values = [options[key]]
        else:
            continue
        for v in values:
            if v not in allowed:
                raise ValueError(f"sweep: unknown {key} {v!r}; available: {', '.join(allowed)}")


def _claimed(name, run):
    if run == "simulate" and name in _SIMULATE_KEYS:
        return True
    return any(name == k or name.startswith(k + "_") for k in _RUN_KEYS[run])


# ------------------------------------------------------------------ tasks (on the workers)
def _run_chunk(spec, rows):
    """Run the cases ``rows`` (dicts with ``case``) of ``spec`` = (model, run, options,
    model keys); one record per case: case, outcomes, wall_time, error."""
    import loopdyn as ld

    model_spec, run, options, model_keys = spec
    fn = RUNS[run] if isinstance(run, str) else run
    models = {}
    out = []
    for row in rows:
        rec = {"case": int(row["case"])}
        t0 = time.perf_counter()
        try:
            key = tuple(row[k] for k in model_keys)
            if key not in models:
                try:
                    kw = {k: row[k] for k in model_keys}
                    if isinstance(model_spec, str):
                        models[key] = ld.examples.get(model_spec, **kw)
                    else:
                        models[key] = model_spec(**kw)
                except Exception as e:
                    models[key] = e
            model = models[key]
            if isinstance(model, Exception):
                raise model
            case = {k: v for k, v in row.items()}
            t0 = time.perf_counter()
            outcomes = fn(model, case, **options)
            rec.update(_outcomes(outcomes))
            rec["wall_time"] = time.perf_counter() - t0
            rec["error"] = None
        except Exception as e:
            rec["wall_time"] = time.perf_counter() - t0
            rec["error"] = f"{type(e).__name__}: {' '.join(str(e).split())}"
        out.append(rec)
    return out


def _outcomes(d):
    if not isinstance(d, dict):
        raise TypeError(f"the run must return a dict of outcomes, got {type(d).__name__}")
    out = {}
    for k, v in d.items():
        if not isinstance(k, str) or k in RESERVED:
            raise ValueError(f"outcome name {k!r} is not allowed (a string other than {RESERVED})")
        if isinstance(v, np.generic):
            v = v.item()
        if v is not None and not isinstance(v, (int, float, str, bool)):
            raise TypeError(f"outcome {k!r} must be a scalar, got {type(v).__name__}")
        out[k] = v
    return out


def _warm(spec, row):
    """Load the compiled kernels the run uses (numba's cache), once per worker process."""
    import loopdyn as ld

    model_spec, run, options, model_keys = spec
    kw = {k: row[k] for k in model_keys}
    try:
        m = ld.examples.get(model_spec, **kw) if isinstance(model_spec, str) else model_spec(**kw)
        if run == "simulate":
            opts = _simulate_options(options, {}) | {"t_end": 1e-3, "t_eval": 2}
            run_simulate(m, {}, **opts)
        else:
            ld.forward_dynamics(m, m.q0, np.zeros(m.nv), np.zeros(m.nv))
    except Exception:  # the case itself will report what fails
        pass


def _warm_plugin(spec, row):
    from distributed import WorkerPlugin

    class Warm(WorkerPlugin):
        name = "loopdyn-sweep-warm"

        def setup(self, worker):
            _warm(spec, row)

    return Warm()


# ------------------------------------------------------------------ store
def _write_part(path, df):
    pq = _need("pyarrow.parquet")
    pa = _need("pyarrow")
    name = f"part-{int(df['case'].iloc[0]):09d}-{uuid.uuid4().hex[:8]}.parquet"
    tmp = path / f".{name}.tmp"
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), tmp)
    os.replace(tmp, path / name)


def read_sweep(path):
    """The results stored by ``ld.sweep(..., store=path)``: one row per finished case,
    sorted by ``case`` (the same columns as ``sweep``'s result)."""
    pd = _need("pandas")
    pq = _need("pyarrow.parquet")
    path = Path(path)
    if not (path / _MANIFEST).is_file():
        raise LoopdynError(f"{str(path)!r} is not a sweep store (no {_MANIFEST})")
    parts = sorted(path.glob("part-*.parquet"))
    cases = pq.read_table(path / _CASES).to_pandas()
    if not parts:
        return cases.iloc[:0].assign(wall_time=pd.Series(dtype=float), error=pd.Series(dtype=str))
    df = pd.concat([pq.read_table(p).to_pandas() for p in parts], ignore_index=True)
    if df["case"].duplicated().any():
        dup = df.loc[df["case"].duplicated(), "case"].tolist()[:5]
        raise LoopdynError(f"{str(path)!r}: cases {dup} are stored twice (a damaged store)")
    return _order(df.sort_values("case", ignore_index=True), cases.columns)


def _order(df, param_cols):
    """Columns: case, parameters, outcomes (in order of appearance), wall_time, error."""
    first = [c for c in param_cols if c in df.columns]
    last = [c for c in ("wall_time", "error") if c in df.columns]
    mid = [c for c in df.columns if c not in first and c not in last]
    df = df[first + mid + last].copy()
    if "error" in df.columns:  # None where the case ran (not NaN: the column is text)
        df["error"] = df["error"].astype(object).where(df["error"].notna(), None)
    return df


def read_manifest(path):
    """The manifest of the store ``path`` and its case table: (dict, DataFrame)."""
    pq = _need("pyarrow.parquet")
    path = Path(path)
    try:
        manifest = json.loads((path / _MANIFEST).read_text())
    except (OSError, ValueError):
        raise LoopdynError(
            f"{str(path)!r} is not a sweep store (no readable {_MANIFEST})"
        ) from None
    return manifest, pq.read_table(path / _CASES).to_pandas()


def _describe(obj):
    return (
        obj
        if isinstance(obj, str)
        else f"{getattr(obj, '__module__', '?')}." + getattr(obj, "__qualname__", repr(obj))
    )


def _json_options(options):
    try:
        return json.loads(json.dumps(options))
    except (TypeError, ValueError):
        return None


def _units(model, columns, given):
    """Parameter -> unit for the manifest: a catalog model's parameters' units (those
    with a physical unit), then ``given`` (the unit the user gave, e.g. ``deg``)."""
    out = {}
    if isinstance(model, str):
        from loopdyn import examples

        for p in examples.parameters(model):
            if p.name in columns and p.unit not in ("-", "count", "seed", "text", "flag"):
                out[p.name] = p.unit
    for k, v in (given or {}).items():
        if k in columns:
            out[k] = str(v)
    return out


def _open_store(path, table, model, run, options, resume, units=None):
    """Create the store, or check it holds this sweep; the set of stored case ids."""
    pq = _need("pyarrow.parquet")
    pa = _need("pyarrow")
    path = Path(path)
    if path.exists() and any(path.iterdir()):
        if not resume:
            raise LoopdynError(
                f"the sweep store {str(path)!r} exists: resume it (resume=True, --resume) or "
                "give another path"
            )
        manifest, cases = read_manifest(path)
        same = (
            list(cases.columns) == list(table.columns)
            and len(cases) == len(table)
            and all(np.array_equal(cases[c].to_numpy(), table[c].to_numpy()) for c in cases)
        )
        if not same:
            raise LoopdynError(f"{str(path)!r} holds another sweep: a different case table")
        for key, now in (("model", _describe(model)), ("run", _describe(run))):
            if manifest.get(key) != now:
                raise LoopdynError(
                    f"{str(path)!r} holds a sweep of {key} {manifest.get(key)!r}, not {now!r}"
                )
        if manifest.get("options") is not None and manifest["options"] != _json_options(options):
            raise LoopdynError(
                f"{str(path)!r} holds a sweep with options {manifest['options']}, not {options}"
            )
        for tmp in path.glob(".part-*.tmp"):  # a part being written when it was killed
            tmp.unlink()
        return set(read_sweep(path)["case"].tolist())
    if path.exists() and not path.is_dir():
        raise LoopdynError(f"the sweep store {str(path)!r} is a file, not a folder")
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(table, preserve_index=False), path / _CASES)
    manifest = {
        "format": "loopdyn-sweep",
        "version": 1,
        "model": _describe(model),
        "run": _describe(run),
        "options": _json_options(options),
        "cli_resumable": isinstance(model, str) and isinstance(run, str),
        "cases": len(table),
        "units": units or {},
    }
    tmp = path / f".{_MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=1))
    os.replace(tmp, path / _MANIFEST)
    return set()


# ------------------------------------------------------------------ progress
class _Progress:
    """A rich progress bar: cases done, failed, rate (cases/s); nothing if not shown."""

    def __init__(self, total, done, show):
        self.bar = None
        self.done, self.failed, self.t0 = done, 0, time.perf_counter()
        self.new = 0
        if not show:
            return
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(
            TextColumn("sweep"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} cases"),
            TextColumn("[red]{task.fields[failed]} failed"),
            TextColumn("{task.fields[rate]} cases/s"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
        )
        self.task = self.bar.add_task("sweep", total=total, completed=done, failed=0, rate="-")

    def __enter__(self):
        if self.bar is not None:
            self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)
        return False

    def add(self, n, failed):
        self.done += n
        self.new += n
        self.failed += failed
        if self.bar is not None:
            rate = self.new / max(time.perf_counter() - self.t0, 1e-9)
            self.bar.update(self.task, completed=self.done, failed=self.failed, rate=f"{rate:.1f}")


# ------------------------------------------------------------------ the sweep
def sweep(
    model,
    params,
    run="simulate",
    *,
    client=None,
    n_workers=None,
    store=None,
    resume=False,
    chunk=None,
    progress=True,
    max_cases=MAX_CASES,
    units=None,
    **options,
):
    """Run ``run`` on every case of ``params``; a pandas DataFrame, one row per case.

    In: ``model``: a catalog name (``ld.examples.names()``) or a factory
    ``f(**model_parameters) -> Model``.  ``params``: a grid (dict name -> values,
    cartesian product) or a table (DataFrame, list of dicts).  ``run``: ``"simulate"``,
    ``"forward_dynamics"``, ``"singularity_map"`` (``RUNS``; their docstrings list the
    case parameters, options and outcomes) or a picklable ``run(model, case, **options)
    -> dict`` of scalars.  ``client``: a ``distributed.Client`` or a scheduler address;
    None starts a ``LocalCluster`` of ``n_workers`` processes (default: one per core);
    ``n_workers=0`` runs in this process.  ``store``: a directory for the resumable
    Parquet store (None: results only returned); ``resume=True`` continues it.
    ``chunk``: cases per task (default: about 8 tasks per worker, 1 to 32 cases).
    ``progress``: a rich progress bar on stderr.  ``max_cases``: the largest grid
    (default ``MAX_CASES`` = 10⁶ cases; its case table takes ~300 bytes a case before any
    runs), a larger one is refused with the estimate.  ``units``: parameter -> the unit
    its values are shown in (stored values stay SI: ``{"theta1": "deg"}``), kept in the
    store's manifest beside the catalog parameters' units for ``plot_sweep``'s axes.
    ``options``: the run's keyword
    options; ``run="simulate"``'s are checked before any case runs when no case varies
    them (``ValueError``, as ``ld.simulate``).

    Out: DataFrame with ``case``, the parameters, the outcomes, ``wall_time``, ``error``
    (see the module docstring), stored cases from an earlier run included.  Raises
    ``LoopdynError`` if a task could not run at all (its cases are then missing: resume).
    """
    pd = _need("pandas")
    if isinstance(run, str):
        if run not in RUNS:
            raise ValueError(f"sweep: unknown run {run!r}; use {', '.join(RUNS)} or a callable")
    elif not callable(run):
        raise TypeError(f"sweep: run must be a name or a callable, got {type(run).__name__}")
    if isinstance(max_cases, bool) or int(max_cases) != max_cases or max_cases < 1:
        raise ValueError(f"sweep: max_cases must be a positive integer, got {max_cases!r}")
    _check_options(run, options)
    table = case_table(params, max_cases)
    _check_shared_simulate_options(run, options, table.columns)
    _check_choices(run, options, table)
    factory, keys = _factory_keys(model)
    model_keys, _ = _split(table.columns, keys, run)
    if n_workers is not None and (isinstance(n_workers, bool) or int(n_workers) != n_workers or
                                  n_workers < 0):  # fmt: skip
        raise ValueError(f"sweep: n_workers must be a non-negative integer, got {n_workers!r}")
    if chunk is not None and (isinstance(chunk, bool) or int(chunk) != chunk or chunk < 1):
        raise ValueError(f"sweep: chunk must be a positive integer, got {chunk!r}")
    done = set()
    if store is not None:
        store = Path(store)
        shown = _units(model, table.columns, units)
        done = _open_store(store, table, model, run, options, resume, shown)
    todo = table[~table["case"].isin(done)]
    spec = (factory, run, options, model_keys)
    rows = todo.to_dict("records")
    results, lost = [], []

    def finish(records):
        df = pd.DataFrame(records)
        df = (
            todo.set_index("case")
            .loc[df["case"]]
            .reset_index()
            .join(df.drop(columns="case").reset_index(drop=True))
        )
        if store is not None:
            _write_part(store, df)
        results.append(df)
        return int(df["error"].notna().sum())

    with _Progress(len(table), len(done), progress) as bar:
        if rows and n_workers == 0:
            size = chunk or 32
            for i in range(0, len(rows), size):
                recs = _run_chunk(spec, rows[i : i + size])
                bar.add(len(recs), finish(recs))
        elif rows:
            _distributed(spec, rows, client, n_workers, chunk, bar, finish, lost)
    if store is not None:
        out = read_sweep(store)
    elif results:
        out = _order(pd.concat(results, ignore_index=True).sort_values("case"), table.columns)
        out = out.reset_index(drop=True)
    else:
        out = table.assign(wall_time=np.nan, error=None).iloc[:0]
    if lost:
        n = sum(k for k, _ in lost)
        where = f"; the others are stored in {str(store)!r}: resume=True runs them" if store else ""
        raise LoopdynError(f"sweep: {n} cases could not run ({lost[0][1]}){where}")
    return out


def _cores():
    """The number of cores this process may use."""
    if hasattr(os, "sched_getaffinity"):
        return max(len(os.sched_getaffinity(0)), 1)
    return os.cpu_count() or 1


def _distributed(spec, rows, client, n_workers, chunk, bar, finish, lost):
    """Run the chunks on a Dask cluster; ``finish(records)`` as each task completes."""
    _need("dask")
    distributed = _need("distributed")
    own = None
    if client is None:
        n = n_workers or _cores()
        own = distributed.LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",  # any free port: never "8787 is in use"
            silence_logs=logging.ERROR,
        )
        client = distributed.Client(own)
    elif isinstance(client, str):
        client = own = distributed.Client(client)
    try:
        nw = max(len(client.scheduler_info().get("workers", {})), 1)
        size = chunk or int(np.clip(math.ceil(len(rows) / (8 * nw)), 1, 32))
        client.register_plugin(_warm_plugin(spec, rows[0]))
        chunks = [rows[i : i + size] for i in range(0, len(rows), size)]
        futures = client.map(_run_chunk, [spec] * len(chunks), chunks, pure=False)
        sizes = {f.key: len(c) for f, c in zip(futures, chunks, strict=True)}
        for fut in distributed.as_completed(futures):
            if fut.status == "finished":
                recs = fut.result()
                bar.add(len(recs), finish(recs))
            else:
                exc = fut.exception()
                lost.append((sizes[fut.key], f"{type(exc).__name__}: {exc}"))
            fut.release()
    finally:
        if own is not None:
            client.close()
            if own is not client:
                own.close()

"""Exceptions raised by loopdyn.

Every error names the body, joint, frame or closure at fault and says what to do.
"""


class LoopdynError(Exception):
    """Base class of every loopdyn error."""


class ModelError(LoopdynError, ValueError):
    """A model cannot be built: unknown parent, bad inertia, zero axis, cycle, ..."""


class NotAModelError(ModelError, TypeError):
    """Something other than a :class:`loopdyn.Model` was given where a model is expected
    (None, a catalog name, a ``Data``, ...): a ``ModelError`` and a ``TypeError``."""


class AssemblyError(LoopdynError):
    """The loop closures cannot be satisfied from the given guess.

    Raised by ``ld.assemble`` it carries ``info`` (an ``AssemblyInfo``: iterations,
    residual, why it stopped), ``q`` (the best configuration it found) and ``closure``
    (the name of the closure left most open); None where not known.
    """

    def __init__(self, message, *, info=None, q=None, closure=None):
        super().__init__(message)
        self.info = info
        self.q = q
        self.closure = closure


class SingularityError(LoopdynError):
    """A configuration is singular for the requested computation."""


class ActuationError(LoopdynError):
    """The actuators cannot produce the requested closed-loop motion."""


class FallbackWarning(UserWarning):
    """``ld.forward_dynamics`` (or a batch of it) handed a state the asked method could
    not solve to the dense ``augmented`` solve: the answer is exact, but not the asked
    method's own (``res.method`` says which method answered).  Issued once per model and
    method, saying why the method refused; ``fallback=False`` raises a
    :class:`SingularityError` instead."""


class NonUniqueWarning(UserWarning):
    """The actuator forces of ``ld.inverse_dynamics`` (or of some rows of
    ``ld.inverse_dynamics_batch``) are not unique: ``[B Jᵀ] [u; λ] = M q̈ + h`` has
    a null space with a component on u (more actuators than degrees of freedom, or
    actuators dependent at this configuration).  The message names the undetermined
    actuators and closures; the answer returned is the minimum-norm one (least
    |u|² + |λ|²).  Redundant closure rows alone (u unique, λ not) do not warn: the
    result says so (``unique`` False, ``tau_unique`` True)."""


class _StoppedSimulation:
    """Mixin of the exceptions that stop ``ld.simulate`` with what it computed."""

    def __init__(self, message, trajectory=None, t=None, q=None, v=None, condition=None):
        super().__init__(message)
        self.trajectory = trajectory
        self.t = t
        self.q = q
        self.v = v
        self.condition = condition


class SimulationError(_StoppedSimulation, LoopdynError):
    """``ld.simulate`` stopped before ``t_end``.

    Carries what was computed: ``trajectory`` (a :class:`loopdyn.Trajectory` up to
    the stop, ``trajectory.completed`` False), and the last accepted state: time
    ``t``, configuration ``q``, velocity ``v`` and the ``condition`` number of the
    constraint solve there (``inf`` when singular, None if unknown).
    """


class SimulationSingularityError(SimulationError, SingularityError):
    """``ld.simulate`` reached a singular configuration it cannot pass.

    Both a :class:`SingularityError` and a :class:`SimulationError`: catch either;
    it carries the partial trajectory, ``t``, ``q``, ``v`` and ``condition``.
    """


class SimulationInterrupted(_StoppedSimulation, KeyboardInterrupt):
    """``ld.simulate`` was interrupted (Ctrl-C): still a ``KeyboardInterrupt``, so a
    script stops, but carrying what was computed, like :class:`SimulationError`:
    ``trajectory`` (up to the last accepted step), ``t``, ``q``, ``v``, ``condition``."""


class BatchInterrupted(KeyboardInterrupt):
    """A batched call (``ld.forward_dynamics_batch``, ``aba_batch``, ``rnea_batch``,
    ``inverse_dynamics_batch``) was interrupted (Ctrl-C): still a ``KeyboardInterrupt``,
    carrying what was computed, ``result`` (a ``BatchResult`` whose undone elements have
    the status ``loopdyn.batch.INTERRUPTED`` and NaN rows)."""

    def __init__(self, message, result=None):
        super().__init__(message)
        self.result = result

"""Exceptions raised by loopdyn.

Every error names the body, joint, frame or closure at fault and says what to do.
"""


class LoopdynError(Exception):
    """Base class of every loopdyn error."""


class ModelError(LoopdynError, ValueError):
    """A model cannot be built: unknown parent, bad inertia, zero axis, cycle, ..."""


class AssemblyError(LoopdynError):
    """The loop closures cannot be satisfied from the given guess."""


class SingularityError(LoopdynError):
    """A configuration is singular for the requested computation."""


class ActuationError(LoopdynError):
    """The actuators cannot produce the requested closed-loop motion."""

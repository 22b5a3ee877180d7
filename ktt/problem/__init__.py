"""The problem directory format: problem.yaml, inputs.yaml and a reference.

It lives in ``ktt`` because the tuner must read problems on a bare GPU box without the
application; ``cacao_tui.problem`` builds its user-facing checks on top of it.
"""

from ktt.problem.errors import ProblemError
from ktt.problem.loader import load_problem
from ktt.problem.model import Buffer, Dim3, Problem, Reference, Scalar, Shape

__all__ = ["Buffer", "Dim3", "Problem", "ProblemError", "Reference", "Scalar", "Shape", "load_problem"]

"""The application's view of a problem directory.

The format itself (models, safe expressions, loader, inputs.hpp) lives in ``ktt.problem``
so the tuner can read problems on a bare GPU box; this package re-exports it and adds
what only the application needs: the ``--check`` summary and the new-problem writer.
"""

from ktt.problem import Buffer, Dim3, Problem, ProblemError, Reference, Scalar, Shape, load_problem
from ktt.problem.inputs_hpp import render_inputs_hpp, write_inputs_hpp

__all__ = [
    "Buffer",
    "Dim3",
    "Problem",
    "ProblemError",
    "Reference",
    "Scalar",
    "Shape",
    "load_problem",
    "render_inputs_hpp",
    "write_inputs_hpp",
]

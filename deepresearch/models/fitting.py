"""Full-batch Adam for the small numpy classifiers fitted at run time (categories, stands-alone)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def adam(
    params: list[np.ndarray], gradients: Callable[[list[np.ndarray]], list[np.ndarray]], steps: int, rate: float
) -> list[np.ndarray]:
    """`params` after `steps` Adam updates (β 0.9 / 0.999) of `gradients(params)`, in place."""
    import numpy as np

    moments = [[np.zeros_like(p), np.zeros_like(p)] for p in params]
    for t in range(1, steps + 1):
        for param, grad, (m, v) in zip(params, gradients(params), moments, strict=True):
            m *= 0.9
            m += 0.1 * grad
            v *= 0.999
            v += 0.001 * grad * grad
            param -= rate * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return params

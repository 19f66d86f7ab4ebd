"""What RFFNet's solvers report back."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["FitHistory", "snapshot"]


@dataclass
class FitHistory:
    """Losses per iteration and the best state a solver found.

    Attributes
    ----------
    state : dict
        A copy of the best parameters (a module's ``state_dict``).
    train_loss, validation_loss : list of float
        The training objective and the monitored loss at every epoch ('adam') or
        L-BFGS iteration ('varpro').
    best_validation_loss : float
    best_validation_score : float or None
        The estimator's score of the model that ``best_validation_loss`` judged, when the
        solver set it (None: the fitted model's score on the validation rows is it).
    n_iter : int
        Epochs or L-BFGS iterations run.
    stopped_on_max_iter : bool
        The solver ended on its iteration limit while still improving: Adam's last
        epoch was ``max_iter`` with progress in the last ``n_iter_no_change``
        epochs, or the last stage of the relevance search ran ``max_iter`` L-BFGS
        iterations with progress in its last ``n_iter_no_change``.
    """

    state: dict
    train_loss: list = field(default_factory=list)
    validation_loss: list = field(default_factory=list)
    best_validation_loss: float = math.inf
    best_validation_score: float | None = None
    n_iter: int = 0
    stopped_on_max_iter: bool = False

    def record(self, train_loss, validation_loss):
        """Append one iteration's losses."""
        self.train_loss.append(train_loss)
        self.validation_loss.append(validation_loss)


def snapshot(module):
    """A detached copy of ``module``'s state dict."""
    return {name: tensor.detach().clone() for name, tensor in module.state_dict().items()}

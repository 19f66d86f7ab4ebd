"""The shared sections of the docstrings of RFFNetRegressor and RFFNetClassifier.

The two estimators of :mod:`rffkit.rffnet` take the same parameters and set the same
attributes; their numpydoc docstrings are assembled from these sections (Parameters,
Attributes with the name of each one's score filled in, Notes with the references) and
their own summary, See Also and Examples.
"""

__all__ = ["PARAMETERS", "ATTRIBUTES", "NOTES", "LINEAR_ONLY_NOTE"]

#: Appended to the summaries of a fit (and to ``rffkit info``) whose model is the linear-only one.
LINEAR_ONLY_NOTE = " (the linear-only model: random-feature weights 0)"

PARAMETERS = """
    Parameters
    ----------
    n_components : int, default=None
        Number of random features ``D``. None uses ``floor(sqrt(n) log n)`` with ``n``
        the training rows after the validation split (the rule of Otto & Izbicki,
        2022, after Li et al., 2018), capped at 4,000 (5,000 for the head of a
        streamed fit, see ``memory_budget``); with the 'varpro' solver at
        least ``min(n, 1000)`` and, above 2,000 rows, at least
        ``min(n / 2, 2500, sqrt(3e10 / n))`` (2,250 at 4,500 rows, 1,825 at 9,000),
        since its search uses ``floor(sqrt(m) log m)`` features per stage anyway
        and the closed-form head on the rest is cheap. The classifier on at most
        1,000 rows, where the kernel-or-linear choice of ``linear_term`` keeps its
        kernel model, also cross-validates that model at 2,000 features on the same
        folds and, where that has the lower mean held-out log-loss, is fitted at
        2,000: about 2.7 times the fit's cost there.
    kernel : {'gaussian', 'laplacian', 'cauchy', 'matern12', 'matern32', \
'matern52', 'spline', 'induced'}, default='gaussian'
        The ARD kernel ``k(lambda o (x - y))``; any name of :data:`rffkit.kernels.KERNELS`.
    variant : {'cos', 'cos_sin'}, default='cos_sin'
        The random-feature map: ``sqrt(2/D) cos(W^T (lambda o x) + b)`` with random
        phases, or ``cos`` and ``sin`` of ``ceil(D/2)`` frequencies without phases
        (see :class:`~rffkit.layers.ARDRandomFourierFeatures`).
    linear_term : bool, default=True
        'varpro' only. After the search, try adding ``w^T (lambda o x)`` to the model
        (an ARD linear kernel with the relevances of the ARD kernel): a stationary
        kernel cannot extrapolate a trend, and on real tables inputs often act
        (nearly) linearly over a heavy-tailed range. Tried first and kept if it
        lowers the validation error (without a validation split: the GCV score by
        more than 1%); a feature of relevance 0 still has no effect. After the
        refinement moves, with a validation split (or with ``early_stopping`` on 10
        to 19 rows, too few for one), the model is compared with the
        linear-only one (ridge or logistic regression on the standardised inputs of
        the features of non-zero relevance) and reduces to it, random-feature
        weights 0, unless it has the lower held-out loss: on at most 1,000 rows both
        fits are cross-validated on 5 folds of all rows (the relevance search
        refitted in each, about 5 times the fit's cost), the kernel model is kept
        only if its mean held-out loss is lower by more than one standard error of
        the per-row differences, and the linear-only model is fitted on all rows,
        its penalty chosen on them (GCV, or the held-out log-loss of the rows for
        the logistic head, below); on more rows both are scored on the validation
        split. Where, after the linear-term move, the linear-only model already
        validates better by more than a standard error, the other refinement moves
        are skipped.
        ``relevances_`` still rank the features; ``linear_only_`` says which model
        was kept.
    alpha : float or 'auto', default='auto'
        Ridge penalty ``alpha ||beta||^2`` on the head (the regression target is in
        standard units). 'auto' with the 'varpro' solver: the relevances are searched
        at 1e-4 and the head's penalty is chosen from half-decades 1e-8 ... 1 on the
        validation split, by a walk along them from the search's penalty (one
        Cholesky solve per penalty visited), or by GCV from one eigendecomposition
        without ``early_stopping``; on a training split of at most 2,000 rows the search is
        repeated at 1e-3 and 3e-2, from the uniform start and from one
        proportional to each feature's marginal R^2, and the best head on
        validation is kept; on a larger split it is repeated at 1 only when the
        first model explains under 5% of the validation variance, and on a split of
        at most 10,000 rows the search and the refinement moves are run again at
        1e-3 and the model with the lower validation loss is kept (this doubles the
        fit's time there; a weak pair of interacting features that the search at
        1e-4 leaves among the irrelevant ones stays visible at 1e-3). The in-memory
        regressor's kernel-model head, refitted on the training and validation rows
        together, takes on at most 1,000 of them the penalty of least exact
        leave-one-out error there (equal rows left out together) instead of the
        validation split's (a streamed fit keeps the split's). The classifier's
        logistic head then takes its own penalty from half-decades 1e-6 ... 1, by
        validation log-loss, or, on a training split of at most 1,000 rows, by the
        approximate leave-one-out log-loss of its rows (Rad & Maleki, 2020; 5-fold
        cross-validation where that would cost more: many classes and features).
        'auto' with 'adam': 1e-4. The value used is ``alpha_``.
    relevance_penalty : float or 'auto', default='auto'
        Strength of an l1 penalty ``penalty ||lambda||_1`` on the relevances (Otto &
        Izbicki, 2022), applied by its proximal step ('adam') or as L-BFGS-B on
        ``lambda >= 0`` ('varpro'), so irrelevant features get relevance exactly 0.
        A number is the search's penalty. 'auto' with 'varpro': on more than
        10,000 training rows with a validation split, after the search and the
        refinement moves, one more search stage at 1e-3 times the variance of the
        search's target (1 for the regressor's standardised target, ``p (1 - p)``
        for each class indicator, averaged over the classes), kept unless it
        validates worse by more than two standard errors; on fewer rows none, as the
        penalty there also zeroes weakly relevant features and costs accuracy.
        'auto' with 'adam': 0.
    rescale_groups : bool, default=True
        'varpro' only. After the search, try setting each group of similar (or of
        the weakest) relevances to 2.5 and 5 times its largest value, which escapes
        the plateau where the kernel is too smooth to see a fast-varying component.
    align_frequencies : bool, default=True
        'varpro' only, and only with ``early_stopping`` (the validation split judges
        it). Draw up to 64 times as many frequencies from the kernel's spectral
        density and keep the ones whose ``(cos, sin)`` pair covaries most with the
        target at the learned relevances times 1, 1.5, 2 and 3 (kernel alignment,
        Sinha & Duchi, 2016). The kernel is then one learned from its spectral
        density rather than the ARD kernel exactly.
    prune_relevances : bool, default=True
        'varpro' only. Last, try zeroing the relevances under 0.1, 0.2 and 0.3 of the
        largest. The candidates of each move are screened by ridge fits on a
        subsample (at most 3 per move after a first look on 2,000 rows; a pruned
        layer must screen better than the layer), and the best is kept only if the
        head refitted on all training rows lowers the validation error by more than
        two standard errors (without a validation split: the GCV score by 1%).
    warp_inputs : bool, default=True
        'varpro' only. The kernel sees each heavy-tailed input (excess kurtosis above
        20 on the training rows, at least 32 distinct values, none on more than half
        of the rows) through its quantile map to normal scores, piecewise linear on
        128 knots and stored with the model, so that its length scale resolves the
        bulk of the values instead of the few extreme ones; the linear columns of
        ``linear_term`` keep the input as it is. Other inputs are only clamped to
        their training range.
    hidden_layer_sizes : tuple of int, default=()
        Empty: RFFNet's linear head. Otherwise ReLU layers of these widths follow the
        random-feature layer (RFFNet+, Otto, 2022), fitted by 'adam'; ``alpha`` then
        penalises the first dense layer.
    solver : {'auto', 'varpro', 'adam'}, default='auto'
        'varpro' eliminates ``beta`` in closed form and runs L-BFGS on ``lambda``
        over coarse-to-fine subsamples, then fits the head on all training rows
        (linear head only). The classifier's search runs on the least-squares
        problem of its one-hot labels (kernel ridge classification); its head is
        then logistic (multinomial), fitted on the fixed features by Newton's method
        (few rows and features) or preconditioned L-BFGS, and it judges the refinement
        moves by validation log-loss. 'adam'
        is Algorithm 1 of Otto & Izbicki (2022): alternating Adam steps on the head
        and on ``lambda`` over mini-batches. 'auto' picks 'varpro' where it applies,
        else 'adam'.
    learning_rate : float, default=1e-2
        'adam' only: the Adam step size.
    batch_size : int, default=256
        'adam' only: rows per mini-batch; in a streamed fit over ``R`` ranks, the
        rows of the global batch (``batch_size / R`` per rank).
    max_iter : int, default=100
        Epochs for 'adam'; most L-BFGS iterations per search stage for 'varpro'.
        Stopping on it while still improving issues a ``ConvergenceWarning``.
    tol : float, default=1e-4
        Relative improvement of the monitored loss that counts as progress.
    early_stopping : bool, default=True
        Hold out ``validation_fraction`` of the rows. 'adam' monitors the validation
        loss every epoch, stops after ``n_iter_no_change`` epochs without progress
        and restores the best state; 'varpro' scores every iterate on it, keeps the
        best relevances, chooses ``alpha='auto'`` and judges the refinement moves on
        it, then (up to 10,000 rows, and in a streamed regressor) refits the kept
        kernel model's head on every row at that penalty (the in-memory regressor's,
        on at most 1,000 rows, at the penalty of least leave-one-out error, see ``alpha``).
        Without it every row trains: 'adam' runs ``max_iter`` epochs, and
        'varpro' uses the GCV score in place of the validation error, skips
        ``align_frequencies`` and still ends each stage after ``n_iter_no_change``
        iterations without progress in GCV.
    validation_fraction : float, default=0.1
        Fraction of the rows held out when ``early_stopping`` (stratified by class
        for the classifier). Fewer than 2 held-out or 2 remaining rows: none.
    n_iter_no_change : int, default=10
        Epochs ('adam') or L-BFGS iterations per stage ('varpro') without progress
        after which the solver stops.
    random_state : int, RandomState instance or None, default=None
        Seeds the split, the random features and the batches through local
        generators (the global NumPy and torch states are untouched).
    device : str or torch.device, default='cpu'
        'cpu', 'cuda', 'cuda:N' or 'auto'. A fitted model predicts on the device it
        was fitted on, or on the CPU where there is no GPU.
    verbose : int, default=0
        0: silent. 1: one progress bar naming the current search, stage,
        refinement move or epoch, and a summary line (time, ``alpha_``,
        ``n_components_``, validation score). 2: also a line per iteration. Lines go
        through the ``rffkit`` logger (to standard error when no logging is
        configured).
    memory_budget : int, str or None, default=None
        Streamed 'varpro' fits only (``X`` a source or a memory map): bytes
        (or a string such as '2GB') that the relevance search on the sample and the
        ``D x D`` statistics of the head may each use. With ``n_components=None`` the
        head's ``D`` is the largest under ``floor(sqrt(n) log n)`` (at most 5,000)
        whose two float64 ``D x D`` statistics and eigendecomposition fit; a given
        ``n_components`` that does not fit raises ``MemoryBudgetError``, and so does a
        budget below what the search on its sample needs (it does not shrink to fit;
        the message gives the need). None: half the memory available when the fit
        starts (the smallest over the ranks).
"""

ATTRIBUTES = """
    Attributes
    ----------
    relevances_ : ndarray of shape (n_features_in_,)
        The learned ``lambda``, for standardised inputs. A model reduced to its
        linear part (see ``linear_term``) has those of its ARD linear kernel: the
        norms of its weights on the standardised inputs.
    feature_importances_ : ndarray of shape (n_features_in_,)
        ``|lambda|`` scaled to [0, 1]; usable by ``SelectFromModel``.
    n_components_ : int
        Number of random features of the fitted model.
    linear_only_ : bool
        Whether the fitted model is the linear-only one (see ``linear_term``): ridge
        or logistic regression on the standardised inputs, its random-feature
        weights 0 and ``relevances_`` the norms of its weights.
    solver_ : str
        The solver used.
    alpha_ : float
        The penalty of the head (the one chosen when ``alpha='auto'``).
    n_iter_ : int
        Epochs ('adam') or L-BFGS iterations over all stages and searches ('varpro').
    loss_curve_ : ndarray of shape (n_iter_,)
        Training objective per epoch, or GCV score per L-BFGS iteration.
    validation_loss_curve_ : ndarray
        The monitored loss at the same points (for 'varpro' followed by the final
        model's validation loss), in the target's units. The classifier's 'varpro'
        search monitors the squared error of its one-hot surrogate, and its final
        entry is the validation log-loss.
    best_validation_loss_ : float
        The monitored loss of the fitted model.
    best_validation_score_ : float or None
        {score} on the validation split (None without one) of the fitted model
        before its head is refitted on all rows (see ``early_stopping``). Where
        cross-validation reduced the model to its linear-only one (at most 1,000 rows,
        see ``linear_term``), that model has learned from the validation rows too, so
        this score and ``best_validation_loss_`` are in-sample.
    model_ : torch.nn.Module
        The fitted :class:`~rffkit.layers.RFFNetModule`, in float64 on the CPU.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when ``X`` has string column names.
"""

NOTES = """
    Notes
    -----
    Inputs are standardised with training statistics, so ``relevances_`` refer to
    standardised inputs and compare across features whatever their units. The map
    ``z(lambda o x)^T z(lambda o y)`` is an unbiased estimate of the ARD kernel
    ``k(lambda o (x - y))`` (Otto & Izbicki, 2022, Proposition 2), so the model is a
    kernel machine whose kernel learns one length scale per feature.

    References
    ----------
    M. P. Otto and R. Izbicki (2022). RFFNet: Scalable and interpretable kernel
    methods via random Fourier features. arXiv:2211.06410.

    A. Rahimi and B. Recht (2008). Random features for large-scale kernel machines.
    Advances in Neural Information Processing Systems 20.
"""

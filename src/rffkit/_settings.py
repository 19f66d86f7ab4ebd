"""The tuning constants of RFFNet's fit, in one place.

The estimators expose what a user chooses (the kernel, the penalty, the moves to
try); the constants below set how hard the solvers work for it. They are fields of
one frozen dataclass so that a benchmark or a test can run the fit with other values
(``dataclasses.replace(DEFAULT_SETTINGS, ...)``) without a module-level patch.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RFFNetSettings", "DEFAULT_SETTINGS"]


@dataclass(frozen=True)
class RFFNetSettings:
    """Tuning constants of the RFFNet solvers; every field is documented where it is set."""

    # -- number of random features ------------------------------------------------------
    #: Cap of the default ``floor(sqrt(n) log n)`` (Li et al., 2018): it passes 4,000 at
    #: n ~ 140,000, where one n x D float32 feature matrix takes over 2 GB.
    max_default_features: int = 4000
    #: The cap for the head of a streamed fit (``X`` a source or a memory map), which holds
    #: ``D x D`` statistics rather than an ``n x D`` matrix: from about 140,000 training
    #: rows up its head is ``stream_max_features`` wide, the first ``max_default_features``
    #: of them the draw an in-memory-sized fit takes, so the relevance search (on those
    #: first columns) does not depend on the head's width. ``memory_budget`` can lower it.
    stream_max_features: int = 5000
    #: With the 'varpro' solver the default D is at least ``min(n, this)``, and so are
    #: the features of a refinement move's screening fit on ``n`` rows: the search keeps
    #: its own ``floor(sqrt(m) log m)`` columns per stage, and only the closed-form head
    #: and the refinement moves see the rest, at O(n D^2).
    varpro_min_features: int = 1000
    #: Above ``first_stage_rows`` training rows 'varpro' takes D at least
    #: ``min(n / 2, varpro_wide_features, sqrt(varpro_head_budget / n))``: as many features as
    #: a head on all ``n`` rows affords for about ``varpro_head_budget`` multiply-adds
    #: of its Gram matrix (2,250 at 4,500 rows, 1,825 at 9,000; the rule's 1,915 at
    #: 33,000 rows), since the random-feature head approximates the exact ARD kernel's
    #: only as D grows and, for a few thousand rows, a larger D is cheap.
    varpro_wide_features: int = 2500
    varpro_head_budget: float = 3e10

    # -- the kernel's inputs ------------------------------------------------------------------
    #: Columns whose standardised training values have excess kurtosis above
    #: ``warp_kurtosis``, at least ``warp_min_distinct`` distinct values and no value
    #: on more than ``warp_max_tie`` of the rows reach the kernel through their quantile
    #: map to normal scores, on ``warp_knots`` knots (:mod:`rffkit._warp`); the linear
    #: columns keep them as they are (the estimators' ``warp_inputs``). 20 maps counts,
    #: lot areas, crime rates and delays, and leaves sizes with a log-normal spread (excess
    #: kurtosis 3 to 10), whose maps lost accuracy on Ames (benchmarks/results/real.md).
    warp_kurtosis: float = 20.0
    warp_min_distinct: int = 32
    warp_max_tie: float = 0.5
    warp_knots: int = 128

    # -- the penalty ----------------------------------------------------------------------
    #: Penalty of the relevance search when ``alpha='auto'``, and the whole of 'auto' for
    #: the Adam solver, which has no closed-form path to choose it from.
    default_alpha: float = 1e-4
    #: Grid of the head's penalty when ``alpha='auto'``: half-decades 1e-8 ... 1 (the
    #: target is in standard units and the feature Gram matrix has trace about 1).
    alpha_grid: tuple = tuple(10.0 ** (-k / 2.0) for k in range(16, -1, -1))
    #: A first model that leaves more than this fraction of the validation variance
    #: unexplained triggers a second search at ``fallback_alpha`` (from two starts).
    fallback_unexplained: float = 0.95
    fallback_alpha: float = 1.0
    #: On a training split of at most ``first_stage_rows`` rows (one cheap search stage)
    #: the search is repeated at each of these penalties, from two starts, and the head
    #: best on validation is kept, as SRFF chooses its penalty from a grid (two
    #: penalties: five searches instead of nine).
    small_sample_alphas: tuple = (1e-3, 3e-2)
    #: On a training split of more than ``first_stage_rows`` and at most
    #: ``refined_retry_rows`` rows, with a validation split, the search and the
    #: refinement moves are run again at ``default_alpha`` times each of these factors,
    #: from the same start, and the model with the lower validation loss is kept: at a
    #: few thousand rows a larger penalty lets the search see a weak pair of interacting
    #: inputs that only the refinement then resolves, while on other problems it costs
    #: accuracy, and before the moves the two searches score alike on validation.
    refined_retry_factors: tuple = (10.0,)
    refined_retry_rows: int = 10_000
    #: In the same range (the refined retry's), with ``polish_iterations`` > 0, the kept
    #: layer's relevances are polished by a last search stage on all training rows with all
    #: ``D`` of its features (the search's stages see ``floor(sqrt(m) log m)``: 564 of the
    #: 2,250 at 4,500 rows), at the kept search's penalty, for at most ``polish_iterations``
    #: L-BFGS iterations and the GCV evaluations ``polish_flop_budget`` affords (13 at 4,500
    #: rows, 10 at 10,000; none under ``min_stage_evaluations``), ending after
    #: ``polish_patience`` iterations that lower the GCV score by less than ``polish_tol`` of
    #: it; the polished model is kept unless its validation loss is higher by more than
    #: ``polish_z`` standard errors. Off by default: it helps SE1 and SE2 (the weak pair of
    #: SE1 found in every draw at 5,000 rows) but on real tables cut to 4,500 training rows it
    #: lost R^2 on cps and a noise ranking on TV16, at 1.4-1.8 times the CPU time
    #: (benchmarks/results/gp.md, small_data.md).
    polish_iterations: int = 0
    polish_flop_budget: float = 1.2e12
    polish_tol: float = 1e-5
    polish_patience: int = 2
    polish_z: float = 2.0

    # -- the coarse-to-fine relevance search ------------------------------------------------
    #: Rows of the first (smallest) stage; later stages grow by ``stage_growth``.
    first_stage_rows: int = 2000
    stage_growth: int = 4
    #: Floating-point operations one stage may spend (one GCV evaluation with its
    #: gradient costs about ``4 m s^2``); a stage that cannot afford
    #: ``min_stage_evaluations`` runs on a smaller subsample or is dropped.
    search_flop_budget: float = 3e11
    min_stage_evaluations: int = 10
    #: Degree and rows of the per-feature polynomial screen that gives the second start.
    marginal_degree: int = 3
    marginal_rows: int = 5000
    #: ``relevance_penalty='auto'``: on more than ``sparse_rows`` training rows the fit stands
    #: for (where the search is not retried, ``refined_retry_rows``), one more search stage
    #: after the refinement moves adds ``sparse_penalty`` times the mean variance of the
    #: target's columns times ``sum(lambda)`` to the GCV score (``screen_rows`` rows, at most
    #: ``sparse_evaluations`` GCV evaluations), and its sparser model is kept unless its
    #: validation loss is higher by more than ``sparse_z`` standard errors
    #: (:func:`rffkit._search_refine.sparsify`). A penalty in the search itself met the noise
    #: target of bench_real on TV16 but zeroed SE1's weak pair at 50,000 rows (seeds 3, 4).
    sparse_rows: int = 10_000
    sparse_penalty: float = 1e-3
    sparse_z: float = 2.0
    sparse_evaluations: int = 10

    # -- the refinement moves ---------------------------------------------------------------
    #: Multipliers tried on each relevance group (group rescaling).
    rescale_factors: tuple = (2.5, 5.0)
    #: Groups: relevances at least ``group_floor`` of the largest count as relevant; runs
    #: are cut where one magnitude exceeds the next by ``group_gap``; at most
    #: ``max_groups`` groups are tried.
    group_gap: float = 1.5
    group_floor: float = 0.1
    max_groups: int = 6
    #: The groups are also formed, and rescaled, with the relevances under this fraction
    #: of the largest set to zero (None: only on the relevances as they are).
    rescale_prune_fraction: float | None = 0.2
    #: Relevance multipliers at which aligned frequencies are selected.
    align_scales: tuple = (1.0, 1.5, 2.0, 3.0)
    #: Candidate frequencies drawn per frequency kept, at most (the pool also shrinks
    #: so that scoring one scale costs at most ``align_flop_budget``). The alignment is
    #: estimated on ``score_rows`` rows: a larger pool selects more of its noise on a
    #: toy problem, but finds the directions of SE1 and SE2 at 50,000 rows far better.
    align_pool: int = 64
    align_flop_budget: float = 3e10
    #: Training rows on which the candidates are screened, and on which the frequency
    #: alignment is scored.
    screen_rows: int = 8000
    score_rows: int = 2000
    #: True: a screening fit on ``m`` rows uses the layer's first
    #: ``screening_n_components(m)`` features (:mod:`rffkit._search`), not all ``D``
    #: of the head; False: all ``D``. Fewer features favour the smoother candidates
    #: (a rougher kernel needs more of them), against the rescaling move that
    #: sharpens a group the search left too smooth.
    screen_subsample_features: bool = False
    #: When a move has more candidates than this (and the screening rows are more than
    #: twice ``score_rows``), all are first screened on ``score_rows`` rows, and only
    #: this many of the best on all screening rows (None: all on all rows). The first
    #: look favours the smoother candidates (a rougher kernel needs more rows), so it
    #: must not keep too few: when ``group_gap`` splits a pair of partners into two
    #: singleton groups, the singletons' rescalings look better on few rows than the
    #: pair's, which is the move that helps.
    prescreen_keep: int | None = 6
    #: A screened candidate must beat the best so far by this relative margin (and a
    #: move judged by GCV must lower it by as much).
    margin: float = 0.01
    #: After the linear-term move, the other moves are skipped where the model loses to
    #: the linear-only model on the validation split (of 50 rows or more) by more than
    #: this many standard errors of the paired per-sample differences: they reshape a
    #: kernel that the kernel-or-linear choice would most likely discard; rarely, a move
    #: would have made it win (None: never skipped).
    skip_moves_z: float | None = 1.0
    #: With ``linear_term``, the kernel model is kept only if its mean per-sample
    #: validation loss beats the linear-only model's by more than this many standard
    #: errors of the paired differences (:func:`rffkit._heads.reduce_to_linear`); 0:
    #: by any amount. The validation split also chose the search's iterates and moves,
    #: so it favours the kernel model: a larger margin would also reject it where it
    #: is much the better (digits, Boston).
    kernel_over_linear_z: float = 0.0
    #: On at most this many rows (training and validation together) the kernel model and
    #: the linear-only one are compared by ``linear_cv_folds``-fold cross-validation of
    #: both fits instead of on the validation split, and the linear-only model, when
    #: chosen, is fitted on all rows (:mod:`rffkit._kernel_or_linear`): the fit then
    #: costs about ``linear_cv_folds`` times as much.
    linear_cv_rows: int = 1000
    linear_cv_folds: int = 5
    #: There the kernel model is kept only if its held-out losses beat the linear-only
    #: model's by more than this many standard errors of the paired per-row differences
    #: (the one-standard-error rule: the simpler model where the two are within it).
    prefer_linear_z: float = 1.0
    #: There, for the estimators that widen (``BaseRFFNet._widens_by_cross_validation``: the
    #: classifier), with ``n_components`` left to the default and the default under this
    #: ``D``, the kernel model is also cross-validated at this ``D``, nearer the exact kernel,
    #: and fitted again at it where its held-out losses beat the default's by more than
    #: ``wide_over_default_z`` standard errors (None: never).
    cv_wide_features: int | None = 2000
    wide_over_default_z: float = 0.0
    #: False: the model is never reduced to its linear part (the fits inside that
    #: cross-validation, which must score the kernel model itself).
    reduce_linear: bool = True
    #: Once the moves are chosen, the kept kernel model's head is refitted, at its chosen
    #: penalty, on the training and validation rows together (False: on the training rows).
    #: The fits inside the kernel-or-linear cross-validation refit too: they judge the
    #: model the fit keeps (:mod:`rffkit._kernel_or_linear`). Only fits of at most
    #: ``refit_head_rows`` rows (training and validation) refit in memory: above, a
    #: tenth more rows changes the head little and the refit's Gram matrix or logistic
    #: fit costs a tenth of the fit (a streamed regressor refits from its statistics,
    #: at no cost).
    refit_head: bool = True
    refit_head_rows: int = 10_000
    #: With ``alpha='auto'``, the regressor's ridge head refitted on at most this many rows
    #: (training and validation) takes the penalty of ``alpha_grid`` with the least exact
    #: leave-one-out error on them instead of the validation split's choice
    #: (:func:`rffkit._ridge.loo_ridge_head`): a split of a few dozen rows chooses it by luck
    #: (a 15-row split took 1e-6 for Ecdat/Grunfeld, R^2 -0.79 on its test rows; 0.84 by
    #: leave-one-out), as ``logistic_loo_rows`` does for the classifier's.
    ridge_loo_rows: int = 1000
    #: Fractions of the largest relevance under which the pruning move zeroes relevances.
    prune_fractions: tuple = (0.1, 0.2, 0.3)

    # -- the classifier's logistic head ------------------------------------------------------
    #: L-BFGS iterations and gradient tolerance of each preconditioned logistic fit
    #: (:func:`rffkit._logistic_path.logistic_head_path`); preconditioned, a fit takes 5-40.
    logistic_max_iter: int = 300
    #: Penalties of the logistic head when ``alpha='auto'``: half-decades 1e-6 ... 1.
    #: Smaller ones only make a nearly separable problem's probabilities more extreme,
    #: and their fits are the slow ones.
    logistic_alpha_grid: tuple = tuple(10.0 ** (-k / 2.0) for k in range(12, -1, -1))
    logistic_tol: float = 1e-5
    #: The penalty path (``alpha_grid``, largest first) stops once the validation
    #: log-loss has exceeded its best for this many penalties in a row.
    logistic_patience: int = 2
    #: Without a validation split (and on more than ``logistic_loo_rows`` rows) the
    #: head's penalty is the surrogate ridge head's
    #: (chosen by GCV) times this: a Newton step from zero on the logistic loss, whose
    #: curvature is about 1/4 where the squared loss has 2, shrinks like ridge at
    #: ``alpha / 8``.
    logistic_alpha_ratio: float = 0.125
    #: On at most this many training rows the head's penalty is chosen on the training
    #: rows held out instead of on the validation split (a few dozen held-out rows choose
    #: it by luck): by the approximate leave-one-out log-loss, or, where that costs more
    #: (many classes and coordinates), by stratified cross-validation with this many folds.
    logistic_loo_rows: int = 1000
    logistic_cv_folds: int = 5

    # -- the Adam solver ----------------------------------------------------------------------
    #: Non-finite losses cured by restoring the best state and halving the step, at most.
    max_divergence_restarts: int = 5

    # -- inference --------------------------------------------------------------------------------
    #: Rows per chunk when predicting.
    predict_chunk_rows: int = 8192


DEFAULT_SETTINGS = RFFNetSettings()

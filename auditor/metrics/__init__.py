"""Metrics as pure functions over histograms and arrays: no models, no I/O, no records.

``tibet``: CAS, BAV (variance and the authors' mean-absolute-deviation variant), relative
BAV, top-K and the occupation lean. ``t2iat``: Asc, S, Cohen's d, the permutation test.
``trace``: paired similarities and whether the neutral prompt is closer to one gender,
object co-occurrence, bias score, χ², SSIM; ``dependency_groups``: attention masks,
coverage and the five prompt-image dependency groups.
Studies and :mod:`auditor.scoring` compute the inputs and turn results into records;
these only do arithmetic, so each is tested against hand computations.
"""

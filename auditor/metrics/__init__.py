"""Metrics as pure functions over histograms and arrays: no models, no I/O, no records.

* ``tibet``: CAS, BAV (variance and the authors' mean-absolute-deviation variant), relative
  BAV, top-K and the occupation lean. ``t2iat``: Asc, S, Cohen's d, the permutation test.
* ``bootstrap``: paired resampling over seeds and its intervals (percentile, BCa);
  ``resampled``: the TIBET and T2IAT statistics of many resamples at once;
  ``multiple_testing``: Holm and Benjamini-Hochberg.
* ``allocation``: an exploration's arms, leaders and stopping rule from their intervals.
* ``amplification``: bias amplification against the training data (Seshadri et al.).
* ``trace``: paired similarities and whether the neutral prompt is closer to one gender,
  object co-occurrence, bias score, SSIM; ``contingency``: the χ² tests of object counts;
  ``dependency_groups``: attention masks, coverage and the five prompt-image dependency groups.

Studies and :mod:`auditor.scoring` compute the inputs and turn results into records;
these only do arithmetic, so each is tested against hand computations.
"""

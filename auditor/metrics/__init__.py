"""Metrics as pure functions over histograms and arrays: no models, no I/O, no NLTK.

``tibet``: CAS, BAV (variance and the authors' mean-absolute-deviation variant), relative
BAV, top-K and the occupation lean. Studies compute the inputs; these only do arithmetic,
so each is tested against hand computations.
"""

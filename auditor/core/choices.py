"""The fixed words some settings and results take, as ``Literal`` types.

The records store them and the metrics, corpora and perception modules compute with them;
both import them from here, a module that imports nothing else: every command reads
records (``auditor --help`` and ``auditor runs`` included), and the modules that compute
import numpy or OpenCV, which those commands do not need.
"""

from __future__ import annotations

from typing import Literal

#: How a bootstrap interval is read off its resamples (:mod:`auditor.metrics.bootstrap`).
IntervalMethod = Literal["percentile", "bca"]
#: How histograms enter the IoU of CAS: rescaled to sum 1 (the authors' code) or as per-image frequencies (Eq. 1-3).
CasNormalization = Literal["distribution", "frequency"]
#: The standard deviation T2IAT's d divides by: the groups' pooled sample sd (Cohen), or the population sd of
#: every Asc value of X and Y together (the authors' released notebook, as in WEAT).
EffectSpread = Literal["pooled", "combined"]
#: Cohen's size of a T2IAT |d|; "undefined" when d is (no spread within the groups).
EffectLabel = Literal["negligible", "small", "medium", "large", "undefined"]
#: The prompt-image dependency groups of Wu et al. (:mod:`auditor.metrics.dependency_groups`).
Group = Literal["explicitly_guided", "implicitly_guided", "explicitly_independent", "implicitly_independent", "hidden"]
#: How the amplification study selects gendered training captions (Seshadri et al., Table 4).
Method = Literal["keyword", "nn", "no-indicator", "nn+no-indicator"]
#: What the face filter said of an image (:mod:`auditor.perception.faces`).
FaceVerdict = Literal["kept", "no_face", "many_faces", "small_face"]

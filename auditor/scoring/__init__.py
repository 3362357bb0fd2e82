"""From stored answers and embeddings to scores: concepts, TIBET scores, embedding scores,
and the file formats that feed scoring. The arithmetic itself is in :mod:`auditor.metrics`."""

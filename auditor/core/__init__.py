"""Infrastructure every stage shares: errors, settings, run folders and the content cache,
fingerprints and weight loading, devices, redaction, backend registries, language data."""

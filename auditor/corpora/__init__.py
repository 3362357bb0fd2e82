"""Training-data samples: streaming caption readers, gender-indicator labels, caption selection.

``readers`` streams captions (and image references) from TXT/CSV/TSV/JSONL/Parquet files
in batches; ``gender`` labels captions by the gender words (and optionally first names)
they mention; ``selection`` picks an occupation's captions as the bias-amplification
study does (keyword, nearest neighbours, without gender indicators).
"""

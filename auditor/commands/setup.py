"""``auditor setup``: install the language data concept extraction needs."""

from __future__ import annotations

import typer

from auditor.core.console import out, say_whole


def setup() -> None:
    """Make WordNet available to NLTK offline (from NLTK's downloader or the system's WordNet files)."""
    from auditor.core.langdata import english_stopwords, ensure_wordnet, load_wordnet

    folder = ensure_wordnet()
    synsets = len(list(load_wordnet().all_synsets("n")))
    say_whole(out, f"WordNet: {folder} ({synsets} noun synsets)")
    out.print(f"stopwords: {len(english_stopwords())} English words (shipped with auditor)")


def register(app: typer.Typer) -> None:
    app.command("setup")(setup)

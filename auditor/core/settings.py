"""User settings (``AUDITOR_*`` environment variables); the default model specs are in :mod:`auditor.core.defaults`.

Only values that are not per-run options live here; everything that changes a number
is recorded in the run's config, not read from the environment at report time.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def _default_home() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "auditor"


class Settings(BaseSettings):
    """Where auditor keeps its data; every field can be set as ``AUDITOR_<NAME>``."""

    #: An empty variable is an unset one (``AUDITOR_RUNS_DIR=`` keeps ./runs, not the working directory itself).
    model_config = SettingsConfigDict(env_prefix="AUDITOR_", extra="ignore", env_ignore_empty=True)

    home: Path = Field(default_factory=_default_home, description="Folder for language data and the cache.")
    runs_dir: Path = Field(default=Path("runs"), description="Where run folders are written.")
    cache_path: Path | None = Field(default=None, description="SQLite content cache; default <home>/cache.sqlite.")

    @property
    def nltk_data_dir(self) -> Path:
        """The NLTK data folder auditor controls (WordNet is built here when offline)."""
        return self.home / "nltk_data"

    @property
    def cache_file(self) -> Path:
        return self.cache_path or self.home / "cache.sqlite"


def get_settings() -> Settings:
    """Read the settings now (cheap), so a changed environment is always seen."""
    return Settings()


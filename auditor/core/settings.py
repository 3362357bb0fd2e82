"""User settings (``AUDITOR_*`` environment variables) and the default model specs.

Only values that are not per-run options live here; everything that changes a number
is recorded in the run's config, not read from the environment at report time.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

#: Stable Diffusion 1.5, one of the two checkpoints the TIBET paper audited (with 2.1).
DEFAULT_T2I = "diffusers:stable-diffusion-v1-5/stable-diffusion-v1-5"
#: BLIP-2 with OPT-2.7b: an open VQA + caption model that runs on one consumer GPU.
DEFAULT_VQA = "blip2:Salesforce/blip2-opt-2.7b"
#: The CLIP model T2IAT-style embedding scores use.
DEFAULT_EMBEDDER = "clip:openai/clip-vit-large-patch14"
#: The LLM used for planning when an OpenAI key is present.
DEFAULT_OPENAI_LLM = "openai:gpt-4o-mini"
#: The largest image side asked for: twice SDXL's 2048, beyond any pipeline's training size. A typo larger than
#: this would not fail cleanly but exhaust the machine's memory before a single image is made.
MAX_SIDE = 4096
#: The largest guidance scale: published settings stay below 30, and far larger ones overflow the pixels.
MAX_GUIDANCE = 100.0
#: The largest generation seed (torch generators take 64-bit seeds; numpy's take non-negative ones).
MAX_SEED = 2**63 - 1


def _default_home() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "auditor"


class Settings(BaseSettings):
    """Where auditor keeps its data; every field can be set as ``AUDITOR_<NAME>``."""

    model_config = SettingsConfigDict(env_prefix="AUDITOR_", extra="ignore")

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


def default_llm_spec() -> str:
    """``openai:gpt-4o-mini`` when an OpenAI key is set, otherwise the offline planner."""
    return DEFAULT_OPENAI_LLM if os.environ.get("OPENAI_API_KEY") else "offline"

"""The default model specs and the limits on generation options.

Kept apart from :mod:`auditor.core.settings` (pydantic-settings) because every command's options name them:
``auditor --help`` reads them without loading pydantic.
"""

from __future__ import annotations

import os

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


def default_llm_spec() -> str:
    """``openai:gpt-4o-mini`` when an OpenAI key is set, otherwise the offline planner."""
    return DEFAULT_OPENAI_LLM if os.environ.get("OPENAI_API_KEY") else "offline"

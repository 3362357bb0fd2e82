"""GPU benchmark of the three model stages on real-size architectures with random weights.

No weights can be downloaded, but the cost of a forward pass depends on the architecture,
not on the values of the weights. This script builds Stable Diffusion 1.5, BLIP-2
OPT-2.7b and CLIP ViT-L/14 from their published shapes with random weights (tokenizers
come from ``auditor.tiny``), saves them with ``save_pretrained``, loads them through
auditor's own backends (the same ``from_pretrained`` path real checkpoints take), and
times each stage against the naive way of doing the same work:

- generation: one image per pipeline call vs ``--batch-size`` images per call;
- VQA: transformers' ``generate`` once per (image, question) pair, re-encoding the image
  every time, vs auditor's backend (image encoded once, pairs batched);
- embeddings: one image per forward pass vs batches.

Run on a CUDA machine: ``python benchmarks/bench_gpu.py [--out DIR]``. It prints one
table of images (or pairs) per second and the speed-up of each stage.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

SD_STEPS = 25
SD_SIZE = 512
GENERATION_IMAGES = 16
GENERATION_BATCH = 8
VQA_IMAGES = 16
VQA_QUESTIONS = [
    "What is the gender (male, female, other) of the person in the image?",
    "What age group (young, middle, old) is the person in the image?",
    "What is the ethnicity of the person in the image?",
    "What is the socioeconomic status of the person in the image?",
    "What is the person wearing?",
    "What is the setting of the image?",
    "What is the style of the image?",
    "What is the emotion of the person in the image?",
]
CAPTION = "Describe the image."
CLIP_IMAGES = 256


def build_sd15(folder: Path) -> None:
    """Stable Diffusion 1.5's UNet (860M), VAE and CLIP ViT-L/14 text encoder, random weights, fp16."""
    import torch
    from diffusers import (
        AutoencoderKL,
        PNDMScheduler,
        StableDiffusionPipeline,
        UNet2DConditionModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModel

    from auditor.tiny.tokenizers import clip_tokenizer

    with torch.device("cuda"):
        unet = UNet2DConditionModel(sample_size=64, cross_attention_dim=768, attention_head_dim=8)
        vae = AutoencoderKL(
            block_out_channels=(128, 256, 512, 512),
            down_block_types=("DownEncoderBlock2D",) * 4,
            up_block_types=("UpDecoderBlock2D",) * 4,
            layers_per_block=2,
            latent_channels=4,
            sample_size=SD_SIZE,
        )
        text_encoder = CLIPTextModel(
            CLIPTextConfig(vocab_size=49408, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                           num_attention_heads=12, max_position_embeddings=77)
        )  # fmt: skip
    pipeline = StableDiffusionPipeline(
        unet=unet, vae=vae, text_encoder=text_encoder, tokenizer=clip_tokenizer(),
        scheduler=PNDMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", skip_prk_steps=True),
        safety_checker=None, feature_extractor=None, requires_safety_checker=False,
    )  # fmt: skip
    pipeline.to(torch.float16).save_pretrained(folder)


def build_blip2_opt27(folder: Path) -> None:
    """BLIP-2 with the ViT-g vision tower, Q-Former and OPT-2.7b (3.8B parameters), random weights, fp16."""
    import torch
    from transformers import (
        Blip2Config,
        Blip2ForConditionalGeneration,
        Blip2Processor,
        BlipImageProcessor,
    )

    from auditor.tiny.tokenizers import opt_tokenizer

    processor = Blip2Processor(
        image_processor=BlipImageProcessor(size={"height": 224, "width": 224}), tokenizer=opt_tokenizer(), num_query_tokens=32
    )
    tokenizer = processor.tokenizer
    config = Blip2Config(
        vision_config={"hidden_size": 1408, "intermediate_size": 6144, "num_hidden_layers": 39,
                       "num_attention_heads": 16, "image_size": 224, "patch_size": 14},
        qformer_config={"encoder_hidden_size": 1408},
        text_config={"model_type": "opt", "vocab_size": 50272, "hidden_size": 2560, "word_embed_proj_dim": 2560,
                     "ffn_dim": 10240, "num_hidden_layers": 32, "num_attention_heads": 32,
                     "max_position_embeddings": 2048, "pad_token_id": tokenizer.pad_token_id,
                     "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id},
        num_query_tokens=32,
        image_token_index=tokenizer.convert_tokens_to_ids(processor.image_token.content),
    )  # fmt: skip
    torch.set_default_dtype(torch.float16)
    try:
        with torch.device("cuda"):
            model = Blip2ForConditionalGeneration(config)
    finally:
        torch.set_default_dtype(torch.float32)
    model.eval().save_pretrained(folder)
    processor.save_pretrained(folder)


def build_clip_l14(folder: Path) -> None:
    """CLIP ViT-L/14 (428M parameters), random weights, fp16."""
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor

    from auditor.tiny.tokenizers import clip_tokenizer

    config = CLIPConfig(
        text_config={"vocab_size": 49408, "hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                     "num_attention_heads": 12, "max_position_embeddings": 77},
        vision_config={"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24,
                       "num_attention_heads": 16, "image_size": 224, "patch_size": 14},
        projection_dim=768,
    )  # fmt: skip
    with torch.device("cuda"):
        model = CLIPModel(config)
    model.to(torch.float16).eval().save_pretrained(folder)
    image_processor = CLIPImageProcessor(size={"shortest_edge": 224}, crop_size={"height": 224, "width": 224})
    CLIPProcessor(image_processor=image_processor, tokenizer=clip_tokenizer()).save_pretrained(folder)


def timed(work: Callable[[], object], repeats: int = 1) -> float:
    """Best wall time of ``repeats`` runs after one warm-up, with the GPU synchronised."""
    import torch

    work()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best


def bench_generation(folder: Path) -> dict:
    from auditor.generation.base import GenerationItem
    from auditor.generation.registry import T2I_BACKENDS
    from auditor.records import GenerationSettings

    items = [GenerationItem(prompt=f"a photo of a pharmacist {i % 4}", index=i, seed=i) for i in range(GENERATION_IMAGES)]
    result = {}
    for batch in (1, GENERATION_BATCH):
        settings = GenerationSettings(steps=SD_STEPS, width=SD_SIZE, height=SD_SIZE, batch_size=batch)
        backend = T2I_BACKENDS.load(f"diffusers:{folder}", settings=settings)
        seconds = timed(partial(backend.generate, items))
        result[f"batch {batch}"] = GENERATION_IMAGES / seconds
        del backend
    return {"unit": "images/s", **result, "speed-up": result[f"batch {GENERATION_BATCH}"] / result["batch 1"]}


def random_images(count: int, size: int = 512):
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    return [Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)) for _ in range(count)]


def bench_vqa(folder: Path) -> dict:
    import torch

    from auditor.perception.registry import VQA_BACKENDS
    from auditor.records import PerceptionSettings

    settings = PerceptionSettings(max_new_tokens=10, caption_max_new_tokens=30, batch_size=64)
    vqa = VQA_BACKENDS.load(f"blip2:{folder}", settings=settings)
    images = random_images(VQA_IMAGES)
    questions = [*VQA_QUESTIONS, CAPTION]
    pairs = len(images) * len(questions)
    ours = timed(lambda: vqa.answer(images, questions, CAPTION))

    def naive() -> None:
        """The usual transformers recipe: processor + generate for every (image, question) pair."""
        for image in images:
            for question in questions:
                tokens = settings.caption_max_new_tokens if question == CAPTION else settings.max_new_tokens
                inputs = vqa.processor(images=image, text=f"Question: {question} Answer:", return_tensors="pt")
                inputs = inputs.to(vqa.device, torch.float16)
                vqa.model.generate(**inputs, max_new_tokens=tokens, do_sample=False)

    baseline = timed(naive)
    return {"unit": "pairs/s", "naive": pairs / baseline, "auditor": pairs / ours, "speed-up": baseline / ours}


def bench_clip(folder: Path) -> dict:
    from auditor.perception.registry import EMBEDDERS

    embedder = EMBEDDERS.load(f"clip:{folder}")
    images = random_images(CLIP_IMAGES, size=224)
    batched = timed(lambda: embedder.embed_images(images), repeats=3)
    single = timed(lambda: [embedder.embed_images([image]) for image in images])
    return {"unit": "images/s", "one per pass": CLIP_IMAGES / single, "batched": CLIP_IMAGES / batched,
            "speed-up": single / batched}  # fmt: skip


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="Folder for the saved models (default: temp).")
    parser.add_argument("--json", type=Path, default=None, help="Also write the results to this JSON file.")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_gpu needs a CUDA GPU")
    root = args.out or Path(tempfile.mkdtemp(prefix="auditor-bench-"))
    results = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}
    for name, build, bench in (
        ("generation: SD-1.5 UNet 512px 25 steps", build_sd15, bench_generation),
        ("VQA: BLIP-2 OPT-2.7b, 9 questions/image", build_blip2_opt27, bench_vqa),
        ("embeddings: CLIP ViT-L/14", build_clip_l14, bench_clip),
    ):
        folder = root / build.__name__.removeprefix("build_")
        started = time.perf_counter()
        build(folder)
        torch.cuda.empty_cache()
        results[name] = {"build_s": round(time.perf_counter() - started, 1), **bench(folder)}
        torch.cuda.empty_cache()
        print(name, json.dumps(results[name]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# Packs what benchmarks/on-device.sh needs on a lent GPU machine into .gpu-kit/ (git-ignored).
# That machine's image has Python 3.12 with CUDA PyTorch, transformers and accelerate, and can
# fetch nothing; the rest of what the benchmark imports travels with the checkout:
#   .gpu-kit/wheels/       CPython 3.12 x86-64 Linux wheels, each at the version this .venv runs
#   .gpu-kit/wordnet.tar.gz  the WordNet corpus auditor reads, as a folder for NLTK (NLTK 3.10
#                            refuses corpus zips outside the folders it trusts)
# Usage: make gpu-kit (or scripts/gpu-kit.sh [PYTHON]); then carry .gpu-kit with the checkout.
set -euo pipefail
python=${1:-.venv/bin/python}
kit=.gpu-kit
#: Imported on the benchmark's path and missing from the device image (its CUDA torch, transformers and accelerate stay).
packages=(diffusers pydantic pydantic-core pydantic-settings annotated-types typing-inspection
  typing-extensions python-dotenv nltk defusedxml importlib-metadata)

rm -rf "$kit.partial" && mkdir -p "$kit.partial/wheels"
pins=()
for package in "${packages[@]}"; do
  pins+=("$package==$("$python" -c 'import sys, importlib.metadata as m; print(m.version(sys.argv[1]))' "$package")")
done
platforms=()
for tag in manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014 manylinux1; do
  platforms+=(--platform "${tag}_x86_64")
done
"$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]}" -d "$kit.partial/wheels" "${pins[@]}"
corpus=$("$python" -c 'from auditor.core.langdata import ensure_wordnet; print(ensure_wordnet(try_download=False))')
tar -czf "$kit.partial/wordnet.tar.gz" -C "$(dirname "$corpus")" "$(basename "$corpus")"
rm -rf "$kit" && mv "$kit.partial" "$kit"
echo "$kit: $(du -sh "$kit" | cut -f1) (${#pins[@]} wheels: ${pins[*]})"

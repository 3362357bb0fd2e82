#!/usr/bin/env bash
# Runs benchmarks/bench_audit.py on a lent GPU machine, from this checkout carried there with
# .gpu-kit/ (`make gpu-kit` makes it here): the kit's wheels go beside the image's CUDA
# PyTorch, WordNet is read from the kit, and auditor runs from source. Arguments go to the
# benchmark, e.g. benchmarks/on-device.sh --t2i sd15 --only unet --out "$OUT/unet.json"; a kit is installed
# once per machine (its wheels' names say which). benchmarks/gpu-session.sh runs it part after part within one command.
set -euo pipefail
kit=${GPU_KIT:-.gpu-kit}
site=/tmp/auditor-site
[ -d "$kit/wheels" ] || { echo "no $kit/wheels: run 'make gpu-kit' here and carry $kit" >&2; exit 2; }
mkdir -p /tmp/auditor-nltk/corpora && tar -xzf "$kit/wordnet.tar.gz" -C /tmp/auditor-nltk/corpora
installed="$site/.installed-$(ls "$kit"/wheels | sha256sum | cut -c1-16)"  # another kit carried later: installed
if [ ! -f "$installed" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
        "$kit"/wheels/*.whl
    touch "$installed"
fi
export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}" NLTK_DATA=/tmp/auditor-nltk PYTHONUNBUFFERED=1
exec python3 benchmarks/bench_audit.py "$@"

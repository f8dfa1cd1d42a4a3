#!/usr/bin/env bash
# Wheels for the TRL peer of `python -m bench.decode --grpo --grpo_peers=trl` on the GPU machine (no internet),
# downloaded here into ./.whl (git-ignored) for its Python 3.12 / x86_64. That image already has torch 2.11,
# transformers 5.17, accelerate 1.15, huggingface_hub 1.33, tokenizers, safetensors, numpy, pandas, pyarrow,
# fsspec, xxhash, psutil, jinja2, pyyaml, tqdm, requests, httpx; it lacks trl, datasets and datasets' dill and
# multiprocess. trl 1.16.0 needs transformers>=4.56.2, accelerate>=1.10.1, datasets>=4.7.0; datasets 5.2.0 needs
# dill<0.4.2, multiprocess<0.70.20 (which needs dill>=0.4.1), pyarrow>=24, fsspec<=2026.9.0, huggingface-hub>=1.31.
# Run from the repo root, together with the repo's other GPU wheels:
#   ../shared/tools/gpu_wheels.sh && bench/trl_wheels.sh
# and on the GPU machine (carry .whl):
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
#   export PYTHONPATH=$PWD:/tmp/site
set -euo pipefail
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
mkdir -p .whl
pkgs=(trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 "$@")
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "${pkgs[@]}"
ls -la .whl
du -ch .whl/*.whl | tail -1

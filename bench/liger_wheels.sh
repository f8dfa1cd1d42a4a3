#!/usr/bin/env bash
# The wheel for the Liger peers of `python -m bench.train_mfu --peers=liger,liger_compile` on the GPU machine (no
# internet), downloaded here into ./.whl (git-ignored) for its Python 3.12 / x86_64. liger-kernel 0.8.5 is a pure-Python
# wheel (py3-none-any, 0.9 MiB) of Triton kernels; it needs torch>=2.1.2 and triton>=2.3.1, which the GPU image has
# (torch 2.11.0+cu130, triton 3.6.0), and imports packaging, numpy and transformers (>= 5 for its HF patches; the
# image has 5.17), all in the image. Its extras (cutile, cutedsl, lck: cuda-tile, nvidia-cutlass-dsl,
# liger-cute-kernels) are optional backends it probes at run time and are not needed. A newer version can be given:
#   bench/liger_wheels.sh                      # liger-kernel==0.8.5
#   bench/liger_wheels.sh liger-kernel==0.8.6  # another version instead (keep one: two stop the install)
# Run from the repo root, together with the repo's other GPU wheels:
#   ../shared/tools/gpu_wheels.sh && bench/liger_wheels.sh
# and on the GPU machine (carry .whl):
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
#   export PYTHONPATH=$PWD:/tmp/site
set -euo pipefail
# .whl/ stays out of git (also in a worktree, where .git is a file): the repo's .gitignore, else info/exclude
git check-ignore -q .whl/probe.whl 2>/dev/null || echo '/.whl/' >> "$(git rev-parse --git-path info/exclude)"
mkdir -p .whl
pkgs=("${@:-liger-kernel==0.8.5}")
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "${pkgs[@]}"
for whl in .whl/liger_kernel-*.whl; do
  echo "$whl requires:"; unzip -p "$whl" '*/METADATA' | grep '^Requires-Dist' | grep -v 'extra ==' || true
done
ls -la .whl
du -ch .whl/*.whl | tail -1

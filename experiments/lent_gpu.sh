#!/usr/bin/env bash
# The campaign on a lent GPU machine (experiments/CAMPAIGN.md), from the repo root that the machine received:
#   bash experiments/lent_gpu.sh --run=dir_debias_spec,march_mini_recall_long --time_budget_s=540
#   bash experiments/lent_gpu.sh --run=march_mini_recall_spec --time_budget_s=470 --finish_in_budget   # a lease's last call
# It installs the wheels the GPU image lacks from .whl/ (../shared/tools/gpu_wheels.sh fetches them; carry .whl),
# links the data carried in .carry/data as ../shared/data, prints the source hash that names the code, and runs
# shared.sweep.campaign with the given flags, its workdirs in runs/campaign (kept between calls on a warm machine,
# so the same command resumes) and each table's results packed into $OUT (bundles too, up to 45 MiB in all).
# Before the first call, on the development machine (both folders are git-ignored; name them in the call's carry):
#   ../shared/tools/gpu_wheels.sh
#   mkdir -p .carry/data/preferences/hh_rlhf && cp -r ../shared/data/{english_classics,gsm8k} .carry/data/ &&
#   cp ../shared/data/preferences/hh_rlhf/harmless-base-test.jsonl.gz .carry/data/preferences/hh_rlhf/
#   mkdir -p .carry/data/images && cp -r ../shared/data/images/mnist_5k .carry/data/images/   # atp_mnist tables
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -d .whl ] && ! python3 -c "import grain, ml_collections" 2>/dev/null && [ ! -d /tmp/site/grain ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
if [ -d .carry/data ] && [ ! -e ../shared/data ]; then
  mkdir -p ../shared && ln -sfn "$PWD/.carry/data" ../shared/data
fi
out="${OUT:?set OUT to the folder whose files come back}"
python3 -c "from shared.sweep.provenance import source_hash; print('source', source_hash())"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader || true
python3 -m shared.sweep.campaign --campaign=experiments/campaign.py --work_root=runs/campaign \
  --bundle_dir="$out" --results_dir="$out" --bundle_max_mb=45 "$@"
ls -la "$out"

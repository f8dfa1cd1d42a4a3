#!/usr/bin/env bash
# Runs `python -m shared.launch ARGS --distributed` on every worker of a Cloud TPU pod slice at once.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: tpu_configs/launch_pod.sh TPU_NAME ZONE [GCLOUD_OPTION ...] -- LAUNCH_ARGS ...

Runs the same launcher command on every worker (--worker=all) of TPU pod slice TPU_NAME, e.g.

  tpu_configs/launch_pod.sh my-v5p-64 us-east5-a --project=my-project -- \
      --config=experiments/clipo/grpo.py --mesh=v5p_64 --workdir=gs://my-bucket/clipo/run1

GCLOUD_OPTIONs (e.g. --project=P) are passed to `gcloud compute tpus tpu-vm ssh`.
--distributed is added, so each worker joins one JAX job (the TPU metadata tells them about each other).

Environment:
  REPO_DIR  the repo's path on the workers (default: this repo's path here)
  PYTHON    the interpreter on the workers (default: python3)

Before: put the same commit of the repo, installed with `pip install -e '.[tpu]'` (jax[tpu], and gcsfs for
gs:// workdirs), on every worker; README.md "Run on a TPU pod" has the commands.
Use a workdir every host can reach (gs://...): checkpoints are written by all processes, config.json,
metrics.jsonl, tb/ and summary.json by process 0. Re-running the same command resumes from its last checkpoint.
EOF
}

if [[ $# -lt 1 || "$1" == "-h" || "$1" == "--help" ]]; then usage; exit 0; fi
if [[ $# -lt 3 ]]; then usage >&2; exit 2; fi

tpu_name="$1"
zone="$2"
shift 2
gcloud_options=()
while [[ $# -gt 0 && "$1" != "--" ]]; do
  gcloud_options+=("$1")
  shift
done
if [[ $# -eq 0 ]]; then
  echo "error: put -- before the launcher's arguments" >&2
  usage >&2
  exit 2
fi
shift  # the --

repo_dir="${REPO_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
python="${PYTHON:-python3}"
# Quote every argument so the remote shell sees them exactly as given here.
remote_command="cd $(printf '%q' "$repo_dir") && $(printf '%q' "$python") -m shared.launch"
for arg in "$@"; do
  remote_command+=" $(printf '%q' "$arg")"
done
remote_command+=" --distributed"

echo "on every worker of $tpu_name ($zone): $remote_command" >&2
exec gcloud compute tpus tpu-vm ssh "$tpu_name" --zone="$zone" --worker=all ${gcloud_options[@]+"${gcloud_options[@]}"} \
  --command="$remote_command"

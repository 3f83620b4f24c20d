#!/usr/bin/env bash
# Carry a comparison's unfinished runs across a move to a new machine. experiments/runs/ is
# ignored by git and does not move with the project, but an untracked file that git does not
# ignore can: experiments/parked/ is such a place (never commit it; its runs are a few tens of MB).
#
#   experiments/park.sh NAME            stop NAME's training (SIGTERM: each run saves
#                                       checkpoints/last and exits) and copy every unfinished run
#                                       of experiments/runs/NAME/ (with its log) to
#                                       experiments/parked/NAME/
#   experiments/park.sh --restore NAME  copy the parked runs back into experiments/runs/NAME/,
#                                       where experiments/qknorm_vs_scaled_dot.sh resumes them
#
# --restore never overwrites a run directory that exists, and skips a run whose records are
# already committed (experiments/results/NAME/RUN/test.json); experiments/converged.sh calls it
# before it trains. Park again before each session ends: the parked copy is replaced.
#
# A second copy goes outside the work tree, to $QKGRAD_PARK_STORE (default
# /var/tmp/qkgrad-parked/NAME). A new session may get the same machine back with its work tree
# laid anew, and an untracked folder of more than a few tens of MB has not come back with a new
# checkout (the paper runs' 1.1 GB did not, 2026-12-07): the copy outside survives wherever the
# machine does. --restore takes each run from whichever copy is at the later step.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() { sed -n '5,11p' "$0"; exit 2; }
restore=0
if [ "${1:-}" = --restore ]; then restore=1; shift; fi
[ $# -eq 1 ] || usage
name=$1
case "$name" in */* | .* | "") echo "error: NAME '$name' must be a plain directory name" >&2; exit 2 ;; esac
root=experiments/runs/$name parked=experiments/parked/$name records=experiments/results/$name
store=${QKGRAD_PARK_STORE:-/var/tmp/qkgrad-parked}/$name

# last_step RUN: the step RUN resumes from (the "step" of checkpoints/last/trainer.safetensors'
# header), or "?" if it cannot be read.
last_step() {
  python3 - "$1/checkpoints/last/trainer.safetensors" <<'PY'
import json, struct, sys
try:
    with open(sys.argv[1], "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    print(header["__metadata__"]["step"])
except (OSError, ValueError, KeyError, struct.error):
    print("?")
PY
}

# step_number RUN: last_step as a number for comparing (-1 where unreadable).
step_number() {
  local step
  step=$(last_step "$1")
  [[ "$step" =~ ^[0-9]+$ ]] && echo "$step" || echo -1
}

if [ "$restore" = 1 ]; then
  if [ ! -d "$parked" ] && [ ! -d "$store" ]; then
    echo "== nothing parked for $name (neither $parked nor $store exists)"
    exit 0
  fi
  mkdir -p "$root"
  for base in $(ls -d "$parked"/*/ "$store"/*/ 2>/dev/null | xargs -rn1 basename | sort -u); do
    run=$parked/$base  # the copy at the later step
    if [ ! -d "$run" ] || { [ -d "$store/$base" ] && [ "$(step_number "$store/$base")" -gt "$(step_number "$run")" ]; }; then
      run=$store/$base
    fi
    if [ -f "$records/$base/test.json" ]; then
      echo "== $base: its records are committed ($records/$base); the parked copy is stale, not restored"
    elif [ -e "$root/$base" ]; then
      echo "== $base: $root/$base exists already; left as it is (the parked copy is not restored)"
    else
      cp -a "$run" "$root/$base"
      if [ -f "$run.log" ]; then cp "$run.log" "$root/$base.log"; fi
      echo "== $base: restored at step $(last_step "$root/$base") (from $run)"
    fi
  done
  exit 0
fi

[ -d "$root" ] || { echo "error: $root does not exist: nothing to park" >&2; exit 1; }

# Stop every qkgrad-translate process working in $root (the binary under any name that begins
# so: QKGRAD_TRANSLATE may be a copy such as qkgrad-translate-COMMIT), once each (a second signal ends the
# program at once, unsaved), and wait until none is left (a dev evaluation may take a minute
# before the trainer sees the signal); a driver script whose run failed exits rather than
# starting the next one.
pattern="qkgrad-translate[^ /]* .*--run $root/"
signalled=" "
for _ in $(seq 1 300); do
  pids=$(pgrep -f "$pattern" || true)
  [ -n "$pids" ] || break
  for pid in $pids; do
    case "$signalled" in *" $pid "*) continue ;; esac
    echo "== stopping process $pid: $(ps -o args= -p "$pid" | cut -c1-100)..."
    kill -TERM "$pid" 2>/dev/null || true
    signalled="$signalled$pid "
  done
  sleep 1
done
if pgrep -f "$pattern" >/dev/null; then
  echo "error: processes of $root still run 5 minutes after SIGTERM (pgrep -f '$pattern'); nothing copied" >&2
  exit 1
fi

mkdir -p "$parked"
for run in "$root"/*/; do
  run=${run%/}; base=${run##*/}
  [ -d "$run" ] || continue
  rm -rf "${parked:?}/$base" "$parked/$base.log"
  if [ -f "$run/test.json" ] || [ -f "$records/$base/test.json" ]; then continue; fi  # finished
  if [ ! -f "$run/checkpoints/last/model.safetensors" ]; then
    echo "== $base: no checkpoints/last yet; not parked (it starts again from step 0)"
    continue
  fi
  cp -a "$run" "$parked/$base"
  rm -f "$parked/$base/train.lock"
  if [ -f "$run.log" ]; then cp "$run.log" "$parked/$base.log"; fi
  echo "== $base: parked at step $(last_step "$run")"
done
# The README lists every parked run of NAME (one parked earlier and not restored stays).
rm -f "$parked/README.md"
kept=()
for run in "$parked"/*/; do
  run=${run%/}
  if [ -d "$run" ]; then kept+=("${run##*/} at step $(last_step "$run")"); fi
done
if [ ${#kept[@]} -eq 0 ]; then
  rmdir "$parked" 2>/dev/null || true
  echo "== nothing unfinished in $root"
  exit 0
fi

{
  echo "# Parked runs (not committed)"
  echo
  echo "Unfinished runs of experiments/runs/$name, parked at $(date -u '+%Y-%m-%d %H:%M') UTC on"
  echo "$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n1) after SIGTERM (each saved its checkpoints/last):"
  for k in "${kept[@]}"; do echo "- \`$name/${k% at step *}\` at step ${k##* at step }"; done
  echo
  echo "experiments/runs/ is ignored by git and is lost with each new machine; experiments/parked/ is"
  echo "untracked but not ignored, so that a later checkout may bring it back (if it is small: a"
  echo "second copy is in $store, outside the work tree, for a later session on this machine). To go on:"
  echo
  echo "    experiments/park.sh --restore $name    # experiments/converged.sh does this itself"
  echo
  echo "Never commit this folder; delete it once the runs' records are committed."
} > "$parked/README.md"
echo "== wrote $parked/README.md"
# The copy outside the work tree (see the top): the same folder, replaced whole.
if mkdir -p "$store" 2>/dev/null && rm -rf "${store:?}" && cp -a "$parked" "$store"; then
  echo "== and copied it to $store (outside the work tree)"
else
  echo "warning: could not copy $parked to $store; only the copy in the work tree is kept" >&2
fi

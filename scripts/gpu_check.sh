#!/usr/bin/env bash
# qkgrad's check on a GPU machine (docs/gpu-check.md): build with the CUDA backend, run the CUDA
# tests, qkgrad-gradcheck, the training-step benchmark against PyTorch on the GPU and a tiny
# translation run, all inside a fixed time budget, everything logged.
#
#   scripts/gpu_check.sh prepare   HERE (Debian 12 with apt and nvcc): builds the GPU programs
#                                  here (build-gpu/: -Dcuda=true for sm_90, no
#                                  -march=native, no MPI) and packs them with the Debian
#                                  libraries they load into .gpu-carry/bundle.tar.xz, so the
#                                  device spends no minutes compiling; downloads the Debian
#                                  packages a build there would need (OpenBLAS with OpenMP,
#                                  Catch2, SentencePiece, CLI11, nlohmann-json, zlib, pkgconf and
#                                  runtime libraries) into .gpu-carry/debs/ as the fallback; and
#                                  prints the exact device `run` call (carry: [".gpu-carry"]).
#                                  Copies ../shared/data/ted-gl-en (2.6 MB) into
#                                  .gpu-carry/data/ too, for the opt-in stage `paper`.
#                                  GPU_CHECK_NO_BUNDLE=1: the packages alone (build there).
#   scripts/gpu_check.sh run       THERE (works here too; the GPU stages then skip): unpacks the
#                                  bundle into /tmp/qkgrad-bundle and uses its programs when
#                                  they were built from this very source tree (a fingerprint of
#                                  every source file) and load there; else unpacks the packages
#                                  into /tmp/qkgrad-prefix, points pkg-config and the compiler
#                                  and loader paths at it and builds. Then the stages tests,
#                                  gradcheck, bench, attention, translate (and, when asked for,
#                                  tf32 and paper).
#
# Output of `run` goes to $OUT, or ./gpu-check-out/ when OUT is unset:
#   gpu-check.log   everything, with the elapsed time at every stage
#   summary.txt     one line per stage (also the end of the log)
#   cuda-tests.txt  build-gpu/tests/qkgrad-tests "[cuda]" (Catch2's console report, durations)
#   bench.jsonl     every raw benchmark result, one JSON line each (qkgrad-bench and PyTorch)
#   bench.md        the benchmark table (bench/compare_torch.py gpu), TF32 off for both
#   bench-tf32.md   the same with TF32 on for both (stage tf32; bench-tf32.jsonl)
#   attention.md    the fused attention kernel against PyTorch by length (bench/gpu_attention.py;
#                   attention.jsonl)
#   meson-log.txt   only when `meson setup` failed
#   paper-MODE-metrics.jsonl, paper-MODE.log  stage paper: each run's metrics and log
# Exit status of `run`: 0 when no stage failed (skipped stages do not fail), 1 otherwise.
#
# Settings of `run` (environment variables):
#   GPU_CHECK_BUDGET_S   the whole run ends within about this many seconds (default 530)
#   GPU_CHECK_CUDA       true (default) or false: -Dcuda for meson; false tests the prefix and
#                        the stages on a machine without nvcc
#   GPU_CHECK_DEVICE     cuda (default) or cpu: where bench and translate run (cpu: to test
#                        those stages without a GPU; use small GPU_CHECK_BENCH_FLAGS then)
#   GPU_CHECK_BENCH_FLAGS  the model and batch flags of the benchmark (default: the paper's base
#                        size, --layers 6 --d-model 512 --heads 8 --ffn 2048 --vocab 8000
#                        --batch 16 --src-len 64 --tgt-len 64 --steps 30 --warmup-steps 5)
#   GPU_CHECK_DEMO_FLAGS the same for the demo's size (default --layers 2 --d-model 256 --heads 4
#                        --ffn 1024 --vocab 4000 --batch 64 --src-len 32 --tgt-len 32, 30 + 5 steps)
#   GPU_CHECK_BENCH_S    seconds at most for each size's comparison (default 100)
#   GPU_CHECK_ROUNDS     rounds of qkgrad / PyTorch per attention (default 3)
#   GPU_CHECK_STAGES     comma-separated subset of tests,gradcheck,bench,attention,translate,tf32,
#                        paper (default tests,gradcheck,bench,attention,translate; env and the
#                        bundle or prefix and build always run; a build is incremental).
#                        tf32: the bench stage again with QKGRAD_CUDA_TF32=1 (TF32 on for both). paper: the paper's gl→en model (--preset paper, 4+4 × d 512)
#                        on TED gl→en, qknorm then scaled_dot, each for half the time left: its
#                        speed on the GPU and its first dev BLEU (issue 23); a second call on the
#                        warm machine after the check: GPU_CHECK_STAGES=paper.
#   GPU_CHECK_PAPER_DATA the corpus of stage paper (default .gpu-carry/data/ted-gl-en)
#   GPU_CHECK_PAPER_FLAGS its model flags (default --preset paper; --preset tiny tests the stage
#                        on a CPU)
#   GPU_CHECK_JOBS       ninja -j (default: every core); GPU_CHECK_NICE: nice level (default 0)
#   GPU_CHECK_PYTHON     the Python with PyTorch (default python3)
#   GPU_CHECK_PREFIX     where the packages are unpacked (default /tmp/qkgrad-prefix)
#   GPU_CHECK_BUILD      the build directory of a build there (default build-gpu)
#   GPU_CHECK_ATTENTION_FLAGS  flags of bench/gpu_attention.py (default: B 16, H 8, d 64,
#                        T 64,128,256,512,1024, both modes, 20 repetitions)
#   GPU_CHECK_NO_BUNDLE=1  ignore a carried bundle: build there
#   GPU_CHECK_ALL_DEBS=1 also unpack libgomp1/libgfortran5/libquadmath0 when the system has them
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
ROOT=$PWD

CARRY=.gpu-carry
DEBS=$CARRY/debs
MANIFEST=$CARRY/manifest.txt
TRIPLET=x86_64-linux-gnu

# The Debian 12 (bookworm) packages: what meson.build, tests/ and examples/ need (openblas via
# pkg-config, catch2, sentencepiece, CLI11, nlohmann-json, zlib), the pkg-config program, and the shared libraries those
# need beyond libc/libstdc++. The Debian 12 SentencePiece bundles its protobuf-lite (no
# libprotobuf package needed). The last three are fallbacks: unpacked only where the machine
# lacks them, so they never shadow the machine's own (newer) copies.
PACKAGES=(libopenblas0-openmp libopenblas-openmp-dev catch2 libsentencepiece0 libsentencepiece-dev libcli11-dev
          nlohmann-json3-dev zlib1g-dev pkgconf-bin libpkgconf3 libgfortran5 libquadmath0 libgomp1)
declare -A FALLBACK_SONAME=([libgfortran5]=libgfortran.so.5 [libquadmath0]=libquadmath.so.0
                            [libgomp1]=libgomp.so.1)
MAX_CARRY_MIB=48

# The bundle: the GPU programs built here, with the Debian libraries they load (not the C and
# C++ runtimes, which the GPU machine has newer, nor CUDA's, which must be the machine's own).
BUNDLE=$CARRY/bundle.tar.xz
BUNDLE_BUILD=build-gpu  # here; on the GPU machine build-gpu is where a fallback build goes
BUNDLE_TARGETS=(tests/qkgrad-tests-cuda examples/qkgrad-translate examples/qkgrad-gradcheck bench/qkgrad-bench
                bench/qkgrad-bench-attention)
BUNDLE_SYSTEM_LIBS='^(libc|libm|libstdc\+\+|libgcc_s|ld-linux-x86-64|libpthread|libdl|librt|libcuda|libcublas|libcublasLt|libnccl)\.so'

# A fingerprint of the source tree: every file the build reads. The bundle records the one it
# was built from; run uses the bundle only when the tree it was sent with has the same one.
source_fingerprint() {
  find meson.build meson_options.txt core backends ops nn io cli translation distributed examples bench tests \
       corpora tools -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.c' \
       -o -name meson.build -o -name meson_options.txt \) 2>/dev/null | LC_ALL=C sort | xargs cat | md5sum | cut -c1-16
}

usage() {
  sed -n "2,/^set -uo/p" "$0" | sed "\$d" | sed "s/^# \{0,1\}//"
}

die() {
  echo "gpu_check.sh: error: $*" >&2
  exit 2
}

# ==== prepare (here) ====

prepare() {
  command -v apt-get >/dev/null || die "prepare needs apt-get (Debian 12); run it on the development machine"
  local arch
  arch=$(dpkg --print-architecture)
  [ "$arch" = amd64 ] || die "this machine's Debian architecture is $arch; the GPU machine is amd64"
  grep -q 'VERSION_ID="12"' /etc/os-release 2>/dev/null ||
    echo "warning: this is not Debian 12: the packages are this system's, not bookworm's" >&2
  git check-ignore -q "$DEBS/x.deb" 2>/dev/null ||
    echo "warning: $CARRY/ is not ignored by git (.gitignore needs /$CARRY/): it would travel twice" >&2
  rm -rf "$DEBS"
  mkdir -p "$DEBS"
  echo "== downloading ${#PACKAGES[@]} packages into $DEBS/"
  if ! (cd "$DEBS" && apt-get download "${PACKAGES[@]}"); then
    echo "== apt-get download failed; apt-get update, then once more"
    apt-get update -q || die "apt-get update failed"
    (cd "$DEBS" && apt-get download "${PACKAGES[@]}") || die "apt-get download failed"
  fi
  local pkg deb missing=0
  for pkg in "${PACKAGES[@]}"; do
    deb=$(ls "$DEBS/${pkg}"_*.deb 2>/dev/null | head -n 1)
    if [ -z "$deb" ]; then
      echo "error: no .deb for $pkg" >&2
      missing=1
    fi
  done
  [ $missing -eq 0 ] || die "some packages were not downloaded"
  # The corpus of the opt-in stage paper (ignored by git with the rest of the carry).
  rm -rf "$CARRY/data"
  if [ -d ../shared/data/ted-gl-en ]; then
    mkdir -p "$CARRY/data"
    cp -r ../shared/data/ted-gl-en "$CARRY/data/"
    echo "== copied ../shared/data/ted-gl-en into $CARRY/data/ (stage paper)"
  else
    echo "== no ../shared/data/ted-gl-en: stage paper will have no corpus"
  fi

  # What the unpacked libraries and programs need from the C and C++ runtimes: the GPU
  # machine's glibc must be at least as new (run checks it).
  local scratch glibc glibcxx
  scratch=$(mktemp -d)
  for deb in "$DEBS"/*.deb; do dpkg -x "$deb" "$scratch"; done
  local elfs
  elfs=$(find "$scratch" -type f \( -name '*.so*' -o -path '*/bin/*' \) -exec sh -c \
         'head -c 4 "$1" | grep -q ELF && echo "$1"' _ {} \;)
  # shellcheck disable=SC2086
  glibc=$(objdump -T $elfs 2>/dev/null | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -Vu | tail -n 1)
  # shellcheck disable=SC2086
  glibcxx=$(objdump -T $elfs 2>/dev/null | grep -o 'GLIBCXX_[0-9][0-9.]*' | sed 's/GLIBCXX_//' | sort -Vu | tail -n 1)
  rm -rf "$scratch"
  {
    echo "# scripts/gpu_check.sh prepare, $(date -u '+%Y-%m-%d %H:%M UTC'), on $(. /etc/os-release; echo "$PRETTY_NAME")"
    echo "glibc_needed=${glibc:-unknown}"
    echo "glibcxx_needed=${glibcxx:-unknown}"
    for deb in "$DEBS"/*.deb; do
      printf '%s %s %s %s\n' "$(dpkg-deb -f "$deb" Package)" "$(dpkg-deb -f "$deb" Version)" \
        "$(stat -c %s "$deb")" "$(sha256sum "$deb" | cut -c1-16)"
    done
  } > "$MANIFEST"
  if [ "${GPU_CHECK_NO_BUNDLE:-0}" = 1 ]; then
    rm -f "$BUNDLE"
    echo "== GPU_CHECK_NO_BUNDLE=1: no bundle; the device machine builds from the packages"
  else
    prepare_bundle || die "the bundle could not be built (GPU_CHECK_NO_BUNDLE=1 skips it)"
  fi

  local kib mib tree_kib
  kib=$(du -sk "$CARRY" | cut -f1)
  mib=$(( (kib + 1023) / 1024 ))
  # What the device tool sends: tracked and untracked-but-not-ignored files, plus the carry.
  tree_kib=$(git ls-files -z --cached --others --exclude-standard 2>/dev/null |
             xargs -0 du -ck 2>/dev/null | tail -n 1 | cut -f1)
  echo
  cat "$MANIFEST"
  echo
  echo "== $CARRY/: $(ls "$DEBS" | wc -l) packages, $mib MiB (limit set here: $MAX_CARRY_MIB MiB); the"
  echo "   working tree that travels with it: about $(( (${tree_kib:-0} + kib + 1023) / 1024 )) MiB of the 64 MiB allowed"
  [ "$mib" -le "$MAX_CARRY_MIB" ] || die "$CARRY/ is larger than $MAX_CARRY_MIB MiB"
  echo "== the Debian 12 libraries need glibc >= ${glibc:-?} (and libstdc++ GLIBCXX_${glibcxx:-?}); run checks the machine's"
  echo
  echo "Now, on the device machine (one call; the script ends within GPU_CHECK_BUDGET_S = 530 s):"
  echo "  run(command=\"bash scripts/gpu_check.sh run\", carry=[\"$CARRY\"], timeout_s=600)"
}

# Builds the GPU programs here and packs them, with the libraries they load, into $BUNDLE.
prepare_bundle() {
  command -v nvcc >/dev/null || [ ! -x /usr/local/cuda/bin/nvcc ] || PATH=/usr/local/cuda/bin:$PATH
  command -v nvcc >/dev/null || { echo "error: no nvcc here: the bundle needs a CUDA build" >&2; return 1; }
  local options=(--buildtype=release -Dcuda=true -Dgpu_arch=h200 -Dwerror=false -Dmpi=disabled -Dnative_arch=false)
  echo "== building the bundle in $BUNDLE_BUILD/ (${options[*]})"
  if [ -f "$BUNDLE_BUILD/build.ninja" ]; then
    meson setup --reconfigure "$BUNDLE_BUILD" "${options[@]}" >/dev/null || return 1
  else
    meson setup "$BUNDLE_BUILD" "${options[@]}" >/dev/null || return 1
  fi
  ninja -C "$BUNDLE_BUILD" "${BUNDLE_TARGETS[@]}" || return 1
  local stage_dir target lib path
  stage_dir=$(mktemp -d)
  mkdir -p "$stage_dir/lib"
  for target in "${BUNDLE_TARGETS[@]}"; do
    mkdir -p "$stage_dir/$(dirname "$target")"
    strip --strip-debug -o "$stage_dir/$target" "$BUNDLE_BUILD/$target" || return 1
    # Every library it loads from the Debian system, by the name the loader asks for.
    while read -r lib path; do
      [[ $lib =~ $BUNDLE_SYSTEM_LIBS ]] && continue
      [ -f "$stage_dir/lib/$lib" ] || cp -L "$path" "$stage_dir/lib/$lib"
    done < <(ldd "$BUNDLE_BUILD/$target" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
  done
  { echo "fingerprint=$(source_fingerprint)"
    echo "built=$(date -u '+%Y-%m-%d %H:%M UTC') on $(. /etc/os-release; echo "$PRETTY_NAME"), $(nvcc --version | tail -n 1)"
    echo "commit=$(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "libraries=$(ls "$stage_dir/lib" | tr '\n' ' ')"
  } > "$stage_dir/bundle.txt"
  tar -C "$stage_dir" -cf - . | xz -T0 -6 > "$BUNDLE" || return 1
  rm -rf "$stage_dir"
  echo "== $BUNDLE: $(du -h "$BUNDLE" | cut -f1)"
  tar -xOJf "$BUNDLE" ./bundle.txt | sed 's/^/   /'
}

# ==== run (there) ====

# Elapsed time, stage headers and the per-stage result lines of the summary.
BUDGET=${GPU_CHECK_BUDGET_S:-530}
RESULTS=()
FAILED=0
stage() {
  printf '\n== %s  [%d:%02d elapsed, %d s left]\n' "$1" $((SECONDS / 60)) $((SECONDS % 60)) $((BUDGET - SECONDS))
}
result() {  # result ok|FAILED|skipped STAGE TEXT
  [ "$1" = FAILED ] && FAILED=1
  RESULTS+=("$(printf '%-9s %-7s %s  [at %d:%02d]' "$2" "$1" "$3" $((SECONDS / 60)) $((SECONDS % 60)))")
  echo "-- $2: $1 $3"
}
# limit CAP [MIN]: the timeout for a stage: CAP seconds, or less if the budget has less left
# (5 s kept back for the summary); prints nothing and fails when under MIN (default 10) is left.
limit() {
  local cap=$1 min=${2:-10} left=$((BUDGET - SECONDS - 5))
  [ "$left" -lt "$cap" ] && cap=$left
  [ "$cap" -lt "$min" ] && return 1
  echo "$cap"
}
want() { [[ ",${GPU_CHECK_STAGES:-tests,gradcheck,bench,attention,translate}," == *",$1,"* ]]; }
# try LIMIT COMMAND...: runs COMMAND under `timeout`, says so when the limit killed it.
try() {
  local t=$1 rc
  shift
  timeout --kill-after=10 "$t" "$@"
  rc=$?
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "!! timed out after $t s: $*"
  return $rc
}

# Is a shared library (by soname) available to the loader without our prefix?
system_has_lib() {
  ldconfig -p 2>/dev/null | grep -q "^[[:space:]]*$1 (.*x86-64" && return 0
  local d
  for d in /lib/$TRIPLET /usr/lib/$TRIPLET /lib64 /usr/lib64 /usr/local/lib; do
    [ -e "$d/$1" ] && return 0
  done
  return 1
}

# deb_extract DEB DIR: dpkg -x, or (no dpkg on the machine) Python reading the ar archive.
deb_extract() {
  if command -v dpkg-deb >/dev/null; then
    dpkg-deb -x "$1" "$2"
  else
    "$PY" - "$1" "$2" <<'EOF'
import io, sys, tarfile
deb, target = sys.argv[1], sys.argv[2]
data = open(deb, "rb").read()
assert data[:8] == b"!<arch>\n", "not a .deb (ar) archive"
pos = 8
while pos < len(data):
    name, size = data[pos:pos + 16].decode().strip().rstrip("/"), int(data[pos + 48:pos + 58])
    body = data[pos + 60:pos + 60 + size]
    if name.startswith("data.tar"):
        archive = tarfile.open(fileobj=io.BytesIO(body), mode="r:*")
        archive.extractall(target, **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))
        break
    pos += 60 + size + (size & 1)
else:
    sys.exit("no data.tar member in " + deb)
EOF
  fi
}

stage_env() {
  stage "env: the machine"
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); host $(uname -n); $(uname -srm)"
  (. /etc/os-release 2>/dev/null && echo "os: $PRETTY_NAME") || echo "os: unknown (no /etc/os-release)"
  echo "glibc: $(getconf GNU_LIBC_VERSION 2>/dev/null || echo unknown); cores: $(nproc); memory: $(free -g 2>/dev/null | awk '/^Mem:/ {print $2 " GiB"}')"
  echo "disk: $(df -h . 2>/dev/null | awk 'NR == 2 {print $4 " free on " $6}')"
  echo "repository: $(git rev-parse --short HEAD 2>/dev/null || echo 'no git metadata (a copy of the working tree)')"
  echo "sources (md5, to match a log with a working tree):"
  md5sum backends/cuda/*.cu backends/cuda/*.cuh backends/cuda/*.h bench/bench_train.cpp tests/test_cuda.cpp 2>/dev/null |
    awk '{printf "  %s %s\n", substr($1, 1, 12), $2}'

  # nvcc: on PATH, else the usual places; CUDA_PATH for meson's cuda dependency.
  if ! command -v nvcc >/dev/null; then
    local d
    for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
      [ -x "$d/nvcc" ] && { PATH=$d:$PATH; break; }
    done
  fi
  if command -v nvcc >/dev/null; then
    export CUDA_PATH=${CUDA_PATH:-${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}}
    echo "nvcc: $(command -v nvcc) (CUDA_PATH=$CUDA_PATH)"
    try 30 nvcc --version | tail -n 2
  else
    echo "nvcc: NOT FOUND"
  fi
  # meson and ninja: on PATH, else next to the Python (pip installs them there).
  local pybin
  pybin=$("$PY" -c 'import os, sys; print(os.path.dirname(sys.executable))' 2>/dev/null)
  if [ -n "$pybin" ] && { ! command -v meson >/dev/null || ! command -v ninja >/dev/null; }; then
    PATH=$PATH:$pybin
  fi
  echo "c++: $(command -v c++ g++ | head -n 1) $(c++ --version 2>/dev/null | head -n 1)"
  echo "meson: $(command -v meson) $(meson --version 2>/dev/null); ninja: $(command -v ninja) $(ninja --version 2>/dev/null)"
  echo "cmake: $(cmake --version 2>/dev/null | head -n 1); system pkg-config: $(command -v pkg-config || echo none)"
  echo "python: $(command -v "$PY") $("$PY" --version 2>&1)"
  local torch_says
  torch_says=$(try 60 "$PY" -c '
import torch
print("torch", torch.__version__, "CUDA", torch.version.cuda, "cuDNN", torch.backends.cudnn.version(),
      "GPU available:", torch.cuda.is_available())
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("torch sees:", p.name, f"{p.total_memory / 2**30:.0f} GiB,", p.multi_processor_count, "SMs, capability",
          f"{p.major}.{p.minor}")' 2>&1) || torch_says+=$'\n'"python/torch: could not import torch with $PY"
  echo "$torch_says"
  HAVE_GPU=0
  if command -v nvidia-smi >/dev/null; then
    try 30 nvidia-smi
    try 30 nvidia-smi -L 2>/dev/null | grep -q '^GPU ' && HAVE_GPU=1
  else
    echo "nvidia-smi: not found"
  fi
  grep -q 'GPU available: True' <<< "$torch_says" && HAVE_GPU=1
  local missing=""
  command -v meson >/dev/null || missing+=" meson"
  command -v ninja >/dev/null || missing+=" ninja"
  command -v c++ >/dev/null || command -v g++ >/dev/null || missing+=" c++"
  if [ "$CUDA" = true ] && ! command -v nvcc >/dev/null; then missing+=" nvcc"; fi
  if [ -n "$missing" ]; then
    result FAILED env "missing:$missing"
    return 1
  fi
  result ok env "GPU: $([ $HAVE_GPU = 1 ] && nvidia-smi -L 2>/dev/null | head -n 1 || echo none)"
}

# Where the machine keeps CUDA's runtime and cuBLAS (the bundle's programs load the machine's own):
# its toolkit, else the NVIDIA wheels next to PyTorch. Adds what it finds to LD_LIBRARY_PATH.
find_cuda_libs() {
  local dir dirs=("${CUDA_PATH:-/usr/local/cuda}/lib64" "${CUDA_PATH:-/usr/local/cuda}/targets/x86_64-linux/lib")
  local site
  site=$("$PY" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
  for dir in $site; do dirs+=("$dir"/nvidia/*/lib "$dir"/nvidia/cu13/lib); done
  for dir in "${dirs[@]}"; do
    if [ -e "$dir/libcublas.so.13" ] || [ -e "$dir/libcudart.so.13" ]; then
      LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$dir
    fi
  done
}

# The bundle prepared here: used when it was built from this source tree and its programs load.
stage_bundle() {
  stage "bundle: the programs built by prepare ($BUNDLE)"
  [ "${GPU_CHECK_NO_BUNDLE:-0}" = 1 ] && { result skipped bundle "GPU_CHECK_NO_BUNDLE=1: building here"; return 1; }
  [ "$CUDA" = true ] || { result skipped bundle "GPU_CHECK_CUDA=false: building here"; return 1; }
  [ -f "$BUNDLE" ] || { result skipped bundle "no $BUNDLE (prepare ran with GPU_CHECK_NO_BUNDLE=1?): building here"; return 1; }
  local dir=/tmp/qkgrad-bundle have want
  rm -rf "$dir"
  mkdir -p "$dir"
  tar -C "$dir" -xJf "$BUNDLE" || { result FAILED bundle "could not unpack $BUNDLE: building here"; return 1; }
  sed 's/^/  /' "$dir/bundle.txt"
  want=$(sed -n 's/^fingerprint=//p' "$dir/bundle.txt")
  have=$(source_fingerprint)
  if [ "$want" != "$have" ]; then
    result skipped bundle "built from other sources (fingerprint $want, this tree $have): run prepare again; building here"
    return 1
  fi
  local saved=${LD_LIBRARY_PATH:-}
  export LD_LIBRARY_PATH=$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  find_cuda_libs
  local target missing=""
  for target in "${BUNDLE_TARGETS[@]}"; do
    missing+=$(ldd "$dir/$target" 2>&1 | awk '/not found/ {printf " %s", $1}')
    "$dir/$target" --help >/dev/null 2>&1 || missing+=" ($target --help fails: $("$dir/$target" --help 2>&1 | head -n 1))"
  done
  echo "  LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  ldd "$dir/bench/qkgrad-bench" | grep -E 'openblas|dnnl|gomp|cuda|cublas|sentencepiece|not found' | sed 's/^[[:space:]]*/   /'
  if [ -n "$missing" ]; then
    export LD_LIBRARY_PATH=$saved
    result FAILED bundle "its programs do not load here:$missing; building here"
    return 1
  fi
  BUILD=$dir
  result ok bundle "built from this tree ($have); every program loads"
}

# The prefix: every .deb unpacked, .pc files and absolute links rewritten, the search paths set.
stage_prefix() {
  stage "prefix: Debian 12 packages from $DEBS/ into $PREFIX"
  local debs=("$DEBS"/*.deb)
  if [ ! -e "${debs[0]}" ]; then
    echo "no packages in $DEBS/: run 'scripts/gpu_check.sh prepare' on the development machine and carry $CARRY"
    result FAILED prefix "no $DEBS/*.deb (prepare was not run, or $CARRY was not carried); using the machine's own packages"
    return 1
  fi
  [ -f "$MANIFEST" ] && grep -v '^#' "$MANIFEST" | sed 's/^/  /'
  rm -rf "$PREFIX"
  mkdir -p "$PREFIX"
  local deb pkg soname unpacked=()
  for deb in "${debs[@]}"; do
    pkg=$(basename "$deb")
    pkg=${pkg%%_*}
    soname=${FALLBACK_SONAME[$pkg]:-}
    if [ -n "$soname" ] && [ "${GPU_CHECK_ALL_DEBS:-0}" != 1 ] && system_has_lib "$soname"; then
      echo "  $pkg: not unpacked, the machine has its own $soname"
      continue
    fi
    deb_extract "$deb" "$PREFIX" || { result FAILED prefix "could not unpack $deb"; return 1; }
    unpacked+=("$pkg")
  done
  echo "  unpacked: ${unpacked[*]}"

  # .pc files: Debian's say prefix=/usr, libdir=/usr/lib/..., -I/usr/include; point them here.
  local pc
  while IFS= read -r pc; do
    sed -i -E -e "s#(=|[[:space:]]|-I|-L)/usr/#\\1$PREFIX/usr/#g" -e "s#=/usr\$#=$PREFIX/usr#" "$pc"
  done < <(find "$PREFIX" -name '*.pc' -type f)
  # Absolute symbolic links (none expected: Debian's alternatives such as
  # /usr/lib/x86_64-linux-gnu/pkgconfig/openblas.pc -> /etc/alternatives/... are made by the
  # package's postinst, which dpkg -x never runs; below, pkg-config is pointed at the OpenMP
  # build's own openblas.pc in .../openblas-openmp/pkgconfig instead).
  local link target
  while IFS= read -r link; do
    target=$(readlink "$link")
    if [[ $target == /* ]]; then
      if [ -e "$PREFIX$target" ]; then
        ln -sfn "$PREFIX$target" "$link"
        echo "  link $link -> $PREFIX$target (was $target)"
      else
        echo "  warning: link $link -> $target points outside the prefix"
      fi
    fi
  done < <(find "$PREFIX" -type l)

  local lib=$PREFIX/usr/lib/$TRIPLET blas=$PREFIX/usr/lib/$TRIPLET/openblas-openmp
  local pcdirs=$blas/pkgconfig:$lib/pkgconfig:$PREFIX/usr/share/pkgconfig:$PREFIX/usr/lib/pkgconfig
  local ld_path=$blas:$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

  # Do the Debian 12 libraries load on this machine (glibc, libstdc++ new enough)? Tried before
  # anything is exported: when they do not, the build goes on with the machine's own packages.
  local needed have probe
  needed=$(sed -n 's/^glibc_needed=//p' "$MANIFEST" 2>/dev/null)
  have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
  echo "  glibc: the packages need >= ${needed:-?}, this machine has ${have:-?}"
  probe=ok
  "$PY" -c pass 2>/dev/null || echo "  warning: $PY does not run: cannot test whether the libraries load"
  "$PY" -c pass 2>/dev/null && probe=$(LD_LIBRARY_PATH=$ld_path "$PY" -c 'import ctypes, sys
for path in sys.argv[1:]:
    ctypes.CDLL(path)
print("ok")' "$blas/libopenblas.so.0" "$lib/libsentencepiece.so.0" "$lib/libsentencepiece_train.so.0" 2>&1 | tail -n 1)
  if [ "$probe" != ok ]; then
    echo "!! THE DEBIAN 12 LIBRARIES DO NOT LOAD ON THIS MACHINE: $probe"
    if [ -n "$needed" ] && [ -n "$have" ] &&
       [ "$(printf '%s\n%s\n' "$needed" "$have" | sort -V | head -n 1)" != "$needed" ]; then
      echo "!! its glibc $have is older than the $needed they need: carry packages of an older"
      echo "!! distribution, or build OpenBLAS and SentencePiece there from source"
    fi
    result FAILED prefix "the unpacked libraries do not load: $probe"
    return 1
  fi
  # pkg-config: the unpacked pkgconf when it runs here, else the machine's.
  local pkgconfig=""
  mkdir -p "$PREFIX/bin"
  if LD_LIBRARY_PATH=$ld_path "$PREFIX/usr/bin/pkgconf" --version >/dev/null 2>&1; then
    ln -sfn ../usr/bin/pkgconf "$PREFIX/bin/pkg-config"
    pkgconfig=$PREFIX/bin/pkg-config
  elif command -v pkg-config >/dev/null; then
    echo "  warning: the unpacked pkgconf does not run: $(LD_LIBRARY_PATH=$ld_path "$PREFIX/usr/bin/pkgconf" --version 2>&1 | head -n 1)"
    pkgconfig=$(command -v pkg-config)
  else
    echo "  the unpacked pkgconf does not run here and the machine has no pkg-config:"
    LD_LIBRARY_PATH=$ld_path "$PREFIX/usr/bin/pkgconf" --version 2>&1 | head -n 3
    result FAILED prefix "no working pkg-config"
    return 1
  fi

  export LD_LIBRARY_PATH=$ld_path
  export LIBRARY_PATH=$blas:$lib${LIBRARY_PATH:+:$LIBRARY_PATH}
  export CPATH=$PREFIX/usr/include:$PREFIX/usr/include/$TRIPLET/openblas-openmp${CPATH:+:$CPATH}
  # Only the prefix: the build must use these packages, not whatever the machine has.
  export PKG_CONFIG_PATH=$pcdirs PKG_CONFIG_LIBDIR=$pcdirs PKG_CONFIG=$pkgconfig
  [ "$pkgconfig" = "$PREFIX/bin/pkg-config" ] && export PATH=$PREFIX/bin:$PATH
  echo "  LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  echo "  LIBRARY_PATH=$LIBRARY_PATH"
  echo "  CPATH=$CPATH"
  echo "  PKG_CONFIG_PATH=PKG_CONFIG_LIBDIR=$pcdirs"
  echo "  PKG_CONFIG=$PKG_CONFIG (pkgconf $("$PKG_CONFIG" --version))"
  # (pkgconf leaves out the -I and -L directories that CPATH and LIBRARY_PATH already name.)
  local name
  for name in openblas catch2 sentencepiece CLI11 nlohmann_json zlib; do
    echo "  pkg-config $name: $("$PKG_CONFIG" --modversion $name 2>&1) | $("$PKG_CONFIG" --cflags --libs $name 2>&1)"
  done
  result ok prefix "${#unpacked[@]} packages unpacked; they load (glibc ${have:-?} >= ${needed:-?})"
}

stage_build() {
  stage "build: meson setup $BUILD -Dcuda=$CUDA -Dgpu_arch=h200 -Dwerror=false -Dmpi=disabled; ninja -j $JOBS"
  local t options=(-Dcuda="$CUDA" -Dgpu_arch=h200 -Dwerror=false -Dmpi=disabled)
  t=$(limit 150 30) || { result FAILED build "no time left to configure"; return 1; }
  local setup=(meson setup "$BUILD" "${options[@]}")
  [ -f "$BUILD/build.ninja" ] && setup=(meson setup --reconfigure "$BUILD" "${options[@]}")
  if ! try "$t" nice -n "$NICE" "${setup[@]}"; then
    cp "$BUILD/meson-logs/meson-log.txt" "$OUTDIR/meson-log.txt" 2>/dev/null
    result FAILED build "meson setup failed (meson-log.txt)"
    return 1
  fi
  # Where the dependencies come from (the prefix, if the packages were used).
  echo "-- dependencies in $BUILD/build.ninja:"
  grep -oE "(-I|-L)?${PREFIX}[^ \"']*" "$BUILD/build.ninja" | sort -u | sed 's/^/   /' | head -n 20
  # Whatever the budget allows, less 3 minutes for the tests, the benchmark and the translation.
  t=$(limit $((BUDGET - SECONDS - 180)) 30) || { result FAILED build "no time left to compile"; return 1; }
  local start=$SECONDS
  try "$t" nice -n "$NICE" ninja -C "$BUILD" -k 0 -j "$JOBS"
  local rc=$?
  local exe missing=()
  for exe in tests/qkgrad-tests examples/qkgrad-gradcheck bench/qkgrad-bench bench/qkgrad-bench-attention \
             examples/qkgrad-translate; do
    [ -x "$BUILD/$exe" ] || missing+=("$exe")
  done
  if [ -x "$BUILD/bench/qkgrad-bench" ]; then
    echo "-- shared libraries of $BUILD/bench/qkgrad-bench:"
    ldd "$BUILD/bench/qkgrad-bench" | grep -E 'openblas|gomp|gfortran|cuda|cublas|sentencepiece|not found' | sed 's/^[[:space:]]*/   /'
  fi
  if [ $rc -ne 0 ]; then
    result FAILED build "ninja exit status $rc after $((SECONDS - start)) s; not built: ${missing[*]:-none}"
    [ ${#missing[@]} -lt 5 ] || return 1
    return 0  # -k 0: whatever did build is still checked below
  fi
  result ok build "built in $((SECONDS - start)) s"
}

# Each "[cuda]" test case in a process of its own: a kernel that faults breaks its CUDA context,
# and every case after it in the same process would fail too. A failing case runs once more with
# CUDA_LAUNCH_BLOCKING=1 (the error then surfaces at the launch that caused it), under
# compute-sanitizer's memcheck where the machine has it. All of it goes to cuda-tests.txt.
stage_tests() {
  # The bundle has the GPU's test files alone (qkgrad-tests-cuda); a build here has them all.
  local exe=$BUILD/tests/qkgrad-tests-cuda report=$OUTDIR/cuda-tests.txt
  [ -x "$exe" ] || exe=$BUILD/tests/qkgrad-tests
  stage "tests: $exe \"[cuda]\", one process per test case"
  [ -x "$exe" ] || { result FAILED tests "not built"; return; }
  local t
  t=$(limit 200 20) || { result skipped tests "no time left"; return; }
  local names name spec rc left deadline=$((SECONDS + t)) failed=() passed=0 start=$SECONDS
  mapfile -t names < <("$exe" "[cuda]" --list-test-names-only 2>&1 | grep -v '^[[:space:]]*$')
  : > "$report"
  for name in "${names[@]}"; do
    left=$((deadline - SECONDS))
    if [ "$left" -lt 5 ]; then
      failed+=("$name (not run: no time left)")
      continue
    fi
    spec=$(printf '%s' "$name" | sed 's/[][\\,]/\\&/g')  # Catch2's test spec: escape , [ ] and \
    echo "######## $name" >> "$report"
    try $((left < 100 ? left : 100)) "$exe" "$spec" --use-colour no -d yes >> "$report" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
      passed=$((passed + 1))
      echo "  ok      $name"
    else
      failed+=("$name")
      echo "  FAILED  $name (exit status $rc)"
    fi
  done
  local sanitizer=""
  command -v compute-sanitizer >/dev/null && sanitizer="compute-sanitizer --tool memcheck --print-limit 20"
  local rerun
  for rerun in "${failed[@]:0:3}"; do
    [[ $rerun == *"(not run"* ]] && continue
    left=$(limit 45 10) || break
    spec=$(printf '%s' "$rerun" | sed 's/[][\\,]/\\&/g')
    echo "######## RERUN with CUDA_LAUNCH_BLOCKING=1${sanitizer:+ under $sanitizer}: $rerun" >> "$report"
    # shellcheck disable=SC2086
    CUDA_LAUNCH_BLOCKING=1 try "$left" $sanitizer "$exe" "$spec" --use-colour no -d yes >> "$report" 2>&1
    echo "######## (exit status $?)" >> "$report"
  done
  grep -E "^(FAILED|[^ ]*\.(cpp|cu|h):[0-9]+: FAILED|  [A-Z_]+\(|========= )|error" "$report" | head -n 60
  local summary="${passed} of ${#names[@]} test cases passed in $((SECONDS - start)) s"
  if [ ${#failed[@]} -eq 0 ] && [ ${#names[@]} -gt 0 ]; then
    result ok tests "$summary"
  else
    result FAILED tests "$summary; failed: $(printf '%s; ' "${failed[@]}" | cut -c1-600)see cuda-tests.txt"
  fi
}

stage_gradcheck() {
  stage "gradcheck: $BUILD/examples/qkgrad-gradcheck (CPU)"
  [ -x "$BUILD/examples/qkgrad-gradcheck" ] || { result FAILED gradcheck "not built"; return; }
  local t out rc
  t=$(limit 60 10) || { result skipped gradcheck "no time left"; return; }
  out=$(try "$t" "$BUILD/examples/qkgrad-gradcheck" 2>&1)
  rc=$?
  echo "$out" | grep -v ' PASS$'
  local pass fail
  pass=$(grep -c ' PASS$' <<< "$out")
  fail=$(grep -c ' FAIL$' <<< "$out")
  if [ $rc -eq 0 ]; then
    result ok gradcheck "$pass ops PASS"
  else
    result FAILED gradcheck "exit status $rc: $pass PASS, $fail FAIL"
  fi
}

# Can qkgrad run on $DEVICE here? Prints why not.
device_ready() {
  if [ "$DEVICE" = cuda ]; then
    [ "$CUDA" = true ] || { echo "built with -Dcuda=false"; return 1; }
    [ "$HAVE_GPU" = 1 ] || { echo "no GPU on this machine"; return 1; }
  fi
  return 0
}

# bench_config NAME FLAGS OUTFILE CAP: compare_torch.py gpu for one model size, at most CAP s.
bench_config() {
  # A run took 2 s (qkgrad) and 13-16 s (PyTorch, mostly its import) on the H200 on 2026-12-04:
  # each may take 30 s, and none starts in the last 35 s, so the table is always printed.
  local name=$1 flags=$2 out=$3 cap=$4 t per_run=30
  t=$(limit "$cap" 45) || { echo "-- $name: no time left"; return 124; }
  echo "-- $name ($flags), TF32 $([ "${QKGRAD_CUDA_TF32:-0}" = 1 ] && echo on || echo off) for both, at most $t s"
  # shellcheck disable=SC2086
  try "$t" "$PY" bench/compare_torch.py gpu --device "$DEVICE" --qkgrad "$BUILD/bench/qkgrad-bench" \
    $flags --rounds "$ROUNDS" --attn qknorm,scaled_dot --timeout "$per_run" \
    --budget $((t - per_run - 5)) --jsonl "${out%.md}.jsonl" >> "$out"
}

# The training step against PyTorch's on the GPU, TF32 as QKGRAD_CUDA_TF32 says: the paper's base
# size (BENCH_FLAGS) into OUTFILE, then the demo's size (DEMO_FLAGS) below it.
stage_bench() {
  local name=$1 out=$OUTDIR/$2
  stage "$name: qkgrad-bench and PyTorch, --device $DEVICE, alternating, $ROUNDS rounds per attention"
  local why
  why=$(device_ready) || { result skipped "$name" "$why"; return; }
  [ -x "$BUILD/bench/qkgrad-bench" ] || { result FAILED "$name" "qkgrad-bench not built"; return; }
  if ! "$BUILD/bench/qkgrad-bench" --help 2>&1 | grep -q -- '--device'; then
    echo "!! qkgrad-bench HAS NO --device FLAG: bench/bench_train.cpp cannot run on the GPU yet;"
    echo "!! only PyTorch is timed below"
  fi
  rm -f "$out" "${out%.md}.jsonl"
  local rc=0
  bench_config "base size" "$BENCH_FLAGS" "$out" "$BENCH_S" || rc=$?
  echo >> "$out"
  bench_config "demo size" "$DEMO_FLAGS" "$out" "$BENCH_S" || rc=$?
  echo
  cat "$out"
  local ratios
  ratios=$(awk -F'|' '/^\| (qknorm|scaled_dot) \|/ {gsub(/ /, "", $2); gsub(/ /, "", $8); printf "%s %s ", $2, $8}' "$out")
  if [ $rc -eq 0 ]; then
    result ok "$name" "PyTorch time / qkgrad time (base, then demo): ${ratios:-?}($(basename "$out"))"
  else
    result FAILED "$name" "exit status $rc; ${ratios:+PyTorch time / qkgrad time: $ratios}see $(basename "$out") and the log"
  fi
}

# The fused attention kernel against PyTorch's by length (bench/gpu_attention.py).
stage_attention() {
  stage "attention: qkgrad-bench-attention --device $DEVICE against PyTorch, T = 64 … 1024"
  local why t
  why=$(device_ready) || { result skipped attention "$why"; return; }
  [ "$DEVICE" = cuda ] || { result skipped attention "needs --device cuda"; return; }
  [ -x "$BUILD/bench/qkgrad-bench-attention" ] || { result FAILED attention "qkgrad-bench-attention not built"; return; }
  t=$(limit 120 30) || { result skipped attention "no time left"; return; }
  # shellcheck disable=SC2086
  try "$t" "$PY" bench/gpu_attention.py --qkgrad "$BUILD/bench/qkgrad-bench-attention" $ATTENTION_FLAGS \
    --jsonl "$OUTDIR/attention.jsonl" > "$OUTDIR/attention.md"
  local rc=$?
  cat "$OUTDIR/attention.md"
  local ratios
  ratios=$(awk -F'|' '$4 + 0 == 1024 {gsub(/ /, "", $2); gsub(/ /, "", $3); gsub(/ /, "", $8); printf "%s/%s %s ", $2, $3, $8}' \
           "$OUTDIR/attention.md")
  if [ $rc -eq 0 ]; then
    result ok attention "PyTorch time / qkgrad time at T 1024: ${ratios:-?}(attention.md)"
  else
    result FAILED attention "exit status $rc; see attention.md and the log"
  fi
}

stage_translate() {
  stage "translate: qkgrad-translate train --preset tiny --device $DEVICE on a generated corpus"
  local why
  why=$(device_ready) || { result skipped translate "$why"; return; }
  local exe=$BUILD/examples/qkgrad-translate
  [ -x "$exe" ] || { result FAILED translate "qkgrad-translate not built"; return; }
  if ! "$exe" train --help 2>&1 | grep -q -- '--device'; then
    result skipped translate "qkgrad-translate train has no --device flag"
    return
  fi
  local t work=/tmp/qkgrad-gpu-translate
  t=$(limit 90 20) || { result skipped translate "no time left"; return; }
  rm -rf "$work"
  mkdir -p "$work/data"
  # 400 pairs of two number words (tests/cli_helpers.h's write_corpus): learnt in 200 steps on
  # the CPU (one evaluation, at the end, so that translate uses the final model).
  local split i es=(uno dos tres cuatro cinco) en=(one two three four five)
  for split in train dev test; do
    for ((i = 0; i < 400; i++)); do
      echo "${es[i % 5]} ${es[(i / 5) % 5]}" >> "$work/data/$split.es"
      echo "${en[i % 5]} ${en[(i / 5) % 5]}" >> "$work/data/$split.en"
    done
  done
  local start=$SECONDS
  if ! try "$t" "$exe" train --data "$work/data" --run "$work/run" --preset tiny --device "$DEVICE" \
       --vocab-size 30 --max-steps 200 --eval-every 200 --eval-sentences 20; then
    result FAILED translate "training failed after $((SECONDS - start)) s"
    return
  fi
  local trained=$((SECONDS - start)) out
  t=$(limit 30 5) || { result ok translate "trained 200 steps in $trained s (no time left to translate)"; return; }
  out=$(printf 'uno dos\ntres cuatro\ncinco uno\n' | try "$t" "$exe" translate --run "$work/run" --device "$DEVICE" 2>&1)
  local rc=$?
  echo "translations of 'uno dos', 'tres cuatro', 'cinco uno':"
  echo "$out" | sed 's/^/   /'
  if [ $rc -eq 0 ]; then
    result ok translate "trained 200 steps in $trained s; translated: $(echo "$out" | tr '\n' '/' | cut -c1-60)"
  else
    result FAILED translate "translate exit status $rc"
  fi
}

# The paper's gl→en model on the GPU, qknorm then scaled_dot with the same seed, each for half
# the time left (less a minute for the start and the summary): steps, tokens per second and the
# last dev BLEU per mode, and each run's metrics. Too short to converge: it measures what
# converging would cost.
stage_paper() {
  stage "paper: qkgrad-translate train --preset paper --device $DEVICE on TED gl→en, qknorm and scaled_dot"
  local why data=${GPU_CHECK_PAPER_DATA:-$CARRY/data/ted-gl-en}
  why=$(device_ready) || { result skipped paper "$why"; return; }
  local exe=$BUILD/examples/qkgrad-translate
  [ -x "$exe" ] || { result FAILED paper "qkgrad-translate not built"; return; }
  [ -f "$data/train.gl" ] || { result FAILED paper "no corpus at $data (scripts/gpu_check.sh prepare copies it)"; return; }
  local left=$((BUDGET - SECONDS - 60)) mode summary=""
  [ "$left" -ge 60 ] || { result skipped paper "no time left"; return; }
  local minutes
  # Each run's share, less about 35 s for SentencePiece, the last evaluation and the last save.
  minutes=$(awk -v s="$left" 'BEGIN { m = s / 2 / 60 - 0.6; printf "%.2f", m < 0.2 ? 0.2 : m }')
  for mode in qknorm scaled_dot; do
    local work=/tmp/qkgrad-gpu-paper-$mode t
    rm -rf "$work"
    t=$(limit $((left / 2 + 30)) 30) || break
    # shellcheck disable=SC2086
    try "$t" "$exe" train --data "$data" --src gl --tgt en --run "$work" --attn "$mode" --seed 1 \
      ${GPU_CHECK_PAPER_FLAGS:---preset paper} --device "$DEVICE" --bleu-tokenize none --max-minutes "$minutes" \
      --eval-every 400 --eval-sentences 50 --log-every 10 --save-every 100000 > "$OUTDIR/paper-$mode.log" 2>&1
    local rc=$?
    tail -n 4 "$OUTDIR/paper-$mode.log"
    [ -f "$work/metrics.jsonl" ] && cp "$work/metrics.jsonl" "$OUTDIR/paper-$mode-metrics.jsonl"
    summary+="$mode $("$PY" - "$work/metrics.jsonl" <<'PY' 2>/dev/null || echo 'no metrics'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
train = [r for r in rows if 'tokens_per_s' in r]
dev = [r for r in rows if 'dev_bleu' in r]
last = train[-1] if train else {}
print(f"{last.get('step', 0)} steps, epoch {last.get('epoch', 0)}, {last.get('tokens_per_s', 0):.0f} tok/s, "
      f"dev BLEU {dev[-1]['dev_bleu']:.2f}" if dev else f"{last.get('step', 0)} steps, "
      f"{last.get('tokens_per_s', 0):.0f} tok/s, no evaluation")
PY
)"
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && summary+=" (stopped by the time limit)"
    summary+="; "
  done
  if [ -f "$OUTDIR/paper-qknorm-metrics.jsonl" ] || [ -f "$OUTDIR/paper-scaled_dot-metrics.jsonl" ]; then
    result ok paper "${summary%; }"
  else
    result FAILED paper "no run wrote metrics (paper-*.log)"
  fi
}

run_all() {
  echo "scripts/gpu_check.sh run: budget $BUDGET s, -Dcuda=$CUDA, device $DEVICE, build $BUILD, prefix $PREFIX, output $OUTDIR"
  stage_env || true
  local built=0
  if stage_bundle; then
    built=1
  else
    if stage_prefix; then
      :
    else
      echo "!! continuing with the machine's own packages (the build may fail)"
    fi
    stage_build && built=1
  fi
  if [ $built = 1 ]; then
    want tests && stage_tests
    want gradcheck && stage_gradcheck
    want bench && stage_bench bench bench.md
    want attention && stage_attention
    want translate && stage_translate
    want tf32 && QKGRAD_CUDA_TF32=1 stage_bench tf32 bench-tf32.md
    want paper && stage_paper
  fi
  stage "summary"
  printf '%s\n' "${RESULTS[@]}" | tee "$OUTDIR/summary.txt"
  printf 'total %d:%02d; %s\n' $((SECONDS / 60)) $((SECONDS % 60)) \
    "$([ $FAILED -eq 0 ] && echo 'no stage failed' || echo 'SOME STAGE FAILED')" | tee -a "$OUTDIR/summary.txt"
  echo "files: $(cd "$OUTDIR" && ls | tr '\n' ' ')"
  return $FAILED
}

run() {
  PREFIX=${GPU_CHECK_PREFIX:-/tmp/qkgrad-prefix}
  BUILD=${GPU_CHECK_BUILD:-build-gpu}
  CUDA=${GPU_CHECK_CUDA:-true}
  DEVICE=${GPU_CHECK_DEVICE:-cuda}
  ROUNDS=${GPU_CHECK_ROUNDS:-3}
  JOBS=${GPU_CHECK_JOBS:-$(nproc)}
  NICE=${GPU_CHECK_NICE:-0}
  PY=${GPU_CHECK_PYTHON:-python3}
  BENCH_FLAGS=${GPU_CHECK_BENCH_FLAGS:---layers 6 --d-model 512 --heads 8 --ffn 2048 --vocab 8000 --batch 16 --src-len 64 --tgt-len 64 --steps 30 --warmup-steps 5}
  DEMO_FLAGS=${GPU_CHECK_DEMO_FLAGS:---layers 2 --d-model 256 --heads 4 --ffn 1024 --vocab 4000 --batch 64 --src-len 32 --tgt-len 32 --steps 30 --warmup-steps 5}
  BENCH_S=${GPU_CHECK_BENCH_S:-100}
  ATTENTION_FLAGS=${GPU_CHECK_ATTENTION_FLAGS:-}
  HAVE_GPU=0
  [[ $CUDA == true || $CUDA == false ]] || die "GPU_CHECK_CUDA must be true or false, got '$CUDA'"
  [[ $DEVICE == cuda || $DEVICE == cpu ]] || die "GPU_CHECK_DEVICE must be cuda or cpu, got '$DEVICE'"
  if [ -n "${OUT:-}" ]; then
    OUTDIR=$OUT
  else
    OUTDIR=$ROOT/gpu-check-out
    rm -rf "$OUTDIR"
  fi
  mkdir -p "$OUTDIR"
  export PYTHONUNBUFFERED=1
  run_all 2>&1 | tee -a "$OUTDIR/gpu-check.log"
  return "${PIPESTATUS[0]}"
}

case "${1:-}" in
  prepare) prepare ;;
  run) run ;;
  -h|--help|help) usage ;;
  *) usage >&2; exit 2 ;;
esac

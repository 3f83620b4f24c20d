# Shared by scripts/test.sh and scripts/demo.sh: install Debian packages, configure, build.
# Source it from the repository root.

# What a fresh Debian 12 machine needs to build and test qkgrad.
QKGRAD_PACKAGES=(g++ meson ninja-build pkg-config libopenblas-openmp-dev catch2 libsentencepiece-dev libcli11-dev nlohmann-json3-dev libdnnl-dev zlib1g-dev)

# Installs the packages that are missing (apt-get update first; sudo when not root).
ensure_packages() {
  local missing=() pkg
  for pkg in "${QKGRAD_PACKAGES[@]}" "$@"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
      echo "error: missing packages (${missing[*]}) and not root, and sudo is not available;" >&2
      echo "       install them with: apt-get install ${missing[*]}" >&2
      return 1
    fi
    sudo="sudo"
  fi
  echo "== installing: ${missing[*]}"
  $sudo apt-get update -q || return 1
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" || return 1
}

# clang with its sanitizer/libFuzzer runtime and its OpenMP runtime (separate packages of the
# same version): the sanitized suite and the fuzzers build with it.
ensure_clang() {
  ensure_packages clang || return 1
  local major
  major=$(clang++ -dumpversion | cut -d. -f1)
  ensure_packages "libclang-rt-${major}-dev" "libomp-${major}-dev"
}

# configure DIR [meson options...]: a release build directory, warnings are errors (unless the
# options say -Dwerror=false; later options override earlier ones, e.g. --buildtype).
configure() {
  local dir="$1" werror="--werror" arg
  shift
  for arg in "$@"; do
    [ "$arg" = "-Dwerror=false" ] && werror=""
  done
  if [ -f "$dir/build.ninja" ]; then
    meson setup --reconfigure "$dir" $werror "$@" >/dev/null
  else
    meson setup "$dir" --buildtype=release $werror "$@"
  fi
}

# configure_and_build DIR [meson options...]: configure, then build every target.
configure_and_build() {
  configure "$@" || return 1
  ninja -C "$1"
}

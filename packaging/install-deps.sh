#!/usr/bin/env bash
# Installs the Debian packages Starling needs to build, test and run its examples.
# Idempotent: packages already present are skipped, and apt-get is not called at all
# when everything is installed. Run as root (or with sudo available).
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config
  libopenmpi-dev openmpi-bin
  libdlpack-dev libgtest-dev googletest libbenchmark-dev
  swig python3-dev python3-numpy python3-pytest python3-torch python3-mpi4py
  python3-networkx python3-sklearn python3-matplotlib python3-tqdm
  python3-setuptools python3-wheel python3-pip python3-venv
  default-jdk-headless junit4 libhamcrest-java
  clang libclang-rt-14-dev  # the fuzz test: clang 14 and its libFuzzer/sanitizer runtimes
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}"

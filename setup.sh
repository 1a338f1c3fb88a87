#!/usr/bin/env bash
# Installs what fedcaf needs from Debian 12's packages (when run as root and
# something is missing) and builds everything into build/.
set -euo pipefail
cd "$(dirname "$0")"
packages=(g++ cmake ninja-build python3 python3-matplotlib python3-numpy
          libcaf-dev libtorch-dev libcapnp-dev capnproto libyaml-cpp-dev
          nlohmann-json3-dev libxxhash-dev zlib1g-dev doctest-dev
          libopenblas0-openmp libssl-dev openssl iproute2 procps
          dataset-fashion-mnist)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup.sh: missing packages: ${missing[*]} (run as root to install them)" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFEDCAF_WERROR=ON
cmake --build build -j "$(nproc)"

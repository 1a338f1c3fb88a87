#!/usr/bin/env bash
# Installs what fedcaf needs from Debian 12's packages (when run as root and
# something is missing) and builds everything into build/.
set -euo pipefail
cd "$(dirname "$0")"
packages=(g++ cmake ninja-build ccache python3 python3-matplotlib python3-numpy
          libcaf-dev libtorch-dev libcapnp-dev capnproto libyaml-cpp-dev
          nlohmann-json3-dev libxxhash-dev zlib1g-dev doctest-dev libzfp-dev
          libopenblas0-openmp libssl-dev openssl iproute2 procps
          dataset-fashion-mnist pybind11-dev python3-pybind11 python3-dev
          python3-torch python3-yaml libcli11-dev libspdlog-dev
          chromium dpkg-dev)
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
# configs/torchscript.yaml's model (a TorchScript CNN) and Fashion-MNIST as
# .npy tensor files, with Debian's python3 (python3-torch, python3-numpy).
py=/usr/bin/python3
[ -x "$py" ] || py=python3
"$py" examples/python/export_torchscript.py -o build/examples/cnn.pt
"$py" examples/python/export_tensors.py -o build/examples/fashion_mnist
# configs/server_python.yaml's initial model, written by the Python example.
"$py" examples/python/fashion_mnist.py --init build/examples/fashion_mnist_cnn.safetensors
"$py" examples/python/causal_lm_bf16.py --init build/examples/causal_lm_bf16.safetensors

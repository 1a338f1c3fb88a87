#!/usr/bin/env bash
# fedcaf simulate -c configs/torchscript.yaml: the exported CNN as a
# TorchScript file, Fashion-MNIST as .npy tensor files, trained by the C++
# trainer; the round's accuracy comes from the clients' federated
# evaluation. The model and tensor files are written here, into a
# temporary directory, with Debian's python3 (python3-torch, python3-numpy).
# Usage: torchscript_test.sh FEDCAF SOURCE_DIR
set -euo pipefail
fedcaf=$1
src=$2
py=/usr/bin/python3
[ -x "$py" ] || py=python3
if ! "$py" -c "import torch, numpy" 2>/dev/null; then
  echo "SKIP: $py has no torch or numpy (apt-get install python3-torch)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" "$src/examples/python/export_torchscript.py" -o "$tmp/cnn.pt"
"$py" "$src/examples/python/export_tensors.py" -o "$tmp/fmnist"
kw=data_configs.dataset_kwargs
cd "$src"
"$fedcaf" simulate -c configs/torchscript.yaml --report "$tmp/report.json" \
  --set "client_configs.model_configs.path=$tmp/cnn.pt" \
  --set "$kw.train_features=$tmp/fmnist/train_features.npy" \
  --set "$kw.train_labels=$tmp/fmnist/train_labels.npy" \
  --set "$kw.test_features=$tmp/fmnist/test_features.npy" \
  --set "$kw.test_labels=$tmp/fmnist/test_labels.npy"
# ACCURACY: rounds[-1].test_accuracy is the clients' federated evaluation
# (the server cannot run a TorchScript model), averaged by the server.
"$py" - "$tmp/report.json" <<'PY'
import json, sys
rounds = json.load(open(sys.argv[1]))["rounds"]
accuracy = rounds[-1].get("test_accuracy")
print(f"torchscript: {len(rounds)} rounds, final accuracy {accuracy}")
assert len(rounds) == 3, rounds
assert accuracy is not None and accuracy >= 0.85, accuracy
PY
# A model file that is not TorchScript is refused, naming the file.
echo "not a model" > "$tmp/bad.pt"
if "$fedcaf" simulate -c configs/torchscript.yaml \
     --set "client_configs.model_configs.path=$tmp/bad.pt" 2> "$tmp/err"; then
  echo "FAIL: a bad TorchScript file was accepted"; exit 1
fi
grep -q "bad.pt: LibTorch cannot load it as a TorchScript model" "$tmp/err"
echo "torchscript: ok"

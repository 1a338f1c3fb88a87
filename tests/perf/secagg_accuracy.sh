#!/usr/bin/env bash
# Secure aggregation's accuracy against plain FedAvg on real data: the
# default run (a small CNN on Fashion-MNIST, two clients, three rounds; its
# embedded config) with and without server_configs.secure_aggregation, the
# same seeds, in one process each. Prints both final test accuracies and
# their difference (the goal: within 0.01; SecAgg+'s quantization moves each
# element by at most n 2c / ((2^b - 1) W)).
#
#   tests/perf/secagg_accuracy.sh [FEDCAF] [more --set ...]
set -u
fedcaf=${1:-build/fedcaf}; shift || true
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for secure in false true; do
  timeout 1200 "$fedcaf" simulate \
    --set "server_configs.secure_aggregation.enabled=$secure" "$@" \
    --report "$out/$secure.json" > "$out/$secure.log" 2>&1 ||
    { echo "the run with secure_aggregation $secure failed:"; tail -5 "$out/$secure.log"; exit 1; }
done
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
acc = {s: json.load(open(f"{out}/{s}.json"))["final_test_accuracy"] for s in ("false", "true")}
d = abs(acc["true"] - acc["false"])
print(f"final test accuracy: plain {acc['false']:.4f}, secure {acc['true']:.4f}, "
      f"difference {d:.4f} (goal: at most 0.01)")
sys.exit(0 if d <= 0.01 else 1)
PY

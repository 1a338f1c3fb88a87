#!/usr/bin/env bash
# Many simulated clients in one process (configs/simulate_1000.yaml: CNN on
# a Dirichlet non-IID split of Fashion-MNIST, 10 clients sampled per round).
# Runs the same rounds (10 clients a round, 8 local steps each: the same
# work) with N = 10 and N = 1000 registered clients and
# prints rounds per minute and peak RSS of each, their ratios, and the
# memory each extra idle client costs (an idle client holds no model).
#
#   tests/perf/simulate_scale.sh [FEDCAF] [ROUNDS] [COUNTS]
#   tests/perf/simulate_scale.sh build/fedcaf 5 "10 1000"
set -eu
fedcaf=${1:-build/fedcaf}
rounds=${2:-5}
counts=${3:-"10 1000"}
src=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf "%6s %8s %12s %12s %14s\n" N rounds "rounds/min" "peak_MiB" "accuracy"
declare -A rpm rss
for n in $counts; do
  /usr/bin/time -f "%M" -o "$out/rss.$n" "$fedcaf" simulate \
    -c "$src/configs/simulate_1000.yaml" \
    --set server_configs.num_clients="$n" \
    --set data_configs.dataset_kwargs.num_clients="$n" \
    --set server_configs.num_global_epochs="$rounds" \
    --report "$out/report.$n.json" > "$out/log.$n" 2>&1
  read -r r a < <(/usr/bin/python3 - "$out/report.$n.json" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))
secs = sum(x["wall_seconds"] for x in rep["rounds"])
print(f'{60 * len(rep["rounds"]) / secs:.2f} {rep["rounds"][-1]["test_accuracy"]:.4f}')
PY
)
  rpm[$n]=$r
  rss[$n]=$(( $(cat "$out/rss.$n") / 1024 ))
  printf "%6s %8s %12s %12s %14s\n" "$n" "$rounds" "$r" "${rss[$n]}" "$a"
done
set -- $counts
if [ $# -ge 2 ]; then
  /usr/bin/python3 - "$1" "$2" "${rpm[$1]}" "${rpm[$2]}" "${rss[$1]}" "${rss[$2]}" <<'PY'
import sys
a, b = int(sys.argv[1]), int(sys.argv[2])
ra, rb, ma, mb = map(float, sys.argv[3:7])
print(f"rounds/min ratio N={b} / N={a}: {rb / ra:.2f}")
print(f"peak RSS ratio N={b} / N={a}: {mb / ma:.2f}")
print(f"per extra idle client: {(mb - ma) * 1024 / (b - a):.1f} KiB")
PY
fi

#!/usr/bin/env bash
# A population of simulated clients (docs/design.md, "A population of
# simulated clients"): `fedcaf simulate` of N clients (default 1,000,000),
# K a round (default 1,000), dummy trainer, 64 KiB model, flat and under 10
# simulated relays, and the same with N = 10,000 (the same K, the same
# work a round): rounds per minute and peak RSS of each, and what each
# client of the population costs: the difference of the peaks over the
# difference of the populations, in bytes.
#
#   tests/perf/simulate_million.sh [FEDCAF] [N] [K] [ROUNDS]
#   tests/perf/simulate_million.sh build/fedcaf 1000000 1000 10
set -eu
fedcaf=${1:-build/fedcaf}
n=${2:-1000000}
k=${3:-1000}
rounds=${4:-10}
small=10000
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cat > "$out/c.yaml" <<EOF
server_configs:
  num_clients: $n
  num_global_epochs: $rounds
  scheduler_kwargs: {clients_per_round: $k, seed: 7}
client_configs:
  train_configs: {trainer: dummy, add: 0.5}
  model_configs: {name: synthetic, num_tensors: 4, total_bytes: 65536, seed: 5}
EOF
# run CLIENTS RELAYS: prints "rounds_per_min peak_rss_bytes summoned"
run() {
  timeout 900 "$fedcaf" simulate -c "$out/c.yaml" \
    --set server_configs.num_clients="$1" \
    --set server_configs.simulated_relays="$2" \
    --report "$out/r.json" > /dev/null 2> "$out/err" ||
    { echo "simulate of $1 clients under $2 relays failed:" >&2; tail -3 "$out/err" >&2; exit 1; }
  python3 - "$out/r.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["status"] == "completed", r["status"]
ends = [x["ended_unix_s"] for x in r["rounds"]]
start = ends[0] - r["rounds"][0]["wall_seconds"]
print(f'{60 * len(ends) / (ends[-1] - start):.1f} {r["peak_rss_bytes"]} {r.get("summoned_clients", 0)}')
PY
}
printf "%-10s %9s %7s %11s %10s %10s\n" layout clients rounds rounds/min peak_MiB summoned
for relays in 0 10; do
  layout=flat; [ "$relays" -gt 0 ] && layout="$relays relays"
  read -r rpm_s rss_s sum_s < <(run "$small" "$relays")
  read -r rpm_n rss_n sum_n < <(run "$n" "$relays")
  for row in "$small $rpm_s $rss_s $sum_s" "$n $rpm_n $rss_n $sum_n"; do
    set -- $row
    printf "%-10s %9s %7s %11s %10d %10s\n" "$layout" "$1" "$rounds" "$2" $(( $3 / 1048576 )) "$4"
  done
  python3 -c "
a, b, ra, rb, pa, pb = $small, $n, $rss_s, $rss_n, $rpm_s, $rpm_n
print(f'$layout: {(rb - ra) / (b - a):.1f} bytes per client of the population; '
      f'N={b} / N={a}: peak RSS {rb / ra:.2f}, rounds/min {pb / pa:.2f}')"
done

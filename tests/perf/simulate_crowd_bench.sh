#!/usr/bin/env bash
# `fedcaf simulate` with a crowd and with a large model, this build against
# another (OLD), interleaved PAIRS times (a noisy machine drifts alike for
# both). Cases:
#   crowd  CLIENTS clients (default 2000), every one training every round,
#          under 4 simulated relays, 2 rounds, dummy trainer, 64 KiB model:
#          each round's seconds and the seconds from the last round line
#          to the process's exit (its teardown).
#   large  2 clients, 3 rounds, a synthetic model of MIB MiB (default 1024),
#          dummy trainer: seconds per round (rounds 2-3) and peak RSS.
# Prints each run, then this build's figures over OLD's (ratios).
#
#   OLD=path/to/old/fedcaf tests/perf/simulate_crowd_bench.sh build/fedcaf [CLIENTS] [MIB] [PAIRS]
set -u
new=$1; clients=${2:-2000}; mib=${3:-1024}; pairs=${4:-1}
old=${OLD:?set OLD to the other build\'s fedcaf}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
now_s() { date +%s.%N; }

cat > "$out/crowd.yaml" <<EOF
server_configs: {num_clients: $clients, num_global_epochs: 2, simulated_relays: 4}
client_configs:
  train_configs: {trainer: dummy, add: 0.5}
  model_configs: {name: synthetic, num_tensors: 4, total_bytes: 65536, seed: 5}
EOF
cat > "$out/large.yaml" <<EOF
server_configs: {num_clients: 2, num_global_epochs: 3}
client_configs:
  train_configs: {trainer: dummy, add: 0.5}
  model_configs: {name: synthetic, num_tensors: 8, total_bytes: $(( mib * 1048576 )), seed: 5}
EOF

# crowd BUILD: prints "round1_s round2_s teardown_s"
crowd() {
  (timeout 900 "$1" simulate -c "$out/crowd.yaml" 2> /dev/null; echo "exit $?") |
    while IFS= read -r line; do echo "$(now_s) $line"; done > "$out/crowd.out"
  awk '/ round 1\/2 / { r1 = $(NF-7) } / round 2\/2 / { r2 = $(NF-7); last = $1 }
       / exit / { printf "%s %s %.2f\n", r1, r2, $1 - last }' "$out/crowd.out"
}
# large BUILD: prints "s_per_round peak_rss_mib"
large() {
  timeout 900 "$1" simulate -c "$out/large.yaml" --report "$out/large.json" > /dev/null 2>&1
  python3 - "$out/large.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ends = [x["ended_unix_s"] for x in r["rounds"]]
print(f"{(ends[-1] - ends[0]) / (len(ends) - 1):.2f} {r['peak_rss_bytes'] / 2**20:.0f}")
PY
}

for p in $(seq "$pairs"); do
  for b in new old; do
    bin=$new; [ $b = old ] && bin=$old
    c=$(crowd "$bin"); l=$(large "$bin")
    echo "$b pair $p: crowd of $clients (round 1 s, round 2 s, teardown s): $c; large $mib MiB (s/round, peak RSS MiB): $l"
    echo "$b $c $l" >> "$out/all"
  done
done
awk '{ n[$1]++; for (i = 2; i <= 6; i++) s[$1, i] += $i }
  END {
    split("crowd round 1|crowd round 2|crowd teardown|large s/round|large peak RSS", name, "|")
    for (i = 2; i <= 6; i++)
      printf "%s: this build %.2f, old %.2f, ratio %.3f\n", name[i-1],
        s["new", i] / n["new"], s["old", i] / n["old"],
        (s["new", i] / n["new"]) / (s["old", i] / n["old"])
  }' "$out/all"

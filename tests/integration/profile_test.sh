#!/usr/bin/env bash
# `fedcaf profile` on a tiny matrix: every run succeeds, and the JSON, CSV,
# report and figures are written.
set -euo pipefail
fedcaf=$1; src=$2
. "$(dirname "$0")/lib.sh"
tmp=$out
cat > "$tmp/matrix.yaml" <<YAML
base: $src/configs/synthetic_dummy.yaml
sizes_mib: [8]
clients: [2]
chunking: [true, false]
memory_modes: [ram, disk]
rounds: 2
sample_ms: 10
timeout_s: 120
YAML
"$fedcaf" profile -c "$tmp/matrix.yaml" -o "$tmp/out" | tee "$tmp/stdout"
# On a pipe too, the summary table comes before the figures' line.
table=$(grep -n "^run  " "$tmp/stdout" | cut -d: -f1)
figs=$(grep -n "^figures in" "$tmp/stdout" | cut -d: -f1)
[ -n "$table" ] && [ -n "$figs" ] && [ "$table" -lt "$figs" ] ||
  { echo "FAIL: the summary table (line $table) is not before 'figures in' (line $figs)"; exit 1; }
test -s "$tmp/out/summary.csv" && test -s "$tmp/out/report.txt"
[ "$(grep -c ',true,' "$tmp/out/summary.csv")" -eq 4 ] # ok column, 4 runs
/usr/bin/python3 - "$tmp/out" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
runs = [json.loads(p.read_text()) for p in out.glob("*.json")]
assert len(runs) == 4, len(runs)
for r in runs:
    assert r["summary"]["ok"], r["summary"]
    for role in r["roles"]:
        assert role["peak_rss_bytes"] > 0 and len(role["timeline"]["t_s"]) > 0
        assert len(role["round_ends_s"]) == 2
figs = list((out / "figures").glob("*.png"))
assert len(figs) == 6, figs  # 4 timelines, peak memory, round time
print("1 passed, 0 failed")
PY

#!/usr/bin/env bash
# Metrics that survive: the report is written after every round, and SIGTERM
# after round 2 of 3 leaves a valid report of 2 rounds with "status":
# "interrupted" (and the --metrics file its events, ending "interrupted",
# and the --report-html page the same state); a --report or --report-html
# path that cannot be written is refused before the run starts.
set -u
fedcaf=$1
out=$(mktemp -d); pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$out"; }
trap cleanup EXIT

start=$(date +%s)
if "$fedcaf" simulate --report /nonexistent-dir/report.json > "$out/bad.log" 2>&1; then
  echo "FAIL: an unwritable --report path was accepted"; exit 1
fi
grep -q "cannot write the report to /nonexistent-dir/report.json" "$out/bad.log" ||
  { echo "FAIL: unclear refusal:"; cat "$out/bad.log"; exit 1; }
[ $(( $(date +%s) - start )) -le 5 ] || { echo "FAIL: refused only after the run"; exit 1; }
echo "an unwritable --report path is refused before the run: $(cat "$out/bad.log")"
if "$fedcaf" simulate --report-html /nonexistent-dir/run.html > "$out/bad.log" 2>&1; then
  echo "FAIL: an unwritable --report-html path was accepted"; exit 1
fi
grep -q "cannot write the HTML report to /nonexistent-dir/run.html" "$out/bad.log" ||
  { echo "FAIL: unclear refusal:"; cat "$out/bad.log"; exit 1; }
[ $(( $(date +%s) - start )) -le 10 ] || { echo "FAIL: refused only after the run"; exit 1; }
echo "and an unwritable --report-html path: $(cat "$out/bad.log")"

timeout 600 "$fedcaf" simulate --set client_configs.train_configs.mode=step \
  --set client_configs.train_configs.num_local_steps=100 \
  --report "$out/report.json" --metrics "$out/metrics.jsonl" \
  --report-html "$out/run.html" > "$out/run.log" 2>&1 &
pid=$!
rounds=0
for _ in $(seq 1 3000); do  # at most 300 s
  rounds=$(python3 -c "import json; print(len(json.load(open('$out/report.json'))['rounds']))" 2>/dev/null || echo 0)
  [ "$rounds" -ge 2 ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
[ "$rounds" -eq 2 ] || { echo "FAIL: saw $rounds rounds before the signal"; cat "$out/run.log"; exit 1; }
# One SIGTERM to fedcaf itself: timeout(1), signalled, would pass it on
# to its child and to its process group, and the second one means "stop
# at once" to fedcaf (seen as a flaky failure under load).
kill -TERM $(pgrep -P $pid)
rc=0; wait $pid || rc=$?; pid=
cat "$out/run.log"
[ $rc -ne 0 ] || { echo "FAIL: an interrupted run exited 0"; exit 1; }
python3 - "$out/report.json" "$out/metrics.jsonl" "$out/run.html" <<'PY'
import json, sys
events = [json.loads(line) for line in open(sys.argv[2])]
kinds = [e["event"] for e in events]
assert kinds.count("registered") == 2 and kinds.count("round") == 2, kinds
assert events[-1]["event"] == "end" and events[-1]["status"] == "interrupted", events[-1]
print("metrics file:", kinds)
r = json.load(open(sys.argv[1]))
assert r["status"] == "interrupted", r["status"]
assert len(r["rounds"]) == 2, len(r["rounds"])
assert r["schema_version"] == 2 and r["fedcaf_version"], r
assert r["aggregator"] == "FedAvgAggregator" and r["scheduler"] == "SyncScheduler"
assert [c["node"] for c in r["clients"]] == ["Client1", "Client2"], r.get("clients")
assert all(len(c["rounds"]) >= 2 for c in r["clients"]), r["clients"]
print("after SIGTERM: status", r["status"], "with", len(r["rounds"]), "rounds; failure:", r["failure"])
page = open(sys.argv[3]).read()
assert 'id="final-status">interrupted<' in page, "the HTML page is not the interrupted state"
assert page.count('<tr class="round">') == 2 and "<script" not in page
print("the --report-html page: interrupted, 2 rounds")
PY

#!/usr/bin/env bash
# The live view (--http) and the static page (--report-html) of a
# simulation whose clients evaluate each model (federated evaluation; the
# server does not):
# /metrics scraped during the run has counters that move, parses as
# Prometheus text, and its round under way is the rounds completed or the
# one after; requests other than a plain GET or HEAD of this host are
# refused. In a real headless browser (Debian's chromium, driven by
# live_view_browser.py) the page shows each client's phase mid-round, keeps
# the final state once the process has exited and says it is gone, and the
# static page shows the same final state. The screenshots go to the folder
# $FEDCAF_SCREENSHOTS (default: a new temporary folder, kept), their paths
# printed.
set -u
fedcaf=$1; python=${2:-/usr/bin/python3}
chromium=$(command -v chromium || true)
here=$(dirname "$0")
. "$here/lib.sh"
shots=${FEDCAF_SCREENSHOTS:-$(mktemp -d "${TMPDIR:-/tmp}/fedcaf-live-view.XXXXXX")}
mkdir -p "$shots"
port=$(free_port)
url="http://127.0.0.1:$port"
started=$SECONDS
timeout 600 "$fedcaf" simulate --http 127.0.0.1:$port \
  --set server_configs.num_global_epochs=2 \
  --set server_configs.evaluate=false \
  --set server_configs.federated_evaluation=true \
  --set client_configs.train_configs.mode=step \
  --set client_configs.train_configs.num_local_steps=60 \
  --report "$out/report.json" --report-html "$out/report.html" \
  > "$out/run.log" 2>&1 &
pid=$!; pids+=($pid)
scrape() { # the values of metrics $@ at $url/metrics, one line
  "$python" - "$url/metrics" "$@" <<'PY'
import sys, urllib.request
text = urllib.request.urlopen(sys.argv[1], timeout=5).read().decode()
families = {}
for line in text.splitlines():
    if line.startswith("# TYPE "):
        name = line.split()[2]
        assert name not in families, "family twice: " + name
        families[name] = []
    elif line and not line.startswith("#"):
        name = line.split("{")[0].split()[0]
        assert name in families and list(families)[-1] == name, "sample out of its family: " + line
        families[name].append(float(line.rsplit(" ", 1)[1]))
missing = [n for n in sys.argv[2:] if n not in families]
assert not missing, "no family " + ", ".join(missing)
print(" ".join(str(sum(families[n])) for n in sys.argv[2:]))
PY
}
first=""
for _ in $(seq 1 600); do  # up to 60 s for the first round to be under way
  first=$(scrape fedcaf_bytes_sent_total 2>/dev/null) && [ "${first%.*}" -gt 0 ] 2>/dev/null && break
  sleep 0.1
done
[ -n "$first" ] || { echo "FAIL: no /metrics"; cat "$out/run.log"; exit 1; }
browser=""
if [ -n "$chromium" ]; then  # it waits for round 2 itself, and for the end
  "$python" "$here/live_view_browser.py" --chromium "$chromium" --url "$url" \
    --report-html "$out/report.html" --report "$out/report.json" \
    --shots "$shots" --work "$out" > "$out/browser.log" 2>&1 &
  browser=$!; pids+=($browser)
fi
# What a stranger's request or another site's page gets: only GET and HEAD,
# no body, no Range, and only this host's name (DNS rebinding).
status_of() { "$python" - "$url" "$@" <<'PY'
import sys, urllib.request, urllib.error
url, method, path = sys.argv[1], sys.argv[2], sys.argv[3]
headers = dict(h.split(":", 1) for h in sys.argv[4:])
req = urllib.request.Request(url + path, method=method, headers=headers,
                             data=b"x" * 4096 if method == "POST" else None)
try:
    r = urllib.request.urlopen(req, timeout=5)
    print(r.status, r.headers.get("Content-Security-Policy", "-").split(";")[0])
except urllib.error.HTTPError as e:
    print(e.code, "-")
PY
}
for check in "405 POST /status" "405 DELETE /" "416 GET / Range:bytes=0-,0-,0-" \
             "421 GET /status Host:attacker.example" "200 GET /status Host:localhost" \
             "404 GET /../../etc/passwd"; do
  set -- $check
  want=$1; shift
  got=$(status_of "$@")
  [ "${got% *}" = "$want" ] || fail "$* answered $got, expected $want"
done
[ "$(status_of GET /)" = "200 default-src 'none'" ] || fail "/ without its Content-Security-Policy"
pass "refused: POST, DELETE, Range, a foreign Host; served: GET with Host localhost; / with a Content-Security-Policy"
families="fedcaf_train_loss fedcaf_test_loss fedcaf_round_seconds fedcaf_compression_ratio fedcaf_secure_aggregation fedcaf_secagg_phase fedcaf_dp_epsilon fedcaf_clients_in_phase"
scrape $families > /dev/null && pass "/metrics has $families" || fail "/metrics lacks one of $families"
rounds=0; ahead=0; later=$first; scrapes=0
for _ in $(seq 1 600); do  # every 0.5 s until the view is gone (at most 300 s)
  got=$(scrape fedcaf_round fedcaf_rounds_completed fedcaf_bytes_sent_total 2>/dev/null) || break
  read -r round rounds later <<< "$got"
  scrapes=$(( scrapes + 1 ))
  lead=$(( ${round%.*} - ${rounds%.*} ))
  [ $lead -ge 0 ] && [ $lead -le 1 ] || { fail "round $round under way, $rounds completed"; break; }
  [ $lead -eq 1 ] && ahead=$(( ahead + 1 ))
  sleep 0.5
done
echo "/metrics: bytes sent $first -> $later, rounds completed $rounds; the round under way was the one after the rounds completed in $ahead of $scrapes scrapes, else the last completed"
"$python" -c "import sys; a, b, r = map(float, sys.argv[1:]); sys.exit(0 if b > a and r >= 2 else 1)" \
  "$first" "$later" "$rounds" && pass "the counters moved" || fail "the counters did not move"
[ $ahead -gt 0 ] && [ $fails -eq 0 ] && pass "the round under way never ran ahead of the rounds completed by more than one" ||
  fail "no scrape saw a round under way"
wait $pid; rc=$?
elapsed=$(( SECONDS - started ))
[ $rc -eq 0 ] || { fail "the run exited $rc"; tail -20 "$out/run.log"; }
grep -q '"status": "completed"' "$out/report.json" && pass "the run completed in $elapsed s" ||
  fail "the report does not say completed"
if [ -z "$browser" ]; then
  [ $fails -eq 0 ] || finish
  echo "chromium is not installed: the browser checks are skipped"; exit 77
fi
wait $browser && pass "the browser's checks" || fail "the browser's checks"
cat "$out/browser.log"
finish

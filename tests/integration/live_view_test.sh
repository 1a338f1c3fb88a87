#!/usr/bin/env bash
# The live view (--http): /metrics scraped during a run has counters that
# move and parses as Prometheus text; the page, loaded in a real headless
# browser (Debian's chromium) while the run goes, shows the round and both
# clients; its screenshot is kept at BUILD/test-artifacts/live_view.png.
# Requests other than a plain GET or HEAD of this host are refused.
set -u
fedcaf=$1; build=$2; python=${3:-/usr/bin/python3}
chromium=$(command -v chromium || true)
. "$(dirname "$0")/lib.sh"
port=$(free_port)
url="http://127.0.0.1:$port"
timeout 600 "$fedcaf" simulate --http 127.0.0.1:$port \
  --set client_configs.train_configs.mode=step \
  --set client_configs.train_configs.num_local_steps=200 \
  --report "$out/report.json" > "$out/run.log" 2>&1 &
pid=$!; pids+=($pid)
scrape() { # the value of metric $1 at $url/metrics
  "$python" - "$url/metrics" "$1" <<'PY'
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
print(sum(families.get(sys.argv[2], [0])))
PY
}
first=""
for _ in $(seq 1 600); do  # up to 60 s for the first round to be under way
  first=$(scrape fedcaf_bytes_sent_total 2>/dev/null) && [ "${first%.*}" -gt 0 ] 2>/dev/null && break
  sleep 0.1
done
[ -n "$first" ] || { echo "FAIL: no /metrics"; cat "$out/run.log"; exit 1; }
rounds=0
for _ in $(seq 1 1200); do  # until a round is published (at most 120 s)
  rounds=$(scrape fedcaf_rounds_completed) || break
  [ "${rounds%.*}" -ge 1 ] && break
  sleep 0.1
done
later=$(scrape fedcaf_bytes_sent_total)
echo "/metrics: bytes sent $first -> $later, rounds completed $rounds"
"$python" -c "import sys; a, b, r = map(float, sys.argv[1:]); sys.exit(0 if b > a and r >= 1 else 1)" \
  "$first" "$later" "$rounds" || { echo "FAIL: the counters did not move"; exit 1; }
# What a stranger's request or another site's page gets: only GET and HEAD,
# no body, no Range, and only this host's name (DNS rebinding).
status_of() { "$python" - "$url" "$@" <<'PY'
import sys, urllib.request, urllib.error
url, method, path = sys.argv[1], sys.argv[2], sys.argv[3]
headers = dict(h.split(":", 1) for h in sys.argv[4:])
req = urllib.request.Request(url + path, method=method, headers=headers,
                             data=b"x" * 4096 if method == "POST" else None)
try:
    print(urllib.request.urlopen(req, timeout=5).status)
except urllib.error.HTTPError as e:
    print(e.code)
PY
}
for check in "405 POST /status" "405 DELETE /" "416 GET / Range:bytes=0-,0-,0-" \
             "421 GET /status Host:attacker.example" "200 GET /status Host:localhost" \
             "404 GET /../../etc/passwd"; do
  set -- $check
  want=$1; shift
  got=$(status_of "$@")
  [ "$got" = "$want" ] || { echo "FAIL: $* answered $got, expected $want"; exit 1; }
done
echo "refused: POST, DELETE, Range, a foreign Host; served: GET with Host localhost"
if [ -z "$chromium" ]; then
  echo "chromium is not installed: the browser check is skipped"; exit 77
fi
mkdir -p "$build/test-artifacts"
flags=(--headless --no-sandbox --disable-gpu --disable-dev-shm-usage
       --user-data-dir="$out/chrome" --virtual-time-budget=4000)
timeout 90 "$chromium" "${flags[@]}" --dump-dom "$url/" > "$out/dom.html" 2> "$out/chrome.log"
timeout 90 "$chromium" "${flags[@]}" --window-size=1000,900 \
  --screenshot="$build/test-artifacts/live_view.png" "$url/" >> "$out/chrome.log" 2>&1
"$python" - "$out/dom.html" "$build/test-artifacts/live_view.png" <<'PY'
import os, re, sys
dom = open(sys.argv[1]).read()
m = re.search(r'id="round">(\d+)<', dom)
assert m and int(m.group(1)) >= 1, "the page shows no round"
rows = re.findall(r'<tr class="client"><td>(Client\d)</td>', dom)
assert sorted(rows) == ["Client1", "Client2"], rows
assert os.path.getsize(sys.argv[2]) > 10000, "the screenshot is empty"
print(f"the page shows round {m.group(1)} and clients {rows}; screenshot {sys.argv[2]}")
PY
rc=$?
[ $rc -eq 0 ] || { tail -20 "$out/chrome.log"; exit 1; }

#!/usr/bin/env bash
# Connection mistakes are fast and say what is wrong, in one `fedcaf:` line:
# `fedcaf client` pointed at a closed port (gives up after
# comm_configs.stream_configs.connect_timeout_s, here 2 s, not after
# idle_timeout_s), at a host name that does not resolve (at once, naming
# the host), and at a fedcaf server's --http port (the live view answers
# its Hello "400 not HTTP"; the client refuses at once, naming the port
# kind). Each exits 1; the times are printed.
#
#   connection_errors_test.sh FEDCAF SOURCE_DIR
set -u
fedcaf=$1; src=$2
. "$(dirname "$0")/lib.sh"

# try NAME SECONDS PATTERN URI [ARGS...]: the client's one fedcaf: line
# matches PATTERN, within SECONDS.
try() {
  local name=$1 limit=$2 pattern=$3 uri=$4 rc=0; shift 4
  local t0; t0=$(date +%s.%N)
  timeout 60 "$fedcaf" client -c "$src/configs/client_1.yaml" \
    --set "comm_configs.grpc_configs.server_uri=$uri" "$@" > "$out/$name.log" 2>&1 || rc=$?
  local t1; t1=$(date +%s.%N)
  local took; took=$("$py" -c "print(f'{$t1 - $t0:.2f}')")
  local lines; lines=$(grep -c '^fedcaf: ' "$out/$name.log")
  if [ $rc -eq 1 ] && [ "$lines" -eq 1 ] && grep -Eq "^fedcaf: $pattern" "$out/$name.log" &&
     "$py" -c "import sys; sys.exit(0 if $took <= $limit else 1)"; then
    pass "$name: $took s: $(grep '^fedcaf: ' "$out/$name.log")"
  else
    fail "$name: exit $rc, $lines fedcaf: lines, $took s (at most $limit)"
    cat "$out/$name.log"
  fi
}
closed=$(free_port)
try closed_port 6 "disconnected: cannot reach the server at 127.0.0.1:$closed after 2 s \(Connection refused\)" \
  "127.0.0.1:$closed" --set comm_configs.stream_configs.connect_timeout_s=2
try unknown_host 1 "bad_config: unknown host 'no-such-host.invalid' \(.*\): check the host name" \
  "no-such-host.invalid:50051"
port=$(free_port); http=$(free_port)
timeout 60 "$fedcaf" server -c "$src/configs/synthetic_dummy.yaml" \
  --set "server_configs.comm_configs.grpc_configs.server_uri=127.0.0.1:$port" \
  --http "127.0.0.1:$http" > "$out/server.log" 2>&1 & pids+=($!)
wait_for "$out/server.log" "live view" 20 || wait_for "$out/server.log" "listening" 20 ||
  fail "the server did not start"
try http_port 1 "unsupported_version: the peer at 127.0.0.1:$http does not speak fedcaf: it answered 'HTTP/1.1 400 Bad Request' \(is server_uri a fedcaf server's port, not its --http one\?\)" \
  "127.0.0.1:$http"
finish

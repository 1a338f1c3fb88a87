#!/usr/bin/env bash
# A server and N clients as processes on this host.
#
#   deploy/run-local.sh N SERVER_CONFIG CLIENT_CONFIG...
#
# With N client configs, client i uses the i-th as it is. With one, it is a
# template: client i (1..N) runs it with client_id Client<i>, data partition
# i-1 of N. The server gets num_clients N. Logs and --report JSON of every
# process go to $LOG_DIR (default runs/local-<time>). Ctrl-C or TERM ends
# every process this script started. Exit code: the server's, else the
# first failing client's.
#   FEDCAF   the binary (default: build/fedcaf of this script's checkout,
#            else fedcaf on PATH, as for /usr/share/fedcaf/deploy)
#   FEDCAF_CLIENT_CMD  start each client as this command instead of
#            `fedcaf client` (e.g. `python3 examples/python/fashion_mnist.py`):
#            a command line as sh reads it, given the arguments fedcaf
#            client would get (-c CONFIG, and from a template the --set of
#            client_id, data_configs.dataset_kwargs.client_id and
#            num_clients; no --report) and, in its environment,
#            FEDCAF_CLIENT_ID=Client<i>, FEDCAF_PARTITION=i-1,
#            FEDCAF_NUM_PARTITIONS=N and FEDCAF_SERVER_URI (where the server
#            says it listens; clients start once it does). Its output goes
#            to client<i>.log; it writes no report.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR
. "$here/client-command.sh"
fedcaf=${FEDCAF:-$here/../build/fedcaf}
[ -n "${FEDCAF:-}" ] || [ -x "$fedcaf" ] || fedcaf=$(command -v fedcaf || echo fedcaf)
n=${1:?usage: run-local.sh N SERVER_CONFIG CLIENT_CONFIG...}
server_cfg=${2:?usage: run-local.sh N SERVER_CONFIG CLIENT_CONFIG...}
shift 2
[ $# -ge 1 ] || { echo "run-local.sh: give one client config, or N" >&2; exit 2; }
[ $# -eq 1 ] || [ $# -eq "$n" ] || { echo "run-local.sh: $# client configs for $n clients" >&2; exit 2; }
client_cfgs=("$@")
logs=${LOG_DIR:-runs/local-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$logs"

pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done; }
trap 'stop; exit 130' INT TERM

"$fedcaf" server -c "$server_cfg" --set server_configs.num_clients="$n" \
  --set data_configs.dataset_kwargs.num_clients="$n" \
  --report "$logs/server.json" > "$logs/server.log" 2>&1 &
server=$!; pids+=($server)
if [ -n "${FEDCAF_CLIENT_CMD:-}" ]; then
  uri=$(listen_address "$logs/server.log" "$server" 127.0.0.1) || {
    echo "run-local.sh: the server did not say where it listens; see $logs/server.log" >&2
    stop; wait "$server"; rc=$?; exit $(( rc ? rc : 1 ))
  }
fi
for i in $(seq 1 "$n"); do
  if [ ${#client_cfgs[@]} -eq 1 ]; then
    args=(-c "${client_cfgs[0]}" --set client_id=Client$i
          --set data_configs.dataset_kwargs.client_id=$((i - 1))
          --set data_configs.dataset_kwargs.num_clients="$n")
  else
    args=(-c "${client_cfgs[$((i - 1))]}")
  fi
  if [ -n "${FEDCAF_CLIENT_CMD:-}" ]; then
    client_command "Client$i" $((i - 1)) "$n" "$uri" "${args[@]}" \
      > "$logs/client$i.log" 2>&1 &
  else
    "$fedcaf" client "${args[@]}" --report "$logs/client$i.json" \
      > "$logs/client$i.log" 2>&1 &
  fi
  pids+=($!)
done
echo "server and $n clients started${FEDCAF_CLIENT_CMD:+ (as $FEDCAF_CLIENT_CMD)}; logs in $logs"
rc=0
wait "$server" || rc=$?
for p in "${pids[@]:1}"; do
  wait "$p" || { c=$?; [ $rc -eq 0 ] && rc=$c; }
done
tail -n 3 "$logs/server.log"
[ $rc -eq 0 ] && echo "run complete" || echo "run failed (exit $rc); see $logs"
exit $rc

#!/usr/bin/env bash
# A server, relays and clients on remote hosts, started over ssh: a flat run
# or a tree of aggregators, described in one file.
#
#   deploy/run-hosts.sh HOSTS_FILE
#
# HOSTS_FILE, one process per line ('#' starts a comment):
#   server HOST CONFIG [ARGS...]
#   relay  HOST CONFIG [ARGS...]    (fedcaf relay: its config names its parent)
#   client HOST CONFIG [ARGS...]
# e.g.
#   server node01 /shared/fedcaf/server.yaml
#   client node02 /shared/fedcaf/client.yaml --set client_id=Client1 --set data_configs.dataset_kwargs.client_id=0
#   client node03 /shared/fedcaf/client.yaml --set client_id=Client2 --set data_configs.dataset_kwargs.client_id=1
# or a tree (the root's server_configs.relays names RA and RB; each relay's
# comm_configs.grpc_configs.server_uri names its parent, and its
# server_configs.comm_configs.grpc_configs.server_uri where its children
# connect):
#   server hub    /shared/fedcaf/root.yaml
#   relay  siteA  /shared/fedcaf/relay.yaml --set client_id=RA --set comm_configs.grpc_configs.server_uri=hub:8080
#   relay  siteB  /shared/fedcaf/relay.yaml --set client_id=RB --set comm_configs.grpc_configs.server_uri=hub:8080
#   client a01    /shared/fedcaf/client.yaml --set comm_configs.grpc_configs.server_uri=siteA:8081 --set client_id=Client1
#   ...
# HOST `local` runs the line on this machine, without the remote shell
# (a whole tree on one host, or a mix).
#
# The binary and the configs (and certificates, datasets) must be present on
# each host at the paths given (a shared file system), or set COPY=1 to copy
# the binary and each line's config to the same paths first (scp). Each
# process's output comes back to $LOG_DIR/<role><n>.log and its --report to
# $LOG_DIR/<role><n>.json (server, relay1.., client1.., in the file's
# order). Ctrl-C or TERM stops the remote processes this
# script started, by their PIDs. Exit code: the server's, else the first
# failing client's.
#   SSH      the remote shell (default: ssh -o BatchMode=yes); any command
#            of the form `SSH HOST CMD...` works, e.g. `ip netns exec`
#   FEDCAF   the binary's path on the hosts (default: fedcaf)
#   COPY     1: copy binary and configs first (needs scp; default 0)
set -u
hosts_file=${1:?usage: run-hosts.sh HOSTS_FILE}
read -r -a ssh_cmd <<< "${SSH:-ssh -o BatchMode=yes}"
fedcaf=${FEDCAF:-fedcaf}
logs=${LOG_DIR:-runs/hosts-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$logs"

roles=(); hosts=(); names=(); remote_pids=(); local_pids=()
stop() {
  local i
  for i in "${!hosts[@]}"; do
    local pid
    pid=$(head -n 1 "$logs/${names[$i]}.pid" 2> /dev/null)
    [ -n "$pid" ] && on "${hosts[$i]}" kill "$pid" 2> /dev/null
  done
}
trap 'stop; exit 130' INT TERM

n_clients=0; n_relays=0
# on HOST CMD...: CMD over the remote shell, or here for HOST `local`.
on() {
  if [ "$1" = local ]; then shift; "$@"; else "${ssh_cmd[@]}" "$@"; fi
}
while read -r role host config rest; do
  case $role in ''|'#'*) continue ;; server|relay|client) ;; *)
    echo "run-hosts.sh: unknown role '$role' in $hosts_file" >&2; exit 2 ;;
  esac
  case $role in
    client) n_clients=$((n_clients + 1)); name=client$n_clients ;;
    relay) n_relays=$((n_relays + 1)); name=relay$n_relays ;;
    *) name=server ;;
  esac
  if [ "${COPY:-0}" = 1 ] && [ "$host" != local ]; then
    scp -q "$(command -v "$fedcaf" || echo "$fedcaf")" "$host:$fedcaf" &&
      scp -q "$config" "$host:$config" || { echo "copy to $host failed" >&2; exit 1; }
  fi
  report="/tmp/fedcaf-$$-$name.json"
  # The remote shell prints its PID first, then becomes fedcaf.
  on "$host" sh -c "echo \$\$; exec $fedcaf $role -c $config $rest --report $report" \
    > "$logs/$name.out" 2>&1 &
  local_pids+=($!); roles+=("$role"); hosts+=("$host"); names+=("$name")
  # Keep the PID line apart from the log.
  ( sleep 1; head -n 1 "$logs/$name.out" > "$logs/$name.pid" ) &
  [ "$role" = server ] && sleep 1 # let it listen; clients retry anyway
done < "$hosts_file"

rc=0
for i in "${!local_pids[@]}"; do
  wait "${local_pids[$i]}" || { c=$?; [ $rc -eq 0 ] && rc=$c; }
done
wait
for i in "${!names[@]}"; do
  tail -n +2 "$logs/${names[$i]}.out" > "$logs/${names[$i]}.log"
  rm -f "$logs/${names[$i]}.out" "$logs/${names[$i]}.pid"
  on "${hosts[$i]}" sh -c "cat /tmp/fedcaf-$$-${names[$i]}.json; rm -f /tmp/fedcaf-$$-${names[$i]}.json" \
    > "$logs/${names[$i]}.json" 2> /dev/null
done
[ $rc -eq 0 ] && echo "run complete; logs in $logs" || echo "run failed (exit $rc); see $logs"
exit $rc

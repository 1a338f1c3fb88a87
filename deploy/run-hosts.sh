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
#   command HOST COMMAND...         (a client started as COMMAND; below)
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
# Clients as any command (Python clients, say): a `command` line starts
# COMMAND on HOST as the next client: a command line as sh reads it there
# (quotes, NAME=VALUE before the program), e.g.
#   command a01 python3 /shared/train.py --epochs 2
# With FEDCAF_CLIENT_CMD set, every `client` line starts
# `FEDCAF_CLIENT_CMD -c CONFIG ARGS...` instead of `fedcaf client`. Either
# gets, in its environment, FEDCAF_CLIENT_ID=Client<n> and
# FEDCAF_PARTITION=n-1 (the n-th client or command line of the file),
# FEDCAF_NUM_PARTITIONS (how many such lines there are) and
# FEDCAF_SERVER_URI: where its parent listens, as the parent's log says
# (an IP 0.0.0.0 or :: becomes the parent line's HOST; HOST `local`,
# 127.0.0.1). Its parent is the nearest relay line above it, else the
# server line (for a `client` line, the comm_configs.grpc_configs.server_uri
# its ARGS set, where they do); the line waits until the parent listens.
# Without a server or relay line above it (a server started elsewhere), its
# FEDCAF_SERVER_URI is the one run-hosts.sh was given.
# Such a client writes no --report: clientN.log, no clientN.json.
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
#   FEDCAF_CLIENT_CMD  the command for `client` lines (above)
#   FEDCAF_SERVER_URI  host:port of a server not in HOSTS_FILE, for client
#            commands with no server or relay line above them (above)
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR
. "$here/client-command.sh"
hosts_file=${1:?usage: run-hosts.sh HOSTS_FILE}
read -r -a ssh_cmd <<< "${SSH:-ssh -o BatchMode=yes}"
fedcaf=${FEDCAF:-fedcaf}
logs=${LOG_DIR:-runs/hosts-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$logs"

roles=(); hosts=(); names=(); remote_pids=(); local_pids=(); reports=()
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
n_partitions=$(awk '$1 == "client" || $1 == "command" { n++ } END { print n + 0 }' "$hosts_file")
parent=-1 # the index of the nearest server or relay line above
# on HOST CMD...: CMD over the remote shell, or here for HOST `local`.
on() {
  if [ "$1" = local ]; then shift; "$@"; else "${ssh_cmd[@]}" "$@"; fi
}
# parent_address ARGS: FEDCAF_SERVER_URI for a client with these ARGS.
parent_address() {
  local set_uri
  set_uri=$(sed -nE 's/(^|.*[ =])comm_configs\.grpc_configs\.server_uri=([^ ]+).*/\2/p' <<< "$1")
  if [ -n "$set_uri" ]; then echo "$set_uri"; return 0; fi
  if [ "$parent" -lt 0 ]; then
    [ -n "${FEDCAF_SERVER_URI:-}" ] && { echo "$FEDCAF_SERVER_URI"; return 0; }
    echo "run-hosts.sh: a client command with no server or relay line above it in $hosts_file (or set FEDCAF_SERVER_URI)" >&2
    return 1
  fi
  local host=${hosts[$parent]}
  [ "$host" = local ] && host=127.0.0.1
  listen_address "$logs/${names[$parent]}.out" "${local_pids[$parent]}" "$host" ||
    { echo "run-hosts.sh: ${names[$parent]} did not say where it listens; see $logs/${names[$parent]}.out" >&2; return 1; }
}
while read -r role host config rest; do
  case $role in ''|'#'*) continue ;; server|relay|client|command) ;; *)
    echo "run-hosts.sh: unknown role '$role' in $hosts_file" >&2; exit 2 ;;
  esac
  case $role in
    client|command) n_clients=$((n_clients + 1)); name=client$n_clients ;;
    relay) n_relays=$((n_relays + 1)); name=relay$n_relays ;;
    *) name=server ;;
  esac
  if [ "${COPY:-0}" = 1 ] && [ "$host" != local ] && [ "$role" != command ]; then
    scp -q "$(command -v "$fedcaf" || echo "$fedcaf")" "$host:$fedcaf" &&
      scp -q "$config" "$host:$config" || { echo "copy to $host failed" >&2; exit 1; }
  fi
  report="/tmp/fedcaf-$$-$name.json"
  # The remote shell prints its PID first, then becomes fedcaf (or the
  # client's command).
  script="echo \$\$; exec $fedcaf $role -c $config $rest --report $report"
  case $role in
    command) command_line="$config $rest"; args="" ;;
    client) command_line=${FEDCAF_CLIENT_CMD:+$FEDCAF_CLIENT_CMD -c $config $rest}; args=$rest ;;
    *) command_line="" ;;
  esac
  [ "$role" = command ] && [ -z "$config" ] &&
    { echo "run-hosts.sh: a command line without its COMMAND in $hosts_file" >&2; sleep 1; stop; exit 2; }
  if [ -n "$command_line" ]; then
    # stop finds the PIDs of those started once their PID lines are in.
    uri=$(parent_address "$args") || { sleep 1; stop; exit 1; }
    script="echo \$\$; export FEDCAF_CLIENT_ID=Client$n_clients"
    script+=" FEDCAF_PARTITION=$((n_clients - 1)) FEDCAF_NUM_PARTITIONS=$n_partitions"
    script+=" FEDCAF_SERVER_URI=$uri; exec env $command_line"
    report=""
  fi
  on "$host" sh -c "$script" > "$logs/$name.out" 2>&1 &
  local_pids+=($!); roles+=("$role"); hosts+=("$host"); names+=("$name")
  reports+=("$report")
  case $role in server|relay) parent=$(( ${#names[@]} - 1 )) ;; esac
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
  [ -n "${reports[$i]}" ] || continue # a client command's: none
  on "${hosts[$i]}" sh -c "cat ${reports[$i]}; rm -f ${reports[$i]}" \
    > "$logs/${names[$i]}.json" 2> /dev/null
done
[ $rc -eq 0 ] && echo "run complete; logs in $logs" || echo "run failed (exit $rc); see $logs"
exit $rc

# shellcheck shell=bash
# (sourced) What run-local.sh, run-hosts.sh and rank-exec.sh share to
# start a client as any command (a Python client, say) instead of
# `fedcaf client`: FEDCAF_CLIENT_CMD, and the address to give it.
#
#   . "$here/client-command.sh"
#
# It gives:
#   client_command ID PARTITION N URI ARGS...
#       becomes (exec) the command line FEDCAF_CLIENT_CMD, as sh reads it
#       (quotes, NAME=VALUE before the program), with ARGS after it and, in
#       its environment, FEDCAF_CLIENT_ID=ID, FEDCAF_PARTITION=PARTITION,
#       FEDCAF_NUM_PARTITIONS=N and FEDCAF_SERVER_URI=URI. Never returns.
#   listen_address LOG PID HOST
#       prints HOST_OR_IP:PORT where the server or relay writing LOG
#       listens, from its log line "listening on IP:PORT" (a wildcard IP,
#       0.0.0.0 or ::, becomes HOST). Waits for the line while process PID
#       lives, at most 120 s; returns 1 without it.

client_command() {
  FEDCAF_CLIENT_ID=$1 FEDCAF_PARTITION=$2 FEDCAF_NUM_PARTITIONS=$3 \
    FEDCAF_SERVER_URI=$4 exec sh -c "exec env $FEDCAF_CLIENT_CMD \"\$@\"" \
    FEDCAF_CLIENT_CMD "${@:5}"
}

listen_address() {
  local log=$1 pid=$2 host=$3 at="" i
  for (( i = 0; i < 1200; i++ )); do
    at=$(sed -n 's/.*: listening on \([^ ,]*\).*/\1/p' "$log" 2> /dev/null | head -n 1)
    [ -n "$at" ] && break
    kill -0 "$pid" 2> /dev/null || return 1
    sleep 0.1
  done
  [ -n "$at" ] || return 1
  case ${at%:*} in 0.0.0.0|::|'[::]'|'') at=$host:${at##*:} ;; esac
  echo "$at"
}

#!/usr/bin/env bash
# N ranks of one job on this host, started as torchrun starts them: each
# rank is COMMAND with RANK and LOCAL_RANK (0..N-1), WORLD_SIZE and
# LOCAL_WORLD_SIZE (N), GROUP_RANK 0, MASTER_ADDR 127.0.0.1 and MASTER_PORT
# (a free port) in its environment, which torch.distributed's
# init_process_group reads. For where torchrun does not run: Debian 12's
# python3-torch 1.13 under Python 3.11 fails in torchrun's elastic agent
# before any rank starts. Code written for torchrun runs unchanged under it,
# and under `torchrun --nproc-per-node N` where that works.
#
#   deploy/torchrun-local.sh N COMMAND [ARGS...]
#   deploy/torchrun-local.sh 2 python3 examples/python/sharded_fashion_mnist.py \
#     -c configs/client_1.yaml
#
# Waits for all N ranks. If one exits non-zero, the others are ended (TERM,
# then KILL after 10 s): its peers would wait for it in their next
# collective. Ctrl-C or TERM ends every rank. Exit status: 0 iff every rank
# exited 0, else the status of the first rank that failed.
#   MASTER_PORT  the rendezvous port (default: a free one on 127.0.0.1)
#   LOG_DIR      rank R's stdout and stderr go to LOG_DIR/rank<R>.log
#                (default: this script's own, all ranks together)
set -u
usage="usage: torchrun-local.sh N COMMAND [ARGS...]"
n=${1:?$usage}
shift
[ $# -gt 0 ] || { echo "$usage" >&2; exit 2; }
if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$((10#$n))" -lt 1 ]; then
  echo "torchrun-local.sh: N=$n is not a number of ranks (1 or more)" >&2; exit 2
fi
n=$((10#$n))

# free_port: a TCP port on 127.0.0.1 that nothing listens on now.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' \
    2> /dev/null && return
  local port # no python3: a random port no socket listens on
  for _ in $(seq 50); do
    port=$(( 20000 + RANDOM % 20000 ))
    awk -v p="$(printf '%04X' "$port")" \
      'NR > 1 { split($2, a, ":"); if (a[2] == p && $4 == "0A") f = 1 } END { exit f }' \
      /proc/net/tcp /proc/net/tcp6 2> /dev/null && break
  done
  echo "$port"
}

export MASTER_ADDR=127.0.0.1 MASTER_PORT=${MASTER_PORT:-$(free_port)}
export WORLD_SIZE=$n LOCAL_WORLD_SIZE=$n GROUP_RANK=0 ROLE_RANK=0 ROLE_WORLD_SIZE=$n
[ -n "${LOG_DIR:-}" ] && mkdir -p "$LOG_DIR"

declare -A rank_of # pid -> rank, of the ranks still running
for (( r = 0; r < n; r++ )); do
  if [ -n "${LOG_DIR:-}" ]; then
    RANK=$r LOCAL_RANK=$r "$@" > "$LOG_DIR/rank$r.log" 2>&1 &
  else
    RANK=$r LOCAL_RANK=$r "$@" &
  fi
  rank_of[$!]=$r
done

# end_ranks: TERM to every rank still running, KILL to those left after 10 s.
end_ranks() {
  local pid i
  for pid in "${!rank_of[@]}"; do kill -TERM "$pid" 2> /dev/null; done
  for (( i = 0; i < 100; i++ )); do
    for pid in "${!rank_of[@]}"; do
      kill -0 "$pid" 2> /dev/null || unset "rank_of[$pid]"
    done
    [ ${#rank_of[@]} -eq 0 ] && return
    sleep 0.1
  done
  for pid in "${!rank_of[@]}"; do kill -KILL "$pid" 2> /dev/null; done
}
trap 'echo "torchrun-local.sh: interrupted, ending the ranks" >&2; end_ranks; exit 130' INT
trap 'end_ranks; exit 143' TERM

status=0
while [ ${#rank_of[@]} -gt 0 ]; do
  done_pid=
  wait -n -p done_pid "${!rank_of[@]}"
  rc=$?
  [ -n "$done_pid" ] || continue # a signal, handled by its trap
  r=${rank_of[$done_pid]}
  unset "rank_of[$done_pid]"
  if [ $rc -ne 0 ] && [ $status -eq 0 ]; then
    status=$rc
    echo "torchrun-local.sh: rank $r exited with status $rc; ending the" \
      "${#rank_of[@]} still running" >&2
    end_ranks
  fi
done
exit $status

#!/usr/bin/env bash
# Soak under churn: one `fedcaf server` and CLIENTS (4) `fedcaf client`
# processes on loopback (127.0.0.1, a free port), ROUNDS (2000) rounds of
# FedAvg with the dummy trainer (add: 0.5) on a tiny synthetic float32 model
# (MODEL_KIB, 16 KiB in 4 tensors), while a churn loop stops and starts the
# clients. Measures whether the server's memory and descriptors stay flat.
#
#   tests/perf/soak_bench.sh FEDCAF [ROUNDS=2000]
#
# Settings under which the rounds go on with a client away: min_clients
# MIN_CLIENTS (2) of CLIENTS, round_deadline_s DEADLINE_S (1: a round that
# waits for a client gone ends then, with the others), on_deadline: wait
# (fewer than min_clients delivered at the deadline: the round waits for
# them rather than ending the run), the server's reconnect_grace_s GRACE_S
# (2: a client back within it resumes its session; one that is not is
# dropped, and registers again as new at its old index). A round starts
# with every registered client (lost ones included, until dropped), so at
# most one resident client is away at a time and the run never falls below
# min_clients.
#
# Churn, paced in rounds (a round of this model takes a few ms here: a
# schedule in seconds would barely touch a run): an event, then CHURN_ROUNDS
# (10, uniform in 0.5x to 1.5x) rounds, and again until the run ends. Each
# event picks a resident client at random and waits for the server's log
# to show its effect (EVENT_WAIT_S, 10, at most; else counted unconfirmed):
#  - restart: SIGTERM or SIGKILL (even odds) to the client's PID, then the
#    same client id is started again after 0 to 0.5 s; the server takes the
#    session over ("ClientN is back ...; it resumes");
#  - leave (every LEAVE_EVERY-th event, 5): the client is stopped and kept
#    away until the server drops it (past the grace); a visitor (Visitor1
#    or Visitor2, in turn) takes the free place, stays VISIT_ROUNDS (20)
#    rounds and leaves mid-run (SIGTERM or SIGKILL); once it is dropped in
#    turn, the resident client comes back and registers as new.
# A resident client that ends on its own while the run goes on (refused,
# failed) is started again at the next event, counted as an unplanned exit.
#
# The server's VmRSS, RssAnon and open descriptors (/proc/PID/fd) are read
# every SAMPLE_S (0.5) seconds with the round it is at (its "round N/M"
# lines). Printed: rounds completed, wall time, rounds/s, the slowest round,
# failed rounds, the server's log events (resumed, lost, dropped, deadline
# cuts, collections again), RSS after warm-up (the first sample at or past
# WARMUP_PCT (10) % of the rounds) and at the end, the least-squares slope
# of RSS over rounds after warm-up (KiB per 100 rounds), the descriptors'
# min and max after warm-up, and the restarts; the last line:
#   soak: rounds=R rss_slope_kib_per_100_rounds=X fds_min=A fds_max=B
#         rss_warm_mib=C rss_end_mib=D restarts=N   (one line)
# Exit 0 iff the server completed every round and exited 0. The same run
# without churn, a baseline for the slope: CHURN_ROUNDS=1000000.
#
# Bounds: LIMIT_S (1200) for the whole run (then every process this script
# started is stopped, by its PID, and what ran is reported, exit 1). Files
# under a mktemp -d folder in DIR (/tmp), removed at the end unless
# FEDCAF_KEEP=1.
set -u
fedcaf=$(readlink -f "${1:?usage: $0 FEDCAF [ROUNDS=2000]}")
rounds=${2:-2000}
clients=${CLIENTS:-4}; min_clients=${MIN_CLIENTS:-2}
model_kib=${MODEL_KIB:-16}
deadline_s=${DEADLINE_S:-1}; grace_s=${GRACE_S:-2}
churn_rounds=${CHURN_ROUNDS:-10}; leave_every=${LEAVE_EVERY:-5}; visit_rounds=${VISIT_ROUNDS:-20}
sample_s=${SAMPLE_S:-0.5}; warmup_pct=${WARMUP_PCT:-10}
limit_s=${LIMIT_S:-1200}; dir=${DIR:-/tmp}
[ -x "$fedcaf" ] || { echo "FAIL: $fedcaf is not executable"; exit 1; }
work=$(mktemp -d "$dir/fedcaf-soak.XXXXXX")
log=$work/server.log
server=; sampler=; visitor=
declare -a pid_of log_of # client slot (1..CLIENTS) -> PID, log file
# Every process this script started, by PID: stopped on exit.
cleanup() {
  local p
  for p in $sampler $visitor "${pid_of[@]}" $server; do
    kill -KILL "$p" 2> /dev/null
  done
  wait 2> /dev/null
  exec 2>&3
  grep -v -E '^.*: line [0-9]+: +[0-9]+ (Killed|Terminated) ' "$work/shell.err" >&2
  if [ -n "${FEDCAF_KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
# bash reports each client it saw killed ("line N: PID Killed ..."); those
# lines are left out of this script's stderr, the rest is passed on at the end.
exec 3>&2 2> "$work/shell.err"
trap 'echo "interrupted"; exit 1' INT TERM

now_s() { echo "$EPOCHREALTIME"; }
start_s=$(now_s)
end_by=$(awk -v s="$start_s" -v l="$limit_s" 'BEGIN { printf "%d", s + l }')
elapsed() { awk -v s="$start_s" -v n="$(now_s)" 'BEGIN { printf "%.2f", n - s }'; }
past_limit() { [ "${EPOCHREALTIME%.*}" -ge "$end_by" ]; }

# True iff `pid` runs (not gone, not a zombie waiting to be reaped).
alive() {
  local state
  state=$(awk '{ print $3 }' "/proc/$1/stat" 2> /dev/null) && [ "$state" != Z ]
}

free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' \
    2> /dev/null || echo $(( 20000 + RANDOM % 20000 ))
}

# Stops `1` (a PID) with signal `2`; SIGKILL after 3 s; reaps it.
stop_pid() {
  local pid=$1 sig=$2 i
  kill -s "$sig" "$pid" 2> /dev/null
  for i in $(seq 30); do alive "$pid" || break; sleep 0.1; done
  alive "$pid" && kill -KILL "$pid" 2> /dev/null
  wait "$pid" 2> /dev/null
}

random_signal() { (( RANDOM % 2 )) && echo TERM || echo KILL; }

write_configs() {
  local port=$1 i
  cat > "$work/server.yaml" <<YAML
server_configs:
  num_clients: $clients
  num_global_epochs: $rounds
  scheduler: SyncScheduler
  scheduler_kwargs:
    min_clients: $min_clients
    round_deadline_s: $deadline_s
    registration_deadline_s: 60
    on_deadline: wait
  aggregator: FedAvgAggregator
  aggregator_kwargs: {client_weights_mode: equal}
  memory_mode: ram
  comm_configs:
    grpc_configs: {server_uri: 127.0.0.1:$port, use_model_chunking: true}
    stream_configs: {chunk_bytes: 4096, window: 4, idle_timeout_s: 10, reconnect_grace_s: $grace_s}
client_configs:
  train_configs: {trainer: dummy, add: 0.5}
  model_configs: {name: synthetic, num_tensors: 4, total_bytes: $(( model_kib << 10 )), dtype: float32, seed: 42}
YAML
  # A client keeps trying a lost server for 5 s (not 600): a client started
  # as the run ends must not outlive it for long.
  for i in $(seq "$clients") V1 V2; do
    local id=Client$i index=$(( ${i#V} - 1 ))
    [ "${i#V}" != "$i" ] && id=Visitor${i#V}
    printf 'client_id: %s\ntrain_configs: {device: cpu, num_threads: 1}\ndata_configs:\n  dataset_kwargs: {num_clients: %s, client_id: %s}\ncomm_configs:\n  grpc_configs: {server_uri: 127.0.0.1:%s}\n  stream_configs: {idle_timeout_s: 10, reconnect_grace_s: 5}\n' \
      "$id" "$clients" "$index" "$port" > "$work/$id.yaml"
  done
}

starts=0
# Starts client `1` (its id): its PID in last_pid, its log in last_log.
start_client() {
  starts=$(( starts + 1 ))
  last_log=$work/clients/$1.$starts.log
  "$fedcaf" client -c "$work/$1.yaml" > "$last_log" 2>&1 &
  last_pid=$!
  echo "$(elapsed) start $1 pid $last_pid" >> "$work/churn.log"
}

# Runs in the background: one line per SAMPLE_S while the server runs:
# seconds, round, VmRSS KiB, RssAnon KiB (0 if absent), open descriptors.
sample_server() {
  local mem fds r
  while alive "$server"; do
    mem=$(awk '/^VmRSS:/ { r = $2 } /^RssAnon:/ { a = $2 } END { print r + 0, a + 0 }' \
      "/proc/$server/status" 2> /dev/null) || break
    fds=$(ls "/proc/$server/fd" 2> /dev/null | wc -l)
    r=$(grep -o '^round [0-9]*' "$log" | tail -n 1); r=${r#round }
    echo "$(elapsed) ${r:-0} $mem $fds" >> "$work/samples"
    sleep "$sample_s"
  done
}

mkdir -p "$work/clients"
echo "soak: $rounds rounds, $clients clients (min_clients $min_clients), model $model_kib KiB," \
  "round_deadline_s $deadline_s, reconnect_grace_s $grace_s, churn every ~$churn_rounds rounds" \
  "(every ${leave_every}th a leave + visitor), limit $limit_s s"
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "MemAvailable $(awk '/MemAvailable/ { print int($2 / 1024) }' /proc/meminfo) MiB at start"

# The server, on a free port (a port taken meanwhile: another, 3 tries).
for _ in 1 2 3; do
  port=$(free_port)
  write_configs "$port"
  "$fedcaf" server -c "$work/server.yaml" > "$log" 2>&1 & server=$!
  for i in $(seq 50); do grep -q "listening on" "$log" && break; alive "$server" || break; sleep 0.1; done
  grep -q "listening on" "$log" && break
  stop_pid "$server" KILL; server=
done
[ -n "$server" ] || { echo "FAIL: the server did not start"; tail -n 3 "$log"; exit 1; }
echo "server pid $server on 127.0.0.1:$port"
sample_server & sampler=$!
for s in $(seq "$clients"); do start_client "Client$s"; pid_of[$s]=$last_pid; log_of[$s]=$last_log; done

restarts=0; unplanned=0; leaves=0; visits=0; events=0; sig_term=0; sig_kill=0
slow_events=0 # events whose log line did not come within EVENT_WAIT_S
count_signal() { [ "$1" = TERM ] && sig_term=$(( sig_term + 1 )) || sig_kill=$(( sig_kill + 1 )); }
# Restarts every resident client that ended by itself (counted unplanned).
revive() {
  local s rc
  for s in $(seq "$clients"); do
    [ -z "${pid_of[$s]}" ] || alive "${pid_of[$s]}" && continue
    alive "$server" || return
    wait "${pid_of[$s]}"; rc=$?
    unplanned=$(( unplanned + 1 ))
    echo "$(elapsed) unplanned exit of Client$s (pid ${pid_of[$s]}, exit $rc): $(tail -n 1 "${log_of[$s]}")" \
      | tee -a "$work/churn.log"
    start_client "Client$s"; pid_of[$s]=$last_pid; log_of[$s]=$last_log; restarts=$(( restarts + 1 ))
  done
}
round_now() { local r; r=$(grep -o '^round [0-9]*' "$log" | tail -n 1); r=${r#round }; echo "${r:-0}"; }
seen() { grep -c -F -- "$1" "$log"; }
# Waits until the server's log holds more than `2` lines with `1` (fixed
# text), at most EVENT_WAIT_S; returns 1 iff the server is gone or the
# time limit passed.
await_line() {
  local i
  for i in $(seq $(( ${EVENT_WAIT_S:-10} * 50 ))); do
    [ "$(seen "$1")" -gt "$2" ] && return 0
    alive "$server" && ! past_limit || return 1
    sleep 0.02
  done
  slow_events=$(( slow_events + 1 ))
  echo "$(elapsed) no '$1' within ${EVENT_WAIT_S:-10} s" >> "$work/churn.log"
}
# Waits until `1` more rounds have completed; returns 1 iff the server is
# gone or the time limit passed.
await_rounds() {
  local until=$(( $(round_now) + $1 ))
  while [ "$(round_now)" -lt "$until" ]; do
    alive "$server" && ! past_limit || return 1
    sleep 0.02
  done
}
# Stops resident client `1` (slot) with signal `2`, and waits for the
# server to drop it (`3` = drop) or not (it only lost it).
stop_resident() {
  local id=Client$1 before
  before=$(seen "W server: dropped $id:")
  echo "$(elapsed) round $(round_now): $4 $id ($2)" >> "$work/churn.log"
  stop_pid "${pid_of[$1]}" "$2"; pid_of[$1]=
  [ "$3" = drop ] && { await_line "W server: dropped $id:" "$before" || return 1; }
  return 0
}
# Starts resident client `1` again (slot), and waits for the server to take
# it back: resumed (`2` = resume) or registered as new.
start_resident() {
  local id=Client$1 line
  [ "$2" = resume ] && line="I server: $id is back from" || line="I server: registered $id from"
  local before; before=$(seen "$line")
  start_client "$id"; pid_of[$1]=$last_pid; log_of[$1]=$last_log; restarts=$(( restarts + 1 ))
  await_line "$line" "$before"
}

# Churn, paced in rounds: an event, then CHURN_ROUNDS (random in 0.5x to
# 1.5x) rounds, until the run ends.
while alive "$server" && ! past_limit; do
  await_rounds $(( churn_rounds / 2 + RANDOM % (churn_rounds + 1) )) || break
  revive
  events=$(( events + 1 ))
  s=$(( RANDOM % clients + 1 )); sig=$(random_signal); count_signal "$sig"
  if (( events % leave_every == 0 )); then
    # leave: away past the grace (dropped), a visitor takes the place for
    # VISIT_ROUNDS and leaves (dropped), then back as new
    leaves=$(( leaves + 1 ))
    stop_resident "$s" "$sig" drop leave || break
    v=Visitor$(( visits % 2 + 1 )); visits=$(( visits + 1 ))
    before=$(seen "I server: registered $v from")
    start_client "$v"; visitor=$last_pid
    await_line "I server: registered $v from" "$before" || break
    await_rounds "$visit_rounds" || break
    sig=$(random_signal); count_signal "$sig"
    before=$(seen "W server: dropped $v:")
    echo "$(elapsed) round $(round_now): $v leaves ($sig)" >> "$work/churn.log"
    stop_pid "$visitor" "$sig"; visitor=
    await_line "W server: dropped $v:" "$before" || break
    start_resident "$s" join || break
  else
    stop_resident "$s" "$sig" keep restart || break
    sleep "0.$(( RANDOM % 6 ))"
    alive "$server" || break
    start_resident "$s" resume || break
  fi
done
wall_s=$(elapsed)

server_rc=timeout
if alive "$server"; then
  echo "FAIL: the time limit ($limit_s s) passed; stopping the run"
  stop_pid "$server" TERM
else
  wait "$server"; server_rc=$?
fi
server= # reaped: its PID may be another's now
[ -n "$visitor" ] && stop_pid "$visitor" TERM; visitor=
# The clients end with the run; any still up 5 s later is stopped.
for i in $(seq 50); do
  up=0; for p in "${pid_of[@]}"; do alive "$p" && up=1; done
  [ $up = 0 ] && break; sleep 0.1
done
client_fail=0
for s in $(seq "$clients"); do
  [ -n "${pid_of[$s]}" ] || continue # stopped by the churn as the run ended
  alive "${pid_of[$s]}" && { echo "Client$s still up 5 s after the run: stopped"; stop_pid "${pid_of[$s]}" TERM; continue; }
  wait "${pid_of[$s]}" && continue
  client_fail=$(( client_fail + 1 ))
  echo "Client$s ended non-zero: $(tail -n 1 "${log_of[$s]}")"
done
pid_of=()
kill "$sampler" 2> /dev/null; wait "$sampler" 2> /dev/null; sampler=

done_rounds=$(grep -o '^round [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
done_rounds=${done_rounds:-0}
echo "server exit: $server_rc; last lines:"; grep -v '^round ' "$log" | tail -n 2 | sed 's/^/  /'
echo "churn: $events events, $restarts client restarts ($unplanned unplanned), $leaves leaves," \
  "$visits visitors, $slow_events events unconfirmed in the log; signals: $sig_term SIGTERM, $sig_kill SIGKILL; clients ending non-zero at the end: $client_fail"
echo "server log: $(grep -c ' it resumes$' "$log") resumed, $(grep -c 'lost its connection' "$log") lost," \
  "$(grep -c '^[0-9:.]* W server: dropped ' "$log") dropped, $(grep -c 'I server: registered ' "$log") registered," \
  "$(grep -c 'deadline passed without an update' "$log") deadline cuts, $(grep -c 'waiting for min_clients' "$log") waits for min_clients," \
  "$(grep -c 'rejected the update of' "$log") updates rejected, $(grep -c 'collecting the updates of' "$log") collections again, $(grep -c '^[0-9:.]* W ' "$log") warnings, $(grep -c '^[0-9:.]* E ' "$log") errors"

awk -v rounds="$rounds" -v done="$done_rounds" -v wall="$wall_s" -v restarts="$restarts" \
    -v pct="$warmup_pct" -v deadline="$deadline_s" -v samples="$work/samples" '
  # the round lines: "round N/M  train loss L  S s  up U MiB  down D MiB[  status: why]"
  /^round [0-9]+\// {
    n++; for (i = 1; i < NF; i++) if ($(i + 1) == "s") { sec = $i; break }
    if (sec > max_s) { max_s = sec; max_r = $2 }
    if (sec + 0 >= deadline * 0.9) slow++
    if ($0 ~ /MiB  [a-z_]+:/) failed++
  }
  END {
    warm = int(rounds * pct / 100)
    while ((getline line < samples) > 0) {
      split(line, f, " ")
      if (f[2] + 0 < warm || f[3] + 0 == 0) continue
      x = f[2]; y = f[3]; m++
      if (m == 1) { warm_rss = y; warm_anon = f[4]; warm_round = x; fmin = f[5]; fmax = f[5] }
      end_rss = y; end_anon = f[4]; end_round = x
      if (f[5] < fmin) fmin = f[5]; if (f[5] > fmax) fmax = f[5]
      sx += x; sy += y; sxx += x * x; sxy += x * y
      sa += f[4]; sxa += x * f[4]
    }
    slope = "n/a"; slope_anon = "n/a"
    d = m * sxx - sx * sx
    if (m >= 2 && d > 0) {
      slope = sprintf("%.1f", 100 * (m * sxy - sx * sy) / d)
      slope_anon = sprintf("%.1f", 100 * (m * sxa - sx * sa) / d)
    }
    printf "rounds completed: %d of %d (%d round lines, %d failed)\n", done, rounds, n, failed
    printf "wall time: %.1f s, %.1f rounds/s; slowest round %.1f s (round %s), %d rounds took >= %.1f s (a deadline)\n",
      wall, (wall > 0 ? done / wall : 0), max_s, max_r, slow, deadline * 0.9
    if (m == 0) {
      printf "no samples past warm-up (round %d)\n", warm
      printf "soak: rounds=%d rss_slope_kib_per_100_rounds=n/a fds_min=n/a fds_max=n/a rss_warm_mib=n/a rss_end_mib=n/a restarts=%d\n",
        done, restarts
      exit
    }
    printf "server RSS: %.1f MiB at round %d (warm-up, %d%%), %.1f MiB at round %d (end); RssAnon %.1f -> %.1f MiB\n",
      warm_rss / 1024, warm_round, pct, end_rss / 1024, end_round, warm_anon / 1024, end_anon / 1024
    printf "RSS slope after warm-up: %s KiB per 100 rounds (RssAnon %s), %d samples; open fds %d to %d\n",
      slope, slope_anon, m, fmin, fmax
    printf "soak: rounds=%d rss_slope_kib_per_100_rounds=%s fds_min=%d fds_max=%d rss_warm_mib=%.1f rss_end_mib=%.1f restarts=%d\n",
      done, slope, fmin, fmax, warm_rss / 1024, end_rss / 1024, restarts
  }' "$log"

[ "$server_rc" = 0 ] && [ "$done_rounds" = "$rounds" ]

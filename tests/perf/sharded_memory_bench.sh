#!/usr/bin/env bash
# Peak RSS of a sharded client against an unsharded one and against the
# "rank 0 gathers" pattern, on loopback: one server (memory_mode: ram) and
# two clients, Client1 and Client2, ROUNDS (default 2) rounds of FedAvg with
# the dummy trainer (add: 0.5) on a synthetic float32 model of 64 tensors,
# MODEL_MIB in all; the clients keep their models in RAM (the default).
#
#   tests/perf/sharded_memory_bench.sh FEDCAF [MODEL_MIB=2048] [RANKS=4]
#
# Three configurations, each in a server run of its own, all in this run of
# the script:
#  (a) sharded: Client1 is RANKS `fedcaf client` processes (shard.rank=R,
#      shard.ranks=RANKS); each holds and moves only torch.chunk(t, RANKS)[R]
#      of every tensor. Client2 is unsharded.
#  (b) unsharded: Client1 and Client2 are one `fedcaf client` each.
#  (c) rank 0 gathers (the pattern of NVFlare's multi-GPU client: every rank
#      holds its shard, rank 0 gathers the full state and is the only one
#      that talks to the server). RANKS Python processes (/usr/bin/python3,
#      torch.distributed with gloo on 127.0.0.1) each allocate and fill
#      their shard of the same 64 tensors (RANKS-th of the model, padded to
#      equal rows), then rank 0 dist.gather()s every tensor, one at a time,
#      into a full-size buffer it allocated, and keeps it while it runs an
#      unsharded `fedcaf client` as Client1 (its child, measured on its
#      own); the other ranks keep their shards until that client is done.
#      The gathered buffer is not what that client sends: the client loads
#      the synthetic model from the server as in (b), and holds its own copy
#      as a framework's client process holds the state it sends.
#
# What (c) measures, and why it is the pattern's lower bound: "gather rank
# 0" is the peak RSS of the rank-0 process alone, that is its shard plus the
# one full copy of the model that any gather to one process needs, plus
# gloo's temporary for one tensor (gathering per tensor keeps it 1/64 of the
# model) and the Python/torch/gloo runtime (printed too: rank 0's VmRSS
# before it allocates any tensor, and rank 0 less it, which is what the
# pattern itself costs). It does not count a second copy for
# serialising, the client's buffers, or optimizer state: a real rank 0 that
# also talks to the server holds at least this much (and, done in one
# process, at least the larger of this and the fedcaf client's own peak,
# which the script prints beside it). So rank 0 / model >= 1 + 1/RANKS is a
# floor of the pattern, not an estimate of a real framework.
#
# Peak RSS: every fedcaf process runs under /usr/bin/time -v ("Maximum
# resident set size"); each Python rank reports its own VmHWM from
# /proc/self/status when it ends. Printed in MiB and over the model's size;
# then max rank RSS / model for (a) (goal at 4 ranks: at most 0.30), the
# unsharded client / model (b), gather rank 0 / model (c), and the server's
# peak RSS in (a) over (b) (sharding is the clients' business: about 1.0).
# The global models that (a), (b) and (c) end with
# (server_configs.save_global_model) are compared with cmp.
#
# Environment: ROUNDS (2), LIMIT_S (1200: time limit of every process),
# DIR (/var/tmp: holds the saved models), FEDCAF_KEEP=1 keeps the files,
# SKIP_GATHER=1 leaves out (c). (c) needs python3-torch (/usr/bin/python3);
# without it (c) is skipped with a line that says so.
set -u
fedcaf=$(readlink -f "${1:?usage: $0 FEDCAF [MODEL_MIB] [RANKS]}")
mib=${2:-2048}; ranks=${3:-4}
rounds=${ROUNDS:-2}; limit=${LIMIT_S:-1200}; dir=${DIR:-/var/tmp}
py=/usr/bin/python3
bytes=$(( mib << 20 ))
work=$(mktemp -d "$dir/fedcaf-shardmem.XXXXXX")
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done; wait 2> /dev/null; [ -n "${FEDCAF_KEEP:-}" ] && echo "kept $work" || rm -rf "$work"' EXIT

echo "model $mib MiB (64 float32 tensors), Client1 as $ranks ranks in (a) and (c), $rounds rounds, server memory_mode ram"
echo "machine: $(nproc) cores, MemAvailable $(awk '/MemAvailable/ {print int($2 / 1024)}' /proc/meminfo) MiB at start"

# One server run: $1 = configuration (a, b or c); starts the server and
# Client2, and Client1 in the configuration's shape; waits for all of them.
run_config() {
  local cfg=$1 d=$work/$1 port
  mkdir -p "$d"
  port=$(( 20000 + RANDOM % 20000 ))
  cat > "$d/server.yaml" <<YAML
server_configs:
  num_clients: 2
  num_global_epochs: $rounds
  scheduler: SyncScheduler
  scheduler_kwargs: {round_deadline_s: $limit, registration_deadline_s: $limit, same_init_model: true}
  aggregator: FedAvgAggregator
  aggregator_kwargs: {client_weights_mode: equal}
  memory_mode: ram
  save_global_model: $d/global.safetensors
  comm_configs:
    grpc_configs: {server_uri: 127.0.0.1:$port, use_model_chunking: true}
    stream_configs: {chunk_bytes: 1048576, window: 4, idle_timeout_s: 600}
client_configs:
  train_configs: {trainer: dummy, add: 0.5}
  model_configs: {name: synthetic, num_tensors: 64, total_bytes: $bytes, dtype: float32, seed: 42}
YAML
  for i in 1 2; do
    printf 'client_id: Client%s\ntrain_configs: {device: cpu, num_threads: 1}\ndata_configs:\n  dataset_kwargs: {num_clients: 2, client_id: %s}\ncomm_configs:\n  grpc_configs: {server_uri: 127.0.0.1:%s}\n  stream_configs: {idle_timeout_s: 600}\n' \
      "$i" "$(( i - 1 ))" "$port" > "$d/client_$i.yaml"
  done
  local server procs=() rc=0 p
  pids=()
  timeout "$limit" /usr/bin/time -v -o "$d/server.time" "$fedcaf" server -c "$d/server.yaml" \
    > "$d/server.log" 2>&1 & server=$!; pids+=($!)
  timeout "$limit" /usr/bin/time -v -o "$d/client2.time" "$fedcaf" client -c "$d/client_2.yaml" \
    > "$d/client2.log" 2>&1 & procs+=($!); pids+=($!)
  case $cfg in
    a)
      for r in $(seq 0 $(( ranks - 1 ))); do
        timeout "$limit" /usr/bin/time -v -o "$d/client1_rank$r.time" "$fedcaf" client -c "$d/client_1.yaml" \
          --set "shard.rank=$r" --set "shard.ranks=$ranks" > "$d/client1_rank$r.log" 2>&1 & procs+=($!); pids+=($!)
      done ;;
    b)
      timeout "$limit" /usr/bin/time -v -o "$d/client1.time" "$fedcaf" client -c "$d/client_1.yaml" \
        > "$d/client1.log" 2>&1 & procs+=($!); pids+=($!) ;;
    c)
      local mport=$(( port + 1 ))
      for r in $(seq 0 $(( ranks - 1 ))); do
        RANK=$r LOCAL_RANK=$r WORLD_SIZE=$ranks LOCAL_WORLD_SIZE=$ranks MASTER_ADDR=127.0.0.1 \
        MASTER_PORT=$mport GLOO_SOCKET_IFNAME=lo OMP_NUM_THREADS=1 \
          timeout "$limit" "$py" "$work/gather.py" "$bytes" "$d" "$limit" \
            /usr/bin/time -v -o "$d/client1.time" "$fedcaf" client -c "$d/client_1.yaml" \
            > "$d/gather_rank$r.log" 2>&1 & procs+=($!); pids+=($!)
      done ;;
  esac
  wait "$server" || rc=$?
  for p in "${procs[@]}"; do wait "$p" || rc=$?; done
  pids=()
  if [ $rc -ne 0 ]; then
    echo "FAIL: configuration ($cfg), exit $rc"
    for f in "$d"/*.log; do echo "--- $f"; tail -n 4 "$f"; done
    exit 1
  fi
}

cat > "$work/gather.py" <<'PY'
# Rank R of the "rank 0 gathers" pattern: holds its shard of every tensor;
# rank 0 gathers them into a full copy, keeps it while it runs the command
# after the arguments (the unsharded fedcaf client), then all ranks end.
import datetime, os, subprocess, sys
import torch
import torch.distributed as dist

total_bytes, out, limit = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
command = sys.argv[4:]
torch.set_num_threads(1)
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=limit))
rank, n = dist.get_rank(), dist.get_world_size()

def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":"))

runtime = status("VmRSS")  # Python, torch and gloo before any tensor
num_tensors, elements = 64, total_bytes // 4
sizes = [elements // num_tensors + (i < elements % num_tensors) for i in range(num_tensors)]
rows = [(s + n - 1) // n for s in sizes]  # torch.chunk's rows per rank, padded to equal sizes
shards = []
for i, r in enumerate(rows):
    shard = torch.empty(r, dtype=torch.float32)
    shard.fill_(rank + 1 + i / 100.0)  # touches every page
    shards.append(shard)
full = None
if rank == 0:
    full = [torch.empty(r * n, dtype=torch.float32) for r in rows]
for i in range(num_tensors):
    gather_list = list(full[i].view(n, rows[i]).unbind(0)) if rank == 0 else None
    dist.gather(shards[i], gather_list, dst=0)
rc = 0
if rank == 0:
    for i in (0, num_tensors - 1):
        for src in range(n):
            got = full[i][src * rows[i]].item()
            if abs(got - (src + 1 + i / 100.0)) > 1e-6:
                print(f"gather check failed: tensor {i}, rank {src}: {got}", flush=True)
                rc = 1
    if rc == 0:
        rc = subprocess.run(command, timeout=limit).returncode
    # keep the gathered model alive until the client is done
    assert full[0].numel() > 0
dist.barrier()
hwm = status("VmHWM")
with open(os.path.join(out, f"gather_rank{rank}.hwm"), "w") as f:
    f.write(f"{hwm} {runtime}\n")
print(f"rank {rank}: VmHWM {hwm >> 10} MiB, runtime {runtime >> 10} MiB, client exit {rc}", flush=True)
sys.exit(rc)
PY

configs="a b c"
if [ -n "${SKIP_GATHER:-}" ]; then
  configs="a b"; echo "(c) skipped: SKIP_GATHER is set"
elif ! "$py" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2> /dev/null; then
  configs="a b"; echo "(c) skipped: $py has no torch.distributed with gloo (python3-torch)"
fi
for cfg in $configs; do
  start=$(date +%s)
  run_config "$cfg"
  echo "($cfg) done in $(( $(date +%s) - start )) s"
done

same_ab=differ; cmp -s "$work/a/global.safetensors" "$work/b/global.safetensors" && same_ab=equal
same_cb=; if [ -d "$work/c" ]; then
  same_cb=differ; cmp -s "$work/c/global.safetensors" "$work/b/global.safetensors" && same_cb=equal
fi

"$py" - "$work" "$mib" "$ranks" "$same_ab" "$same_cb" <<'PY'
import glob, os, re, sys
work, mib, ranks, same_ab, same_cb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]

def time_mib(path):
    text = open(path).read()
    return int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1)) / 1024

def hwm_mib(path):  # (VmHWM, VmRSS of the runtime before any tensor)
    hwm, runtime = open(path).read().split()
    return int(hwm) / 1024, int(runtime) / 1024

def line(name, m):
    print(f"  {name:<34} {m:9.1f} MiB  {m / mib:6.3f} x model")

names = {"a": f"(a) sharded: Client1 as {ranks} ranks", "b": "(b) unsharded",
         "c": f"(c) rank 0 gathers: Client1 as {ranks} gloo ranks + rank 0's fedcaf client"}
peak = {}
for cfg in "abc":
    d = os.path.join(work, cfg)
    if not os.path.isdir(d):
        continue
    print(names[cfg])
    c1 = []
    if cfg == "a":
        for r in range(ranks):
            c1.append(time_mib(f"{d}/client1_rank{r}.time")); line(f"Client1 rank {r} (fedcaf client)", c1[-1])
    elif cfg == "b":
        c1.append(time_mib(f"{d}/client1.time")); line("Client1 (fedcaf client)", c1[-1])
    else:
        for r in range(ranks):
            hwm, runtime = hwm_mib(f"{d}/gather_rank{r}.hwm")
            c1.append(hwm); line(f"Client1 rank {r} (python, gloo)", hwm)
            if r == 0:
                runtime0 = runtime
                line("  of which Python+torch+gloo runtime", runtime)
        c1.append(time_mib(f"{d}/client1.time")); line("Client1 rank 0's fedcaf client", c1[-1])
    line("Client1, all its processes", sum(c1))
    c2, srv = time_mib(f"{d}/client2.time"), time_mib(f"{d}/server.time")
    line("Client2 (fedcaf client)", c2); line("server", srv)
    peak[cfg] = (c1, c2, srv)

print("ratios")
if "a" in peak:
    m = max(peak["a"][0])
    goal = "; goal at 4 ranks <= 0.30: " + ("met" if m / mib <= 0.30 else "NOT met") if ranks == 4 else ""
    print(f"  max rank RSS / model (a):                      {m / mib:.3f}{goal}")
if "b" in peak:
    print(f"  unsharded client / model (b):                  {peak['b'][0][0] / mib:.3f}")
if "c" in peak:
    g0, cl = peak["c"][0][0], peak["c"][0][-1]
    print(f"  gather rank 0 / model (c):                     {g0 / mib:.3f} (floor of the pattern: 1 + 1/{ranks} = {1 + 1 / ranks:.3f} plus runtime)")
    print(f"  gather rank 0 less its runtime / model (c):    {(g0 - runtime0) / mib:.3f}")
    print(f"  gather rank 0 + its fedcaf client / model (c): {(g0 + cl) / mib:.3f}")
if "a" in peak and "b" in peak:
    print(f"  server peak RSS (a) / (b):                     {peak['a'][2] / peak['b'][2]:.3f}")
    print(f"  Client1 all processes (a) / (b):               {sum(peak['a'][0]) / sum(peak['b'][0]):.3f}")
if "c" in peak and "b" in peak:
    print(f"  server peak RSS (c) / (b):                     {peak['c'][2] / peak['b'][2]:.3f}")
print(f"global models, sharded (a) and unsharded (b): {same_ab}")
if same_cb:
    print(f"global models, rank 0 gathers (c) and unsharded (b): {same_cb}")
PY
rc=$?
[ "$same_ab" = equal ] || rc=1
exit $rc

#!/usr/bin/env bash
# One rank of a batch job: rank 0 runs the server, rank r (1..N) runs client
# r with client_id Client<r> and data partition r-1 of N, N = ranks - 1. The
# rank and size come from Slurm (SLURM_PROCID, SLURM_NTASKS), Open MPI
# (OMPI_COMM_WORLD_RANK/SIZE), MPICH/Hydra (PMI_RANK/SIZE) or PMIx.
#
#   rank-exec.sh SERVER_CONFIG CLIENT_CONFIG
#
#   FEDCAF_SERVER  host:port where rank 0 listens, as clients reach it
#                  (required; fedcaf.sbatch sets it to the first node)
#   FEDCAF_BIND    host:port the server binds (default FEDCAF_SERVER)
#   FEDCAF         the binary (default: fedcaf on PATH, else build/fedcaf)
#   LOG_DIR        where each rank writes <role>.log and <role>.json
set -u
here=$(cd "$(dirname "$0")" && pwd)
fedcaf=${FEDCAF:-$(command -v fedcaf || echo "$here/../build/fedcaf")}
server_cfg=${1:?usage: rank-exec.sh SERVER_CONFIG CLIENT_CONFIG}
client_cfg=${2:?usage: rank-exec.sh SERVER_CONFIG CLIENT_CONFIG}
rank=${SLURM_PROCID:-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${PMIX_RANK:-}}}}
size=${SLURM_NTASKS:-${OMPI_COMM_WORLD_SIZE:-${PMI_SIZE:-${PMIX_SIZE:-}}}}
[ -n "$rank" ] && [ -n "$size" ] || { echo "rank-exec.sh: no rank in the environment (not under srun or mpiexec?)" >&2; exit 2; }
[ "$size" -ge 2 ] || { echo "rank-exec.sh: needs at least 2 ranks (a server and a client)" >&2; exit 2; }
server=${FEDCAF_SERVER:?set FEDCAF_SERVER=host:port, the address of rank 0}
bind=${FEDCAF_BIND:-$server}
n=$((size - 1))
logs=${LOG_DIR:-.}
mkdir -p "$logs"
if [ "$rank" -eq 0 ]; then
  role=server
  exec "$fedcaf" server -c "$server_cfg" \
    --set server_configs.comm_configs.grpc_configs.server_uri="$bind" \
    --set server_configs.num_clients="$n" \
    --set data_configs.dataset_kwargs.num_clients="$n" \
    --report "$logs/$role.json" > "$logs/$role.log" 2>&1
fi
role=client$rank
exec "$fedcaf" client -c "$client_cfg" \
  --set comm_configs.grpc_configs.server_uri="$server" \
  --set client_id=Client$rank \
  --set data_configs.dataset_kwargs.client_id=$((rank - 1)) \
  --set data_configs.dataset_kwargs.num_clients="$n" \
  --report "$logs/$role.json" > "$logs/$role.log" 2>&1

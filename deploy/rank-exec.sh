#!/usr/bin/env bash
# One rank of a batch job. Flat (FEDCAF_RELAYS unset or 0): rank 0 runs the
# server, rank r (1..N) runs client r with client_id Client<r> and data
# partition r-1 of N, N = ranks - 1. A tree (FEDCAF_RELAYS=R): rank 0 is the
# root, ranks 1..R the relays Relay1..RelayR (from RELAY_CONFIG), ranks
# R+1.. the N = ranks - 1 - R clients, client k (Client<k>, partition k-1)
# under relay ((k-1) mod R) + 1. The rank and size come from Slurm
# (SLURM_PROCID, SLURM_NTASKS), Open MPI (OMPI_COMM_WORLD_RANK/SIZE),
# MPICH/Hydra (PMI_RANK/SIZE) or PMIx.
#
#   rank-exec.sh SERVER_CONFIG CLIENT_CONFIG [RELAY_CONFIG]
#
#   FEDCAF_SERVER  host:port where rank 0 listens, as clients reach it
#                  (required; fedcaf.sbatch sets it to the first node)
#   FEDCAF_BIND    host:port the server binds (default FEDCAF_SERVER)
#   FEDCAF_RELAYS  R relays between the root and the clients (default 0)
#   FEDCAF_RELAY_PORT  relay r listens on this port + r - 1 (default the
#                  server's port + 1)
#   FEDCAF_RELAY_BIND  the address relays bind (default 0.0.0.0)
#   FEDCAF_RELAY_HOST  the address clients reach a relay at (default the
#                  relay's `hostname`)
#   FEDCAF         the binary (default: fedcaf on PATH, else build/fedcaf)
#   FEDCAF_CLIENT_CMD  start each client as this command instead of
#                  `fedcaf client` (e.g. `python3 fashion_mnist.py`): a
#                  command line as sh reads it, given the arguments fedcaf
#                  client would get (-c CLIENT_CONFIG and the --set of the
#                  parent's address, client_id, data partition and
#                  num_clients; no --report) and, in its environment,
#                  FEDCAF_CLIENT_ID=Client<k>, FEDCAF_PARTITION=k-1,
#                  FEDCAF_NUM_PARTITIONS=N and FEDCAF_SERVER_URI (the
#                  server's address, or its relay's in a tree); its output
#                  goes to client<k>.log
#   LOG_DIR        where each rank writes <role>.log and <role>.json; in a
#                  tree also where each relay leaves its address
#                  (relay<r>.address) for its clients: a file system all
#                  ranks share
set -u
here=$(cd "$(dirname "$0")" && pwd)
fedcaf=${FEDCAF:-$(command -v fedcaf || echo "$here/../build/fedcaf")}
usage="usage: rank-exec.sh SERVER_CONFIG CLIENT_CONFIG [RELAY_CONFIG]"
server_cfg=${1:?$usage}
client_cfg=${2:?$usage}
relay_cfg=${3:-}
rank=${SLURM_PROCID:-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${PMIX_RANK:-}}}}
size=${SLURM_NTASKS:-${OMPI_COMM_WORLD_SIZE:-${PMI_SIZE:-${PMIX_SIZE:-}}}}
[ -n "$rank" ] && [ -n "$size" ] || { echo "rank-exec.sh: no rank in the environment (not under srun or mpiexec?)" >&2; exit 2; }
server=${FEDCAF_SERVER:?set FEDCAF_SERVER=host:port, the address of rank 0}
bind=${FEDCAF_BIND:-$server}
relays=${FEDCAF_RELAYS:-0}
[[ "$relays" =~ ^[0-9]+$ ]] || { echo "rank-exec.sh: FEDCAF_RELAYS=$relays is not a number" >&2; exit 2; }
relays=$((10#$relays)) # 08 is 8
n=$((size - 1 - relays))
if [ "$relays" -eq 0 ]; then
  [ "$size" -ge 2 ] || { echo "rank-exec.sh: needs at least 2 ranks (a server and a client)" >&2; exit 2; }
else
  [ -n "$relay_cfg" ] || { echo "rank-exec.sh: FEDCAF_RELAYS=$relays needs a RELAY_CONFIG ($usage)" >&2; exit 2; }
  [ "$n" -ge "$relays" ] || { echo "rank-exec.sh: $size ranks are too few for a root, $relays relays and a client under each" >&2; exit 2; }
fi
logs=${LOG_DIR:-.}
mkdir -p "$logs"

# under R: how many of the n clients go under relay R.
under() { echo $(( n / relays + (($1 - 1) < n % relays ? 1 : 0) )); }

if [ "$rank" -eq 0 ]; then
  role=server
  tree=()
  children=$(( relays > 0 ? relays : n ))
  for (( r = 1; r <= relays; r++ )); do
    tree+=(--set "server_configs.relays.Relay$r=$(under $r)")
  done
  exec "$fedcaf" server -c "$server_cfg" \
    --set server_configs.comm_configs.grpc_configs.server_uri="$bind" \
    --set server_configs.num_clients=$children \
    --set data_configs.dataset_kwargs.num_clients=$children "${tree[@]}" \
    --report "$logs/$role.json" > "$logs/$role.log" 2>&1
fi
relay_port=${FEDCAF_RELAY_PORT:-$(( ${server##*:} + 1 ))}
if [ "$rank" -le "$relays" ]; then
  role=relay$rank
  port=$(( relay_port + rank - 1 ))
  rm -f "$logs/$role.address"
  echo "${FEDCAF_RELAY_HOST:-$(hostname)}:$port" > "$logs/$role.address.new"
  mv "$logs/$role.address.new" "$logs/$role.address"
  exec "$fedcaf" relay -c "$relay_cfg" \
    --set client_id=Relay$rank \
    --set comm_configs.grpc_configs.server_uri="$server" \
    --set server_configs.comm_configs.grpc_configs.server_uri="${FEDCAF_RELAY_BIND:-0.0.0.0}:$port" \
    --set server_configs.num_clients="$(under "$rank")" \
    --report "$logs/$role.json" > "$logs/$role.log" 2>&1
fi
k=$((rank - relays))
role=client$k
parent=$server
if [ "$relays" -gt 0 ]; then
  # The relay's address, once it has left it (clients retry the connection
  # until the relay listens).
  address_file=$logs/relay$(( (k - 1) % relays + 1 )).address
  for (( i = 0; i < 600; i++ )); do
    [ -s "$address_file" ] && break
    sleep 0.5
  done
  [ -s "$address_file" ] || { echo "rank-exec.sh: no $address_file after 300 s (is LOG_DIR on a file system all ranks share?)" >&2; exit 1; }
  parent=$(cat "$address_file")
fi
args=(-c "$client_cfg"
      --set comm_configs.grpc_configs.server_uri="$parent"
      --set client_id="Client$k"
      --set data_configs.dataset_kwargs.client_id=$((k - 1))
      --set data_configs.dataset_kwargs.num_clients="$n")
if [ -n "${FEDCAF_CLIENT_CMD:-}" ]; then
  # shellcheck source-path=SCRIPTDIR
  . "$here/client-command.sh"
  client_command "Client$k" $((k - 1)) "$n" "$parent" "${args[@]}" \
    > "$logs/$role.log" 2>&1
fi
exec "$fedcaf" client "${args[@]}" \
  --report "$logs/$role.json" > "$logs/$role.log" 2>&1

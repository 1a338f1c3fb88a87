#!/usr/bin/env bash
# fedcaf under mpiexec, as HPC users start such jobs: rank 0 is the server,
# ranks 1..N the clients (see rank-exec.sh). fedcaf itself does not use MPI;
# mpiexec only places and starts the processes.
#
#   FEDCAF_SERVER=node01:50051 deploy/mpi-run.sh N SERVER_CONFIG CLIENT_CONFIG [MPIEXEC_ARGS...]
#
# e.g. with a hostfile whose first host is node01:
#   FEDCAF_SERVER=node01:50051 deploy/mpi-run.sh 4 server.yaml client.yaml --hostfile hosts
#
# A tree (FEDCAF_RELAYS=R relays between the root and the N clients): the
# argument after CLIENT_CONFIG is the relays' config, and mpiexec starts
# 1 + R + N ranks. The FEDCAF_* variables must reach every rank (Open MPI:
# -x FEDCAF_SERVER -x FEDCAF_RELAYS ...; Hydra passes them on). E.g.
#   FEDCAF_RELAYS=2 FEDCAF_SERVER=node01:50051 deploy/mpi-run.sh 8 server.yaml client.yaml relay.yaml --hostfile hosts
# Python clients (any command instead of `fedcaf client`): FEDCAF_CLIENT_CMD,
# e.g. FEDCAF_CLIENT_CMD="python3 /shared/examples/fashion_mnist.py" (Open
# MPI: -x FEDCAF_CLIENT_CMD); rank-exec.sh says what the command is given.
set -u
here=$(cd "$(dirname "$0")" && pwd)
n=${1:?usage: mpi-run.sh N SERVER_CONFIG CLIENT_CONFIG [MPIEXEC_ARGS...]}
server_cfg=${2:?}; client_cfg=${3:?}
shift 3
: "${FEDCAF_SERVER:?set FEDCAF_SERVER=host:port, the host of rank 0}"
relays=${FEDCAF_RELAYS:-0}
tree=()
if [ "$relays" != 0 ]; then
  tree=("${1:?FEDCAF_RELAYS=$relays: usage: mpi-run.sh N SERVER_CONFIG CLIENT_CONFIG RELAY_CONFIG [MPIEXEC_ARGS...]}")
  shift
  # No client may find a relay's address left by an earlier run.
  rm -f "${LOG_DIR:-.}"/relay*.address
fi
exec mpiexec -n $((n + 1 + relays)) "$@" "$here/rank-exec.sh" "$server_cfg" "$client_cfg" "${tree[@]}"

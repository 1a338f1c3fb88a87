#!/usr/bin/env bash
# fedcaf under mpiexec, as HPC users start such jobs: rank 0 is the server,
# ranks 1..N the clients (see rank-exec.sh). fedcaf itself does not use MPI;
# mpiexec only places and starts the processes.
#
#   FEDCAF_SERVER=node01:50051 deploy/mpi-run.sh N SERVER_CONFIG CLIENT_CONFIG [MPIEXEC_ARGS...]
#
# e.g. with a hostfile whose first host is node01:
#   FEDCAF_SERVER=node01:50051 deploy/mpi-run.sh 4 server.yaml client.yaml --hostfile hosts
set -u
here=$(cd "$(dirname "$0")" && pwd)
n=${1:?usage: mpi-run.sh N SERVER_CONFIG CLIENT_CONFIG [MPIEXEC_ARGS...]}
server_cfg=${2:?}; client_cfg=${3:?}
shift 3
: "${FEDCAF_SERVER:?set FEDCAF_SERVER=host:port, the host of rank 0}"
exec mpiexec -n $((n + 1)) "$@" "$here/rank-exec.sh" "$server_cfg" "$client_cfg"

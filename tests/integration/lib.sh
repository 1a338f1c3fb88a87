# The integration scripts' shared plumbing; each sources it first:
#
#   . "$(dirname "$0")/lib.sh"
#
# It gives:
#   out     a fresh temporary folder, removed at exit (kept, and its path
#           printed, when KEEP_LOGS=1)
#   pids    the processes the script started (pids+=($!)); each still alive
#           at exit is killed, by its PID, and none other
#   py      Debian's python3 (python3-numpy, python3-torch), else the first
#           python3 on PATH
#   free_port   prints a TCP port in 20000-39999 that nothing on this host
#               listens on (loopback servers only)
#   fails, fail MESSAGE   counts a failure and prints "FAIL: MESSAGE"
#   finish      prints "N passed, N failed" for the checks counted with pass
#               and fail, and exits 1 iff any failed
#   pass MESSAGE          counts a check that held and prints "ok: MESSAGE"
#   wait_for FILE PATTERN SECONDS   waits until FILE matches PATTERN

out=$(mktemp -d)
lib_dir=$out # the folder removed at exit, whatever shadows $out then
pids=()
fails=0
passes=0
py=/usr/bin/python3
[ -x "$py" ] || py=python3

lib_cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
  if [ "${KEEP_LOGS:-0}" = 1 ]; then echo "logs kept in $lib_dir"; else rm -rf "$lib_dir"; fi
}
trap lib_cleanup EXIT

free_port() {
  local port tries=0
  while [ $tries -lt 50 ]; do
    port=$(( 20000 + RANDOM % 20000 ))
    # /proc/net/tcp{,6}: local address column, port in hex; state 0A: LISTEN
    if ! awk -v p="$(printf '%04X' "$port")" \
        'NR > 1 { split($2, a, ":"); if (a[2] == p) found = 1 } END { exit !found }' \
        /proc/net/tcp /proc/net/tcp6 2> /dev/null; then
      echo "$port"; return 0
    fi
    tries=$(( tries + 1 ))
  done
  echo "$port"
}

# Failures are recapped at the end, where a log cut in the middle (as CI
# shows a long one: its head and its tail) still shows them.
failures=""
fail() {
  echo "FAIL: $*"; fails=$(( fails + 1 ))
  failures+="  FAIL: ${*:0:300}"$'\n'
}
pass() { echo "ok: $*"; passes=$(( passes + 1 )); }
finish() {
  [ -n "$failures" ] && printf 'the failed checks, again:\n%s' "$failures"
  echo "$passes passed, $fails failed"
  [ "$fails" -eq 0 ]
  exit $?
}

# wait_for FILE PATTERN SECONDS: returns 0 as soon as FILE matches the
# extended regular expression PATTERN, 1 after SECONDS without.
wait_for() {
  local i
  for i in $(seq 1 $(( $3 * 10 ))); do
    grep -Eq -- "$2" "$1" 2> /dev/null && return 0
    sleep 0.1
  done
  return 1
}

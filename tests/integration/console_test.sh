#!/usr/bin/env bash
# The console: on a terminal (a pseudo-terminal from script(1)) a long
# transfer shows one progress line per round, redrawn in place, with bytes,
# rate and ETA per direction, and the round lines stay as they are; on a
# pipe there is no progress line and no terminal escape. --log-level
# leaves out the lines below it, --log-file keeps every line with its date,
# and a log file that cannot be written is refused before the run.
set -u
fedcaf=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "$0")/lib.sh"
tmp=$out
# 2 clients x 256 MiB each way. A transfer is drawn once it has moved for a
# second; how long this one takes depends on the machine (in one process it
# moves at memory speed), so the test draws from the first tick
# (FEDCAF_PROGRESS_AFTER_S=0) and moves the model in 1 KiB chunks one at a
# time, which keeps each direction moving for several of the 250 ms ticks.
run=("$fedcaf" simulate -c "$src/configs/synthetic_dummy.yaml"
     --set server_configs.num_global_epochs=1
     --set client_configs.model_configs.total_bytes=268435456)
slow=(--set server_configs.comm_configs.stream_configs.chunk_bytes=1024
      --set server_configs.comm_configs.stream_configs.window=1)
printf -v cmd '%q ' env FEDCAF_PROGRESS_AFTER_S=0 "${run[@]}" "${slow[@]}" \
  --log-file "$tmp/run.log"
timeout 300 script -qefc "$cmd" "$tmp/tty.out" > /dev/null ||
  fail "the run on a terminal failed"
tr '\r' '\n' < "$tmp/tty.out" > "$tmp/tty.lines"
eta='ETA ([0-9]+ min )?[0-9]+ s'
grep -Eq $'^\x1b\\[Kround 1: down [0-9.]+ [KMG]i?B / 512\\.0 MiB, [0-9.]+ [KMG]iB/s, '"$eta"'$' "$tmp/tty.lines" ||
  fail "no download progress line on the terminal"
grep -Eq $'^\x1b\\[Kround 1: down done  \\|  up [0-9.]+ [KMG]i?B / 512\\.0 MiB, [0-9.]+ [KMG]iB/s, '"$eta"'$' "$tmp/tty.lines" ||
  fail "no upload progress line on the terminal"
grep -Eq $'^(\x1b\\[K)?round 1/1  train loss' "$tmp/tty.lines" ||
  fail "the round line is missing on the terminal"
sed -n '/round 1: /{p;q}' "$tmp/tty.lines" | cat -v
# The log file: the same lines with their date, no progress line.
grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:.]+ I server: registered Client1' "$tmp/run.log" ||
  fail "--log-file lacks the registration line"
if grep -q "ETA" "$tmp/run.log"; then fail "the progress line went into the log file"; fi

# On a pipe: the log and the round line as they were, nothing else.
timeout 300 "${run[@]}" > "$tmp/pipe.out" 2>&1 || fail "the run on a pipe failed"
if grep -q $'\x1b' "$tmp/pipe.out" || grep -q "ETA" "$tmp/pipe.out"; then
  fail "a progress line on a pipe"
fi
grep -Eq '^[0-9:.]+ I server: registered Client[12] from this process$' "$tmp/pipe.out" ||
  fail "no info line on a pipe"
grep -q "^round 1/1  train loss" "$tmp/pipe.out" || fail "no round line on a pipe"

# --log-level warning: no info lines, the round line still printed.
timeout 300 "${run[@]}" --log-level warning > "$tmp/warn.out" 2>&1 ||
  fail "the run with --log-level warning failed"
if grep -q " I " "$tmp/warn.out"; then fail "--log-level warning printed info lines"; fi
grep -q "^round 1/1  train loss" "$tmp/warn.out" || fail "--log-level warning hid the round line"

out=$("$fedcaf" simulate --log-level loud 2>&1) && fail "--log-level loud was accepted"
grep -q -- "--log-level" <<<"$out" || fail "--log-level loud: $out"
out=$("$fedcaf" simulate --log-file $tmp/missing/x.log 2>&1) &&
  fail "an unwritable --log-file was accepted"
grep -q "cannot write the log file $tmp/missing/x.log" <<<"$out" ||
  fail "unwritable --log-file: $out"
[ -e "$tmp/missing" ] && fail "--log-file created a directory"
[ "$fails" -eq 0 ] && echo "console: all checks passed"
exit "$fails"

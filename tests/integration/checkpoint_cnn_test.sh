#!/usr/bin/env bash
# A resumed run on real data: `fedcaf simulate` (the embedded config: the
# CNN on Fashion-MNIST, 2 clients) for FEDCAF_CKPT_ROUNDS (4) rounds of
# FEDCAF_CKPT_STEPS (150) steps in window mode with checkpoints, once
# without a stop and once SIGKILLed twice (in round 2, then in round 3) and
# resumed each time with --resume. The final test accuracy of the resumed
# run is within 0.002 of the uninterrupted run's, and its report holds every
# round once.
#
#   checkpoint_cnn_test.sh FEDCAF
set -u
fedcaf=$1
rounds=${FEDCAF_CKPT_ROUNDS:-4}; steps=${FEDCAF_CKPT_STEPS:-150}
. "$(dirname "$0")/lib.sh"
common=(--set server_configs.memory_mode=window
        --set "server_configs.num_global_epochs=$rounds"
        --set client_configs.train_configs.mode=step
        --set "client_configs.train_configs.num_local_steps=$steps"
        --set "server_configs.checkpoint.dir=$out/ckpt")

timeout 900 "$fedcaf" simulate "${common[@]}" \
  --set "server_configs.checkpoint.dir=$out/ref_ckpt" \
  --report "$out/ref.json" > "$out/ref.log" 2>&1 || { tail -5 "$out/ref.log"; fail "the uninterrupted run"; finish; }

# run NAME [--resume DIR]: the run, killed once its log shows KILL_AT.
run_until() {
  local name=$1 at=$2; shift 2
  "$fedcaf" simulate "${common[@]}" "$@" --report "$out/$name.json" \
    > "$out/$name.log" 2>&1 &
  local p=$! i; pids+=($p)
  for i in $(seq 3000); do
    grep -q "$at" "$out/$name.log" && break
    kill -0 $p 2> /dev/null || break
    sleep 0.1
  done
  sleep "0.$(( RANDOM % 10 ))"
  kill -9 $p 2> /dev/null && echo "killed $name after '$at'"
  wait $p 2> /dev/null
}
run_until first "round 2: trained"
run_until second "round 3: trained" --resume "$out/ckpt"
timeout 900 "$fedcaf" simulate "${common[@]}" --resume "$out/ckpt" \
  --report "$out/last.json" > "$out/last.log" 2>&1 || { tail -5 "$out/last.log"; fail "the last resumed run"; finish; }
grep -h "resuming from" "$out"/second.log "$out"/last.log

"$py" - "$out" "$rounds" <<'PY' && pass "the resumed CNN run's accuracy equals the uninterrupted run's within 0.002" || fail "accuracy or rounds"
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
ref = json.load(open(f"{out}/ref.json"))
last = json.load(open(f"{out}/last.json"))
assert [r["round"] for r in last["rounds"]] == list(range(1, rounds + 1)), last["rounds"]
assert last["status"] == "completed" and last["resumed_from"], (last["status"], last["resumed_from"])
a, b = ref["final_test_accuracy"], last["final_test_accuracy"]
print(f"final accuracy: uninterrupted {a:.4f}, killed twice and resumed "
      f"(from rounds {last['resumed_from']}) {b:.4f}, difference {abs(a - b):.4f}")
assert abs(a - b) <= 0.002, (a, b)
PY
finish

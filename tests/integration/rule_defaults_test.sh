#!/usr/bin/env bash
# Defaults that learn: the default run (`fedcaf simulate`, the embedded
# configs/simulate.yaml: CNN on Fashion-MNIST, 2 clients, 3 rounds) with each
# aggregator and nothing but its name set reaches a final test accuracy of
# 0.85 or more, as FedAvg does. The async rules bring their scheduler.
# Prints a table of rule and final accuracy. About 7 minutes on 2 cores.
set -u
fedcaf=$1
. "$(dirname "$0")/lib.sh"
tmp=$out
min_accuracy=0.85
failed=0

printf '%-22s %-15s %s\n' aggregator scheduler final_accuracy
for rule in FedAvgAggregator FedAvgMAggregator FedAdamAggregator \
            FedYogiAggregator FedAdagradAggregator FedAsyncAggregator \
            FedBuffAggregator; do
  timeout 300 "$fedcaf" simulate --set server_configs.aggregator=$rule \
    --report "$tmp/$rule.json" > "$tmp/$rule.log" 2>&1
  rc=$?
  row=$(python3 - "$tmp/$rule.json" "$min_accuracy" <<'PY'
import json, sys
try:
    report = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    print("- no_report"); sys.exit(1)
acc = report.get("final_test_accuracy")
print(report.get("scheduler", "-"), "-" if acc is None else f"{acc:.4f}")
sys.exit(0 if report.get("ok") and acc is not None
         and acc >= float(sys.argv[2]) else 1)
PY
  )
  ok=$?
  read -r scheduler accuracy <<< "$row"
  printf '%-22s %-15s %s\n' "$rule" "$scheduler" "$accuracy"
  if [ "$rc" -ne 0 ] || [ "$ok" -ne 0 ]; then
    failed=1
    echo "FAIL: $rule (exit $rc) below $min_accuracy or no report; its log ends:"
    tail -n 5 "$tmp/$rule.log"
  fi
done
[ "$failed" -eq 0 ] && echo "PASS: every rule's default reaches $min_accuracy"
exit "$failed"

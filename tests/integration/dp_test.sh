#!/usr/bin/env bash
# DP-SGD through the command: a simulated round with train_configs.dp, whose
# report's epsilon must equal the accountant's for the steps and rate the
# clients logged; refusals of bad dp keys; and `fedcaf dp-profile` on a tiny
# transformer (every mode, two lengths): one JSON per run with its numbers,
# the summary table with overheads, figures, and refusals of bad input.
set -eu
fedcaf=$1
src=$2
. "$(dirname "$0")/lib.sh"
tmp=$out
fail() { echo "FAIL: $*"; exit 1; }

# -- DP-SGD in a simulated federation -------------------------------------------
"$fedcaf" simulate -c "$src/configs/dp_sgd.yaml" \
  --set server_configs.num_global_epochs=2 \
  --set client_configs.train_configs.mode=step \
  --set client_configs.train_configs.num_local_steps=6 \
  --set client_configs.train_configs.train_batch_size=64 \
  --report "$tmp/dp.json" > "$tmp/dp.log" 2>&1 || { cat "$tmp/dp.log"; fail "DP-SGD simulate"; }
grep -q "DP-SGD: 12 steps at rate 0.002133" "$tmp/dp.log" || fail "no DP-SGD accounting in the log"
want=$("$fedcaf" dp-epsilon --noise-multiplier 1 --sample-rate 0.0021333333333 \
  --steps 12 --delta 1e-5 | tail -1 | cut -d= -f2)
python3 - "$tmp/dp.json" "$want" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
want = float(sys.argv[2])
assert report["ok"], report["failure"]
eps = [r["dp_sgd_epsilon"] for r in report["rounds"]]
assert eps[0] is not None and eps[0] < eps[1], eps
assert abs(eps[1] - want) <= 1e-6 * want, (eps, want)
assert report["rounds"][-1]["test_accuracy"] > 0.1
print("ok: report epsilon", eps, "accountant", want)
PY
grep -q "sample epsilon" "$tmp/dp.log" || fail "no epsilon on the progress line"

expect_error() { # expected-text, then the command
  local want=$1; shift
  local out
  if out=$("$@" 2>&1); then fail "'$*' succeeded"; fi
  grep -qF -- "$want" <<<"$out" || fail "'$*' said: $out"
  echo "ok: $want"
}
expect_error "train_configs.dp.mode: must be one of none, per_sample, ghost, fused, got 'flash'" \
  "$fedcaf" simulate --set client_configs.train_configs.dp.mode=flash
expect_error "train_configs.dp.max_grad_norm: must be greater than 0" \
  "$fedcaf" simulate --set client_configs.train_configs.dp.max_grad_norm=0
expect_error "train_configs.dp.delta: must lie strictly between 0 and 1" \
  "$fedcaf" simulate --set client_configs.train_configs.dp.delta=1
expect_error "DP-SGD needs the LibTorch trainer" \
  "$fedcaf" simulate -c "$src/configs/synthetic_dummy.yaml" \
  --set client_configs.train_configs.dp.mode=fused

# -- dp-profile ------------------------------------------------------------------
cat > "$tmp/profile.yaml" <<'YAML'
model: {vocab_size: 300, d_model: 32, num_heads: 2, num_layers: 1, d_ff: 64}
batch_size: 3
seq_lengths: [8, 48]
modes: [none, per_sample, ghost, fused]
warmup_iter: 1
num_iter: 2
num_threads: 1
timeout_s: 120
YAML
"$fedcaf" dp-profile -c "$tmp/profile.yaml" -o "$tmp/out" > "$tmp/profile.log" 2>&1 \
  || { cat "$tmp/profile.log"; fail "dp-profile"; }
python3 - "$tmp/out" "$tmp" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
for mode in ["none", "per_sample", "ghost", "fused"]:
    for t in [8, 48]:
        r = json.load(open(out / f"{mode}_seq{t}_result.json"))
        assert r["ok"] and r["mode"] == mode and r["seq_length"] == t, r
        assert r["batch_size"] == 3 and r["peak_memory_mb"] > 0, r
        assert r["avg_time_ms"] > 0 and r["parameters"] > 0, r
        assert r["config"]["vocab_size"] == 300 and r["config"]["sigma"] == 1.0
        assert sys.argv[2] not in json.dumps(r), "a path in the result"
# Materialising a dense embedding table per sample costs more memory than
# the fused mode's rows per distinct token.
for t in [8, 48]:
    ps = json.load(open(out / f"per_sample_seq{t}_result.json"))
    fu = json.load(open(out / f"fused_seq{t}_result.json"))
    assert ps["peak_memory_mb"] > fu["peak_memory_mb"], (ps, fu)
text = (out / "summary.txt").read_text()
rows = [l.split() for l in text.splitlines() if l.split()[:1] in
        (["none"], ["per_sample"], ["ghost"], ["fused"])]
assert len(rows) == 8, text
assert all(r[-1].endswith("x") and r[-2].endswith("x") for r in rows), text
assert all(r[-1] == "1.00x" for r in rows if r[0] == "none"), text
print("ok: dp-profile results and summary")
PY
if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  table=$(grep -n "^memory_x, time_x" "$tmp/profile.log" | cut -d: -f1)
  figs=$(grep -n "^figures in" "$tmp/profile.log" | cut -d: -f1)
  [ -n "$table" ] && [ -n "$figs" ] && [ "$table" -lt "$figs" ] ||
    fail "the summary table is not before 'figures in'"
  for f in memory_comparison time_comparison memory_vs_time_tradeoff overhead_analysis; do
    [ -s "$tmp/out/figures/$f.png" ] || fail "figure $f missing"
  done
  echo "ok: figures"
fi
printf 'modes: [none, flash]\n' > "$tmp/bad.yaml"
expect_error "modes: 'flash' is not none, per_sample, ghost or fused" \
  "$fedcaf" dp-profile -c "$tmp/bad.yaml" -o "$tmp/bad"
printf 'model: {d_model: 30, num_heads: 4}\n' > "$tmp/bad.yaml"
expect_error "model.num_heads: must divide d_model (30)" \
  "$fedcaf" dp-profile -c "$tmp/bad.yaml" -o "$tmp/bad"
expect_error "dp-profile needs -c CONFIG and -o DIR" "$fedcaf" dp-profile
expect_error "--run needs MODE:LENGTH, got 'fused'" \
  "$fedcaf" dp-profile -c "$tmp/profile.yaml" -o "$tmp/one" --run fused
expect_error "unknown option '--run'" "$fedcaf" simulate --run fused:8
echo "all DP checks passed"

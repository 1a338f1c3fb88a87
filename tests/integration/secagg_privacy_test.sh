#!/usr/bin/env bash
# What the server receives of one client under secure aggregation, recorded
# on the wire: `fedcaf server` and two `fedcaf client` processes on
# 127.0.0.1, Client1 through a relay (tests/integration/secagg_tap.py) that
# keeps every byte it sends. The same run without secure aggregation shows
# the recording works (its chunk payloads are the client's float32 model).
# With it, the payloads are indistinguishable from uniform (chi-squared over
# the top and the bottom byte of every word, 255 degrees of freedom, below
# 360: p = 2e-5 for uniform words) and are not the client's quantized
# update (fewer than 0.1 % of the words within 1 of it).
set -u
fedcaf=$1; src=$2
. "$(dirname "$0")/lib.sh"
chunk=65536

tapped_run() { # NAME SECURE(true|false)
  local name=$1 secure=$2 port=$(free_port)
  local tap=$(( port + 1 )) clients=() rc=0
  timeout 120 "$fedcaf" server -c "$src/configs/synthetic_dummy.yaml" \
    --set client_configs.model_configs.total_bytes=4194304 \
    --set client_configs.train_configs.add_by_index=true \
    --set server_configs.num_global_epochs=1 \
    --set "server_configs.comm_configs.stream_configs.chunk_bytes=$chunk" \
    --set "server_configs.secure_aggregation.enabled=$secure" \
    --set "server_configs.comm_configs.grpc_configs.server_uri=127.0.0.1:$port" \
    > "$out/$name.server.log" 2>&1 &
  local server=$!; pids+=("$server")
  /usr/bin/python3 "$src/tests/integration/secagg_tap.py" relay "$tap" "$port" \
    "$out/$name.bin" 100 > "$out/$name.tap.log" 2>&1 &
  local relay=$!; pids+=("$relay")
  sleep 0.5
  for k in 1 2; do
    local uri="127.0.0.1:$port"
    [ "$k" = 1 ] && uri="127.0.0.1:$tap"
    timeout 120 "$fedcaf" client -c "$src/configs/client_1.yaml" \
      --set "client_id=Client$k" --set data_configs.dataset_kwargs.num_clients=2 \
      --set "data_configs.dataset_kwargs.client_id=$((k - 1))" \
      --set "comm_configs.grpc_configs.server_uri=$uri" \
      > "$out/$name.client_$k.log" 2>&1 &
    clients+=($!); pids+=($!)
  done
  wait "$server" || rc=$?
  for c in "${clients[@]}"; do wait "$c" || rc=$?; done
  kill "$relay" 2> /dev/null; wait "$relay" 2> /dev/null
  [ "$rc" -eq 0 ] || { fail "$name: a process failed"; tail -3 "$out/$name".*.log; }
  /usr/bin/python3 "$src/tests/integration/secagg_tap.py" payloads \
    "$out/$name.bin" "$chunk" "$out/$name.npy" || fail "$name: nothing recorded"
}

tapped_run plain false
tapped_run secure true
/usr/bin/python3 - "$out" "$chunk" <<'PY' || fail "the recording does not show what it should"
import sys, numpy as np
out, chunk = sys.argv[1], int(sys.argv[2])
plain, secure = np.load(f"{out}/plain.npy"), np.load(f"{out}/secure.npy")
chunks = 4194304 // chunk
assert len(plain) == len(secure) == chunks * chunk // 4, (len(plain), len(secure))
def chi2(bytes_):
    bins = np.bincount(bytes_, minlength=256).astype(float)
    e = len(bytes_) / 256
    return float(((bins - e) ** 2 / e).sum())
x = plain.view("<f4").astype(np.float64)
assert np.isfinite(x).all() and np.abs(x).max() < 100, "plain payloads are not the model"
top_plain = chi2((plain >> 24).astype(np.int64))
top, low = chi2((secure >> 24).astype(np.int64)), chi2((secure & 0xFF).astype(np.int64))
print(f"chi-squared of the top byte: plain {top_plain:.0f}, secure {top:.0f}; "
      f"secure low byte {low:.0f} (uniform: below 360)")
assert top_plain > 10000 and top < 360 and low < 360
# Client1's quantized update (weight 1/2, c = 8, b = 22), as the server
# would see it without masks: the secure words are not it.
scale = (2**22 - 1) / 16
quantized = np.floor((0.5 * np.clip(x, -16, 16) + 8) * scale)
near = np.abs(secure.astype(np.float64) - quantized) <= 1
print(f"secure words within 1 of the quantized update: {near.mean():.2e}")
assert near.mean() < 1e-3
PY
[ "$fails" -eq 0 ] && echo "secagg_privacy: all checks passed"
exit "$fails"

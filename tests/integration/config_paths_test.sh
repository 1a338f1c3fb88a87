#!/usr/bin/env bash
# Relative paths in a config file are read from the file's folder: a
# project folder holds server.yaml and client.yaml beside init.safetensors,
# its TLS certificates and tokens (deploy/make-certs.sh) in certs/; the
# server saves its models to out/ and checkpoints to ckpt/, relative too.
# A real server and client run with TLS on 127.0.0.1, started from another
# directory (/): the run completes, the saved models, checkpoint and report
# land in the project folder. Then a missing model file: one short line
# naming the key and the absolute path tried, in well under a second.
#
#   config_paths_test.sh FEDCAF SOURCE_DIR
set -u
fedcaf=$1; src=$2
. "$(dirname "$0")/lib.sh"
proj=$out/project
mkdir -p "$proj/out"
"$src/deploy/make-certs.sh" "$proj/certs" 127.0.0.1 Client1 > /dev/null 2>&1 ||
  { fail "make-certs.sh"; finish; }
"$py" - "$proj/init.safetensors" <<'PY'
import json, struct, sys
import numpy as np
tensors = {"a.weight": np.arange(12, dtype=np.float32).reshape(3, 4),
           "b.bias": np.ones(5, dtype=np.float32)}
header, offset = {}, 0
for name, a in tensors.items():
    header[name] = {"dtype": "F32", "shape": list(a.shape),
                    "data_offsets": [offset, offset + a.nbytes]}
    offset += a.nbytes
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text)
    for a in tensors.values():
        f.write(a.tobytes())
PY
port=$(free_port)
cat > "$proj/server.yaml" <<EOF
server_configs:
  num_clients: 1
  num_global_epochs: 2
  scheduler_kwargs: {min_clients: 1}
  save_global_model: out/global-{round}.safetensors
  checkpoint: {dir: ckpt}
  comm_configs:
    grpc_configs:
      server_uri: 127.0.0.1:$port
      use_ssl: true
      server_certificate: certs/server.pem
      server_certificate_key: certs/server.key
      root_certificate: certs/ca.pem
      use_authenticator: true
      authenticator_args: {tokens_file: certs/tokens.yaml}
client_configs:
  train_configs: {trainer: dummy, add: 0.5}
  model_configs: {name: safetensors, path: init.safetensors}
EOF
cat > "$proj/client.yaml" <<EOF
client_id: Client1
data_configs:
  dataset_name: FashionMNIST
  dataset_path: /usr/share/datasets/fashion-mnist
  dataset_kwargs: {num_clients: 1, client_id: 0}
comm_configs:
  grpc_configs:
    server_uri: 127.0.0.1:$port
    use_ssl: true
    client_certificate: certs/Client1.pem
    client_certificate_key: certs/Client1.key
    root_certificate: certs/ca.pem
    use_authenticator: true
    authenticator_args: {auth_token_file: certs/Client1.token}
EOF
rel=${proj#/}  # the project as seen from /
(cd / && timeout 60 "$fedcaf" server -c "$rel/server.yaml" \
  --report "$proj/server.json" > "$out/server.log" 2>&1) & server=$!; pids+=($server)
(cd / && timeout 60 "$fedcaf" client -c "$rel/client.yaml" > "$out/client.log" 2>&1) &
client=$!; pids+=($client)
rc=0; wait $server || rc=$?
wait $client || rc=$?
if [ $rc -eq 0 ]; then
  pass "server and client started from / with $rel/*.yaml: the run completed over TLS"
else
  fail "the run from / failed"; tail -n 3 "$out/server.log" "$out/client.log"
fi
for f in out/global-1.safetensors out/global-2.safetensors; do
  [ -s "$proj/$f" ] && pass "saved beside the config: $f" || fail "no $proj/$f"
done
ls "$proj/ckpt"/* > /dev/null 2>&1 &&
  pass "checkpoint beside the config: ckpt/$(ls "$proj/ckpt" | head -1)" ||
  fail "no checkpoint in $proj/ckpt"
# A missing model file: one line, the key and the absolute path tried.
rm "$proj/init.safetensors"
t0=$(date +%s.%N)
msg=$(cd / && "$fedcaf" server -c "$rel/server.yaml" 2>&1); code=$?
t1=$(date +%s.%N)
lines=$(printf '%s\n' "$msg" | wc -l)
if [ $code -ne 0 ] && [ "$lines" -eq 1 ] &&
   printf '%s' "$msg" | grep -qF "client_configs.model_configs.path: '$proj/init.safetensors' is not a file"; then
  pass "missing model, in $("$py" -c "print(f'{$t1 - $t0:.3f}')") s, ${#msg} characters: $msg"
else
  fail "missing model file: exit $code, $lines lines: $msg"
fi
finish

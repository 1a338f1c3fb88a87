#!/usr/bin/env bash
# Bad input from the user stops the command before work starts, with a
# non-zero exit and one line that names the file and the key.
set -u
fedcaf=$1
fails=0
expect_error() { # expected-text, then the command
  local want=$1; shift
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -eq 0 ] || ! grep -qF -- "$want" <<<"$out"; then
    echo "FAIL: '$*' exited $rc, output: $out"; fails=$((fails + 1))
  else
    echo "ok: $want"
  fi
}
. "$(dirname "$0")/lib.sh"
tmp=$out
printf 'server_configs:\n  num_clients: 2\n  bogus: 1\n' > "$tmp/bad.yaml"
expect_error "$tmp/bad.yaml: server_configs.bogus: unknown key" "$fedcaf" simulate -c "$tmp/bad.yaml"
expect_error "server_configs.num_global_epochs: expected a whole number from 1 to 4294967295, got 'x'" \
  "$fedcaf" simulate --set server_configs.num_global_epochs=x
# 2^32 + 1 would wrap to a window of 1 in 32 bits.
expect_error "stream_configs.window: must be from 1 to 1024, got '4294967297'" \
  "$fedcaf" simulate --set server_configs.comm_configs.stream_configs.window=4294967297
printf 'a: &a {x: 1}\nserver_configs: *a\n' > "$tmp/alias.yaml"
expect_error "anchors and aliases" "$fedcaf" server -c "$tmp/alias.yaml"
expect_error "data_configs.dataset_path" "$fedcaf" simulate --set data_configs.dataset_path=/nope
expect_error "cannot open the config file" "$fedcaf" server -c "$tmp/missing.yaml"
expect_error "this command needs -c CONFIG" "$fedcaf" client
src=$(cd "$(dirname "$0")/../.." && pwd)
expect_error "grpc_configs.server_certificate: is required with use_ssl: true" \
  "$fedcaf" server -c "$src/configs/server.yaml" \
  --set server_configs.comm_configs.grpc_configs.use_ssl=true
expect_error "authenticator_args.auth_token: use_authenticator needs" \
  "$fedcaf" client -c "$src/configs/client_1.yaml" \
  --set comm_configs.grpc_configs.use_authenticator=true
expect_error "server_uri '127.0.0.1:99999': bad port" \
  "$fedcaf" server -c "$src/configs/server.yaml" \
  --set server_configs.comm_configs.grpc_configs.server_uri=127.0.0.1:99999
expect_error "unknown option '--bogus'" "$fedcaf" simulate --bogus
# A 256 TiB model outgrows the address space: a failed allocation, not an abort.
expect_error "fedcaf: out_of_memory: running 'fedcaf simulate'" "$fedcaf" simulate \
  --set "client_configs.model_configs={name: synthetic, num_tensors: 1, total_bytes: 281474976710656}" \
  --set client_configs.train_configs.trainer=dummy
expect_error "unknown command 'train'" "$fedcaf" train
# Tensor counts are bounded at load, before anything is allocated per
# tensor: 1e8 tensors once reached 11 GB first. Under a 2 GiB address space
# the refusal must still be the config's.
expect_error "client_configs.model_configs.num_tensors: must be from 1 to 65536, got '100000000'" \
  bash -c 'ulimit -v 2097152; exec "$@"' _ "$fedcaf" simulate \
  --set "client_configs.model_configs={name: synthetic, num_tensors: 100000000, total_bytes: 1073741824}" \
  --set client_configs.train_configs.trainer=dummy
sed 's/d_model: 256/d_model: 1000000/' "$src/configs/dp_profile.yaml" > "$tmp/dpp.yaml"
expect_error "model.d_model: must be from 1 to 65536, got '1000000'" \
  "$fedcaf" dp-profile -c "$tmp/dpp.yaml" -o "$tmp/dpp_out"
# IDX files are checked at load: magic, dimensions, size, labels, counts.
idx() { # dir prefix count rows cols label-of-sample-3 [labels count]
  "$py" - "$@" <<'PY'
import gzip, struct, sys
d, prefix, n, rows, cols, bad = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
nl = int(sys.argv[7]) if len(sys.argv) > 7 else n
with gzip.open(f"{d}/{prefix}-images-idx3-ubyte.gz", "wb") as f:
    f.write(struct.pack(">IIII", 0x803, n, rows, cols) + bytes(n * rows * cols))
labels = bytearray(i % 10 for i in range(nl)); labels[3] = bad
with gzip.open(f"{d}/{prefix}-labels-idx1-ubyte.gz", "wb") as f:
    f.write(struct.pack(">II", 0x801, nl) + bytes(labels))
PY
}
mkdir -p "$tmp/idx_label" "$tmp/idx_side" "$tmp/idx_count" "$tmp/idx_magic"
idx "$tmp/idx_label" t10k 10 28 28 12
expect_error "t10k-labels-idx1-ubyte.gz: label 12 of sample 3 is not a class from 0 to 9" \
  "$fedcaf" simulate --set "data_configs.dataset_path=$tmp/idx_label"
idx "$tmp/idx_side" t10k 10 32 32 3
expect_error "t10k-images-idx3-ubyte.gz: images of 32 x 32 pixels; Fashion-MNIST's are 28 x 28" \
  "$fedcaf" simulate --set "data_configs.dataset_path=$tmp/idx_side"
idx "$tmp/idx_count" t10k 10 28 28 3 12
expect_error "hold different sample counts (10 images, 12 labels)" \
  "$fedcaf" simulate --set "data_configs.dataset_path=$tmp/idx_count"
# A bad training split stops simulate before the run (not a client in it,
# after the server's grace period).
mkdir -p "$tmp/idx_train"
idx "$tmp/idx_train" t10k 10 28 28 3
idx "$tmp/idx_train" train 10 28 28 200
expect_error "train-labels-idx1-ubyte.gz: label 200 of sample 3 is not a class from 0 to 9" \
  timeout 20 "$fedcaf" simulate --set "data_configs.dataset_path=$tmp/idx_train"
printf 'not an idx file at all' | gzip > "$tmp/idx_magic/t10k-images-idx3-ubyte.gz"
cp "$tmp/idx_count/t10k-labels-idx1-ubyte.gz" "$tmp/idx_magic/"
expect_error "t10k-images-idx3-ubyte.gz: not an IDX file of rank 3" \
  "$fedcaf" simulate --set "data_configs.dataset_path=$tmp/idx_magic"
"$fedcaf" --help | grep -q "usage: fedcaf" || { echo "FAIL: --help"; fails=$((fails + 1)); }
"$fedcaf" simulate --help | grep -q -- "--set" || { echo "FAIL: simulate --help"; fails=$((fails + 1)); }
# One command's help has only that command's options; --version; options
# of another command are refused.
"$fedcaf" --version | grep -qE "^fedcaf [0-9]+\.[0-9]+\.[0-9]+$" ||
  { echo "FAIL: --version"; fails=$((fails + 1)); }
"$fedcaf" server --help | grep -q -- "--metrics" ||
  { echo "FAIL: server --help lacks --metrics"; fails=$((fails + 1)); }
if "$fedcaf" client --help | grep -q -- "--metrics"; then
  echo "FAIL: client --help shows --metrics"; fails=$((fails + 1))
fi
if [ "$("$fedcaf" server --help)" = "$("$fedcaf" simulate --help)" ]; then
  echo "FAIL: server --help is simulate --help"; fails=$((fails + 1))
fi
expect_error "unknown option '--metrics'" "$fedcaf" client --metrics m.jsonl
# APPFL's server_fedavg.yaml layout (its keys but the Python-file ones, which
# fedcaf refuses): loads with one warning naming every ignored key; --strict
# refuses them; all errors at once, a --set mistake blamed on --set.
cat > "$tmp/server_fedavg.yaml" <<'YAML'
client_configs:
  train_configs:
    trainer: "VanillaTrainer"
    mode: "step"
    num_local_steps: 2
    optim: "Adam"
    optim_args: {lr: 0.001}
    do_validation: True
    do_pre_validation: True
    metric_name: "accuracy"
    use_dp: False
    epsilon: 1
    clip_grad: False
    clip_value: 1
    clip_norm: 1
    train_batch_size: 64
    val_batch_size: 64
    train_data_shuffle: True
    val_data_shuffle: False
  model_configs:
    model_name: "CNN"
    model_kwargs: {num_channel: 1, num_classes: 10, num_pixel: 28}
server_configs:
  num_clients: 2
  scheduler: "SyncScheduler"
  scheduler_kwargs: {same_init_model: True}
  aggregator: "FedAvgAggregator"
  aggregator_kwargs: {client_weights_mode: "equal"}
  device: "cpu"
  num_global_epochs: 1
  logging_output_dirname: "./output"
  logging_output_filename: "result"
  comm_configs:
    grpc_configs: {server_uri: "localhost:50051", max_message_size: 1048576, use_ssl: False}
YAML
appfl_out=$("$fedcaf" simulate -c "$tmp/server_fedavg.yaml" 2>&1)
warnings=$(grep -c "warning" <<<"$appfl_out")
if [ $? -ne 0 ] && false; then :; fi
if [ "$warnings" -ne 1 ] || ! grep -q "ignored 12 keys fedcaf does not use: server_configs.logging_output_dirname" <<<"$appfl_out" ||
   ! grep -q "final test accuracy" <<<"$appfl_out"; then
  echo "FAIL: APPFL's layout: $appfl_out"; fails=$((fails + 1))
fi
expect_error "keys fedcaf does not use (--strict): server_configs.logging_output_dirname" \
  "$fedcaf" simulate -c "$tmp/server_fedavg.yaml" --strict
expect_error "--set server_configs.num_global_epochs: expected a whole number" \
  "$fedcaf" simulate --set server_configs.num_global_epochs=x --set server_configs.bogus=1
expect_error "--set server_configs.bogus: unknown key" \
  "$fedcaf" simulate --set server_configs.num_global_epochs=x --set server_configs.bogus=1
expect_error "unknown option '--out'" "$fedcaf" server -c "$src/configs/server.yaml" --out d
expect_error "--sample-rate must be in (0, 1]" "$fedcaf" dp-epsilon \
  --noise-multiplier 1 --sample-rate 2 --steps 10 --delta 1e-5
expect_error "--delta is required" "$fedcaf" dp-sigma --epsilon 8 \
  --sample-rate 0.04 --steps 10
expect_error "--steps: 'ten' is not a number" "$fedcaf" dp-epsilon \
  --noise-multiplier 1 --sample-rate 0.1 --steps ten --delta 1e-5
# The accountant's commands print their answer on the last line.
last=$("$fedcaf" dp-epsilon --noise-multiplier 1.5 --sample-rate 0.04 \
  --steps 2250 --delta 1e-5 | tail -1)
[ "$last" = "epsilon=7.3291111714" ] || { echo "FAIL: dp-epsilon: $last"; fails=$((fails + 1)); }
last=$("$fedcaf" dp-sigma --epsilon 8 --sample-rate 0.04 --steps 2000 \
  --delta 1e-5 | tail -1)
[[ "$last" == noise_multiplier=1.3561* ]] || { echo "FAIL: dp-sigma: $last"; fails=$((fails + 1)); }
exit $fails

#!/usr/bin/env bash
# Installable: cpack's Debian packages, fedcaf and fedcaf-torch, unpacked
# into a temporary root, run what they ship from / (outside the checkout and
# the build tree):
#   - the control files: fedcaf depends on what its command and Python
#     module load (every library they need, python3, python3-numpy) and only
#     recommends LibTorch's plugin and the data set; fedcaf-torch depends on
#     LibTorch;
#   - fedcaf alone: --version, the Python package imports, a run that needs
#     no LibTorch completes, one that does stops with one line naming
#     fedcaf-torch; a plugin whose LibTorch is missing, one line naming
#     libtorch1.13;
#   - both packages: hardened binaries (hardening-check, where installed);
#     the installed run-local.sh runs the fedcaf on PATH; every installed
#     config runs, kept short with --set (one round, few clients, few
#     steps, small models), server configs with their clients (fedcaf
#     client, or the installed Python examples), after the installed
#     examples wrote the files it names; each config that reads
#     Fashion-MNIST, and the examples that do, say to install
#     dataset-fashion-mnist when it is missing; a config whose file is
#     missing names the absolute path and the installed example that writes
#     it. A config installed and not run here fails the test.
#   package_test.sh BUILD_DIR [CPACK] [PYTHON]
set -u
build=$1; cpack=${2:-cpack}; python=${3:-/usr/bin/python3}
. "$(dirname "$0")/lib.sh"
started=$SECONDS
root=$out/root
fedcaf=$root/usr/bin/fedcaf
share=$root/usr/share/fedcaf
cfg=$share/configs
ex=$share/examples
work=$out/work
mkdir -p "$work"
die() { echo "FAIL: $*"; exit 1; }

"$cpack" --config "$build/CPackConfig.cmake" -G DEB -B "$out/pkg" > "$out/cpack.log" 2>&1 ||
  { cat "$out/cpack.log"; die "cpack"; }
deb=$(ls "$out"/pkg/fedcaf_*.deb) || die "no fedcaf package"
torch_deb=$(ls "$out"/pkg/fedcaf-torch_*.deb) || die "no fedcaf-torch package"
for d in "$deb" "$torch_deb"; do
  echo "package: $(basename "$d"), $(du -k "$d" | cut -f1) KiB"
  for field in Depends Recommends Suggests; do
    echo "  $field: $(dpkg-deb -f "$d" "$field")"
  done
done

# The control files. Every library a packaged ELF file needs belongs to a
# package its Depends names (itself, or through a Provides), and every
# Depends is met by what this Debian 12 machine has installed (or by the
# other package), as dpkg -i would require.
dpkg-deb -x "$deb" "$root" || die "dpkg-deb -x $deb"
mkdir -p "$out/torch_root"
dpkg-deb -x "$torch_deb" "$out/torch_root" || die "dpkg-deb -x $torch_deb"
# /usr/share/doc/<package>: README (and for fedcaf the pages of docs/),
# copyright, changelog; a maintainer that is no placeholder.
for d in "$root/usr/share/doc/fedcaf" "$out/torch_root/usr/share/doc/fedcaf-torch"; do
  [ -s "$d/copyright" ] && [ -s "$d/changelog.Debian.gz" ] &&
    zcat "$d/changelog.Debian.gz" | head -1 | grep -q "^fedcaf (" ||
    die "$d lacks its copyright file or changelog"
done
[ -s "$root/usr/share/doc/fedcaf/README.md" ] || die "no /usr/share/doc/fedcaf/README.md"
for page in "$(dirname "$0")"/../../docs/*.md; do
  [ -s "$root/usr/share/doc/fedcaf/docs/${page##*/}" ] ||
    die "no /usr/share/doc/fedcaf/docs/${page##*/}"
done
maintainer=$(dpkg-deb -f "$deb" Maintainer)
case $maintainer in
  *localhost*|"") die "a placeholder Maintainer: '$maintainer'" ;;
esac
echo "  /usr/share/doc/fedcaf: $(ls "$root/usr/share/doc/fedcaf" | tr '\n' ' ')"
echo "  Maintainer: $maintainer"
"$python" - "$deb" "$root" "$torch_deb" "$out/torch_root" <<'PY' || die "control files"
import os, re, subprocess, sys

def field(deb, name):
    return subprocess.run(["dpkg-deb", "-f", deb, name], capture_output=True,
                          text=True).stdout.strip()

def names(deps):
    return {re.split(r"[ (]", d.strip())[0] for a in deps.split(",") if a.strip()
            for d in a.split("|")}

def needed_packages(tree):
    """soname -> the package owning it, for what ELF files under tree need."""
    libs = {}
    for line in subprocess.run(["ldconfig", "-p"], capture_output=True,
                               text=True).stdout.splitlines()[1:]:
        m = re.match(r"\s*(\S+) \(([^)]*)\) => (\S+)", line)
        if m and "x86-64" in m.group(2):
            libs.setdefault(m.group(1), m.group(3))
    needed = set()
    for d, _, files in os.walk(tree):
        for f in files:
            p = os.path.join(d, f)
            if os.path.islink(p) or open(p, "rb").read(4) != b"\x7fELF":
                continue
            dyn = subprocess.run(["objdump", "-p", p], capture_output=True,
                                 text=True).stdout
            needed |= set(re.findall(r"NEEDED\s+(\S+)", dyn))
    # The names dpkg may know a library by (merged /usr or not): one query.
    names = {}
    for so in needed:
        assert so in libs, f"{so} is needed, and this machine lacks it"
        for path in (libs[so], os.path.realpath(libs[so])):
            for variant in (path, path.removeprefix("/usr"), "/usr" + path):
                names.setdefault(variant, so)
    owners = {}
    out = subprocess.run(["dpkg", "-S", *names], capture_output=True,
                         text=True).stdout
    for line in out.splitlines():
        pkgs, _, path = line.partition(": ")
        if path in names:
            owners.setdefault(names[path], pkgs.split(",")[0].split(":")[0])
    assert set(owners) == needed, f"no package owns {needed - set(owners)}"
    return owners

# What this machine has installed: name -> (version, names it provides).
installed = {}
for line in subprocess.run(
        ["dpkg-query", "-W", "-f=${Package}\t${Status}\t${Version}\t${Provides}\n"],
        capture_output=True, text=True).stdout.splitlines():
    pkg, status, version, provides = line.split("\t")
    if status.endswith(" installed"):
        installed[pkg] = (version, names(provides) | {pkg})

def satisfied(clause, ours):
    """Whether an installed package (or one of `ours`: name -> version)
    meets one alternative of a Depends clause."""
    for alt in clause.split("|"):
        m = re.match(r"\s*(\S+)(?:\s*\((\S+)\s+(\S+)\))?", alt)
        name, op, want = m.groups()
        have = [ours[name]] if name in ours else [
            v for v, prov in installed.values() if name in prov]
        for version in have:
            if not op or subprocess.run(["dpkg", "--compare-versions", version,
                                         op, want]).returncode == 0:
                return True
    return False

deb, root, torch_deb, torch_root = sys.argv[1:]
ours = {field(d, "Package"): field(d, "Version") for d in (deb, torch_deb)}
for d, tree in ((deb, root), (torch_deb, torch_root)):
    deps = field(d, "Depends")
    depends = names(deps)
    for so, pkg in needed_packages(tree).items():
        assert installed[pkg][1] & depends, \
            f"{os.path.basename(d)}: {so} is {pkg}'s, not in Depends {sorted(depends)}"
    for clause in deps.split(","):
        assert satisfied(clause, ours), \
            f"{os.path.basename(d)}: nothing installed here meets '{clause.strip()}'"
main = names(field(deb, "Depends"))
for optional in ("libtorch1.13", "dataset-fashion-mnist", "python3-torch",
                 "fedcaf-torch"):
    assert optional not in main, f"fedcaf Depends on {optional}"
assert {"python3", "python3-numpy"} <= main, main
rec = names(field(deb, "Recommends"))
assert {"fedcaf-torch", "dataset-fashion-mnist", "python3-torch"} <= rec, rec
assert "libtorch1.13" in names(field(torch_deb, "Depends"))
print("control files: Depends cover every library loaded and are met by "
      "Debian's packages here; LibTorch, the data set and PyTorch are "
      "recommended")
PY

cd / || exit 1
minor=$("$python" -c 'import sys; print(sys.version_info[1])')
export PYTHONPATH=$root/usr/lib/python3.$minor/dist-packages
"$fedcaf" --version || die "--version"
"$python" -c "import fedcaf, os; assert fedcaf.__file__.startswith('$out'), fedcaf.__file__; print('python package:', os.path.dirname(fedcaf.__file__))" ||
  die "the Python package does not import"
[ -x "$share/deploy/run-local.sh" ] && [ -x "$share/deploy/slurm/fedcaf.sbatch" ] &&
  [ -x "$ex/fashion_mnist.py" ] && [ -f "$ex/resnet_bn.py" ] ||
  die "deploy scripts or examples missing or not executable in share/fedcaf"

# refused NAME PATTERN CMD...: CMD exits 1 with one line that matches
# PATTERN (for fedcaf, its one error line "fedcaf: ...").
refused() {
  local log=$out/$1.log pattern=$2; shift 2
  timeout 60 "$@" > "$log" 2>&1
  local rc=$?
  [ $rc -eq 1 ] || { cat "$log"; fail "$* exited $rc, not 1"; return; }
  [ "$(grep -c -- "$pattern" "$log")" -eq 1 ] &&
    [ "$(grep '^fedcaf: ' "$log" | grep -vc '^fedcaf: warning')" -le 1 ] ||
    { cat "$log"; fail "$*: not one line matching '$pattern'"; return; }
  pass "$(basename "$log" .log): $(grep -m1 -- "$pattern" "$log" | cut -c1-160)"
}
# completed REPORT...: every report says completed (clients: ok).
completed() {
  "$python" - "$@" <<'PY'
import json, sys
for path in sys.argv[1:]:
    r = json.load(open(path))
    ok = r["status"] == "completed" and r.get("ok", True)
    assert ok, (path, r["status"], r.get("failure"))
print("completed:", " ".join(p.rsplit("/", 1)[1] for p in sys.argv[1:]))
PY
}
covered=()
# run NAME CONFIG... -- CMD...: CMD completes (exit 0, its reports say so).
runs() {
  local name=$1; shift
  while [ "$1" != -- ]; do covered+=("$1"); shift; done
  shift
  local t0=$SECONDS
  timeout 120 "$@" > "$out/$name.log" 2>&1 ||
    { tail -15 "$out/$name.log"; fail "$name: $* exited $?"; return 1; }
  pass "$name ($((SECONDS - t0)) s)"
}

one_round=(--set server_configs.num_global_epochs=1)
steps=(--set client_configs.train_configs.mode=step
       --set client_configs.train_configs.num_local_steps=5)
# Testing 10,000 images takes seconds: simulate.yaml's run alone does.
no_test=(--set server_configs.evaluate=false)
tiny=(--set client_configs.model_configs.total_bytes=1048576)

# fedcaf alone: runs that need no LibTorch, and one line for those that do.
runs synthetic_dummy synthetic_dummy.yaml -- \
  "$fedcaf" simulate -c "$cfg/synthetic_dummy.yaml" "${one_round[@]}" "${tiny[@]}" \
  --report "$work/synthetic.json" && completed "$work/synthetic.json"
refused no_plugin "install the fedcaf-torch package" \
  "$fedcaf" simulate "${one_round[@]}"
# A plugin whose LibTorch is missing: a copy whose first LibTorch library
# has another name, beside a copy of the command.
mkdir -p "$out/broken/usr/bin" "$out/broken/usr/lib/fedcaf"
cp "$fedcaf" "$out/broken/usr/bin/"
"$python" - "$out/torch_root/usr/lib/fedcaf/libfedcaf_torch.so" \
  "$out/broken/usr/lib/fedcaf/libfedcaf_torch.so" <<'PY' || die "could not rename a needed library"
import sys
data = open(sys.argv[1], "rb").read()
name = b"\0libtorch_cpu.so.1.13\0"
assert data.count(name) == 1, data.count(name)
open(sys.argv[2], "wb").write(data.replace(name, b"\0libtorch_cpu.so.0.00\0"))
PY
refused no_libtorch "install Debian's libtorch1.13" \
  "$out/broken/usr/bin/fedcaf" simulate "${one_round[@]}"

# Both packages.
dpkg-deb -x "$torch_deb" "$root" || die "dpkg-deb -x $torch_deb"
# The packaged binaries are hardened (CMakeLists.txt, FEDCAF_HARDEN): PIE,
# stack protector, _FORTIFY_SOURCE, RELRO and BIND_NOW, checked by Debian's
# hardening-check (devscripts) where it is installed. Control-flow
# protection (-fcf-protection) is not asked for. The plugin is built with
# _FORTIFY_SOURCE=2 too, but none of its libc calls has a size the compiler
# knows (it copies into tensors and vectors), so no call is fortified and
# hardening-check cannot see it: not asked of the plugin.
if command -v hardening-check > /dev/null; then
  hardening-check --nocfprotection "$fedcaf" &&
    hardening-check --nocfprotection --nofortify \
      "$root/usr/lib/fedcaf/libfedcaf_torch.so" ||
    die "hardening-check"
else
  echo "hardening-check not installed (Debian's devscripts): not checked"
fi

# The Fashion-MNIST configs, one round of a few steps.
runs simulate simulate.yaml -- \
  "$fedcaf" simulate -c "$cfg/simulate.yaml" "${one_round[@]}" "${steps[@]}" \
  --report "$work/simulate.json" && completed "$work/simulate.json" &&
  "$python" - "$work/simulate.json" <<'PY' || fail "simulate.yaml learned nothing"
import json, sys
acc = json.load(open(sys.argv[1]))["rounds"][-1]["test_accuracy"]
assert acc > 0.3, acc  # chance: 0.1
print(f"the installed fedcaf with its plugin, from /: accuracy {acc:.4f} after 5 steps")
PY
runs noniid_10 noniid_10.yaml -- \
  "$fedcaf" simulate -c "$cfg/noniid_10.yaml" "${one_round[@]}" "${steps[@]}" "${no_test[@]}" \
  --set server_configs.num_clients=3 --set data_configs.dataset_kwargs.num_clients=3 \
  --set server_configs.scheduler_kwargs.min_clients=2 \
  --report "$work/noniid.json" && completed "$work/noniid.json"
runs simulate_1000 simulate_1000.yaml -- \
  "$fedcaf" simulate -c "$cfg/simulate_1000.yaml" "${one_round[@]}" "${steps[@]}" "${no_test[@]}" \
  --set server_configs.num_clients=20 --set data_configs.dataset_kwargs.num_clients=20 \
  --set server_configs.scheduler_kwargs.clients_per_round=2 \
  --set server_configs.scheduler_kwargs.min_clients=1 \
  --report "$work/simulate_1000.json" && completed "$work/simulate_1000.json"
runs dp_sgd dp_sgd.yaml -- \
  "$fedcaf" simulate -c "$cfg/dp_sgd.yaml" "${one_round[@]}" "${steps[@]}" "${no_test[@]}" \
  --report "$work/dp_sgd.json" && completed "$work/dp_sgd.json"

# A server config with its clients, as processes: `serve NAME CONFIG
# ARGS...` starts the server (NAME.json its report), `start_client NAME
# CMD...` a client, `settle NAME REPORTS...` waits for them all and checks
# the reports.
serve() {
  local name=$1 config=$2; shift 2
  covered+=("$config")
  port=$(free_port)
  uri=(--set comm_configs.grpc_configs.server_uri=127.0.0.1:$port)
  timeout 120 "$fedcaf" server -c "$cfg/$config" "${one_round[@]}" "$@" \
    --set server_configs.comm_configs.grpc_configs.server_uri=127.0.0.1:$port \
    --report "$work/$name.json" > "$out/$name.log" 2>&1 &
  pids+=($!)
}
start_client() {
  local name=$1; shift
  timeout 120 "$@" "${uri[@]}" > "$out/$name.log" 2>&1 &
  pids+=($!)
}
settle() {
  local name=$1 p ok=1; shift
  for p in "${pids[@]}"; do wait "$p" || ok=0; done
  pids=()
  [ $ok = 1 ] && completed "$@" && pass "$name" ||
    { tail -n 5 "$out"/*.log; fail "$name"; }
}

serve server server.yaml "${steps[@]}" "${no_test[@]}"
for i in 1 2; do
  covered+=(client_$i.yaml)
  start_client client_$i "$fedcaf" client -c "$cfg/client_$i.yaml" --report "$work/client_$i.json"
done
settle "server.yaml with client_1.yaml and client_2.yaml" \
  "$work/server.json" "$work/client_1.json" "$work/client_2.json"

serve llm_server server_llm_dummy.yaml "${tiny[@]}"
for i in 1 2; do
  covered+=(client_${i}_llm_dummy.yaml)
  start_client llm_client_$i "$fedcaf" client -c "$cfg/client_${i}_llm_dummy.yaml" \
    --report "$work/llm_client_$i.json"
done
settle "server_llm_dummy.yaml with its two client configs (1 MiB model)" \
  "$work/llm_server.json" "$work/llm_client_1.json" "$work/llm_client_2.json"

# The installed launch scripts run the fedcaf on PATH.
port=$(free_port)
cat > "$work/launch_server.yaml" <<YAML
server_configs:
  num_global_epochs: 1
  comm_configs: {grpc_configs: {server_uri: 127.0.0.1:$port}}
client_configs:
  train_configs: {trainer: dummy, add: 0.5}
  model_configs: {name: synthetic, num_tensors: 4, total_bytes: 1048576}
YAML
printf 'client_id: ClientX\ndata_configs: {dataset_kwargs: {num_clients: 2, client_id: 0}}\ncomm_configs: {grpc_configs: {server_uri: 127.0.0.1:%s}}\n' \
  "$port" > "$work/launch_client.yaml"
PATH=$root/usr/bin:$PATH LOG_DIR=$work/launch timeout 120 "$share/deploy/run-local.sh" 2 \
  "$work/launch_server.yaml" "$work/launch_client.yaml" > "$out/launch.log" 2>&1 &&
  completed "$work/launch/server.json" "$work/launch/client1.json" "$work/launch/client2.json" &&
  pass "share/fedcaf/deploy/run-local.sh with the fedcaf on PATH" ||
  { cat "$out/launch.log"; fail "the installed run-local.sh"; }

# The configs whose model and data files the examples write: the files
# they name (relative to the config's folder: the checkout's build/) are
# missing, and the line says which file and which installed example writes
# it.
refused torchscript_missing \
  "'$share/build/examples/cnn.pt' is not a file.*python3 $ex/export_torchscript.py -o FILE" \
  "$fedcaf" simulate -c "$cfg/torchscript.yaml"
refused server_python_missing \
  "'$share/build/examples/fashion_mnist_cnn.safetensors' is not a file.*python3 $ex/fashion_mnist.py --init FILE" \
  "$fedcaf" server -c "$cfg/server_python.yaml"

# torchscript.yaml: the installed examples write the model and the tensors.
timeout 120 "$python" "$ex/export_torchscript.py" -o "$work/cnn.pt" > "$out/export.log" 2>&1 &&
  timeout 120 "$python" "$ex/export_tensors.py" -o "$work/fm" >> "$out/export.log" 2>&1 ||
  { cat "$out/export.log"; fail "the installed examples' exports"; }
kw=data_configs.dataset_kwargs
runs torchscript torchscript.yaml -- \
  "$fedcaf" simulate -c "$cfg/torchscript.yaml" "${one_round[@]}" "${steps[@]}" \
  --set server_configs.federated_evaluation=false \
  --set client_configs.model_configs.path="$work/cnn.pt" \
  --set $kw.train_features="$work/fm/train_features.npy" \
  --set $kw.train_labels="$work/fm/train_labels.npy" \
  --set $kw.test_features="$work/fm/test_features.npy" \
  --set $kw.test_labels="$work/fm/test_labels.npy" \
  --report "$work/torchscript.json" && completed "$work/torchscript.json"

# python_server NAME CONFIG EXAMPLE MODEL [EXAMPLE_ARGS...]: the installed
# example writes MODEL, the server reads it, two clients of the example
# (client_1.yaml, client_2.yaml) train.
python_server() {
  local name=$1 config=$2 example=$3 model=$4 i; shift 4
  timeout 120 "$python" "$ex/$example" --init "$model" > "$out/${name}_init.log" 2>&1 ||
    { cat "$out/${name}_init.log"; fail "$example --init"; return; }
  serve "$name" "$config" --set client_configs.model_configs.path="$model"
  for i in 1 2; do
    start_client "${name}_client_$i" "$python" "$ex/$example" -c "$cfg/client_$i.yaml" "$@"
  done
  settle "$config with two clients of the installed $example" "$work/$name.json"
}
# A 1-in-50 share of Fashion-MNIST each: the example tests every model it
# receives on its share of the test set.
python_server server_python server_python.yaml fashion_mnist.py \
  "$work/cnn.safetensors" --steps 3 --set data_configs.dataset_kwargs.num_clients=50
python_server server_llm_python server_llm_python.yaml causal_lm_bf16.py \
  "$work/lm.safetensors" --steps 2 --bytes 262144
# The profile and dp-profile configs, on the smallest matrix.
runs profile profile_small.yaml -- \
  "$fedcaf" profile -c "$cfg/profile_small.yaml" -o "$work/profile" \
  --set 'sizes_mib=[1]' --set 'chunking=[true]' --set 'memory_modes=[ram]' \
  --set rounds=1 --set timeout_s=60
runs dp_profile dp_profile.yaml -- \
  "$fedcaf" dp-profile -c "$cfg/dp_profile.yaml" -o "$work/dp_profile" \
  --set 'seq_lengths=[16]' --set 'modes=[none, fused]' --set repeats=1 \
  --set num_iter=1 --set model.vocab_size=256 --set model.d_model=32 \
  --set model.d_ff=64 --set model.num_layers=1 --set timeout_s=60

# Without the data set: each Fashion-MNIST config, and the examples that
# read it, say which package to install.
for c in simulate noniid_10 simulate_1000 dp_sgd; do
  refused no_data_$c "install dataset-fashion-mnist" \
    "$fedcaf" simulate -c "$cfg/$c.yaml" --set data_configs.dataset_path="$out/no-dataset"
done
refused no_data_server "install dataset-fashion-mnist" \
  "$fedcaf" server -c "$cfg/server.yaml" --set data_configs.dataset_path="$out/no-dataset"
for i in 1 2; do
  refused no_data_client_$i "install dataset-fashion-mnist" \
    "$fedcaf" client -c "$cfg/client_$i.yaml" --set data_configs.dataset_path="$out/no-dataset"
done
refused no_data_example "install dataset-fashion-mnist" \
  "$python" "$ex/fashion_mnist.py" -c "$cfg/client_1.yaml" \
  --set data_configs.dataset_path="$out/no-dataset"
refused no_data_export "install dataset-fashion-mnist" \
  "$python" "$ex/export_tensors.py" -d "$out/no-dataset" -o "$work/none"

# Every installed config was run.
for f in "$cfg"/*.yaml; do
  printf '%s\n' "${covered[@]}" | grep -qx "$(basename "$f")" ||
    fail "installed config $(basename "$f") is not run by this test"
done
echo "package test: $((SECONDS - started)) s"
finish

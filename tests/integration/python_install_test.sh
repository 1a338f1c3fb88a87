#!/usr/bin/env bash
# The Python client installs into a user's own environment: a fresh venv of
# a Python that is not Debian's (pyenv's where present), `pip install` of the
# source tree offline (--no-build-isolation --no-index, pip's machine config
# left out), then the README's Python example (examples/python/
# fashion_mnist.py, two clients) against `fedcaf server -c
# configs/server_python.yaml` on 127.0.0.1, FEDCAF_PIP_ROUNDS rounds
# (default 1), its federated accuracy checked.
#
#   python_install_test.sh FEDCAF SOURCE_DIR PIP_BUILD_DIR [PYTHON]
# pip builds in PIP_BUILD_DIR-cpXY: a folder beside build/ (the same depth)
# with the main build's flags (-DFEDCAF_WERROR=ON), so that the compiler
# cache serves the core libraries the main build compiled.
# PYTHON: the interpreter (default $FEDCAF_TEST_PYTHON, else the newest
# pyenv CPython 3.11). Its venv gets numpy, torch and PyYAML (what the
# example imports) from the interpreter itself where it has them
# (--system-site-packages); else, for CPython 3.11, from Debian's
# python3-numpy, python3-torch and python3-yaml, which are built for the
# CPython 3.11 ABI that every 3.11 interpreter shares: a .pth file in the venv
# names a folder of links to just those packages (nothing else of Debian's
# Python), and pip sees their metadata, so the wheel's numpy requirement
# holds offline. Skipped (77) without such an interpreter or packages, or
# without Fashion-MNIST.
set -u
fedcaf=$1; src=$2; pip_build=$3
python=${4:-${FEDCAF_TEST_PYTHON:-}}
rounds=${FEDCAF_PIP_ROUNDS:-1}
data=/usr/share/datasets/fashion-mnist
if [ -z "$python" ]; then
  python=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.11.*/bin/python3 2> /dev/null |
           sort -V | tail -1)
fi
[ -n "$python" ] && [ -x "$python" ] ||
  { echo "skipped: no non-Debian Python (set FEDCAF_TEST_PYTHON)"; exit 77; }
[ -e "$data/train-images-idx3-ubyte.gz" ] || { echo "skipped: no $data"; exit 77; }
. "$(dirname "$0")/lib.sh"
unset PYTHONPATH
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1
echo "interpreter: $python ($("$python" -c 'import sys; print(sys.version.split()[0])'))"

venv=$out/venv
if "$python" -c "import numpy, torch, yaml" 2> /dev/null; then
  "$python" -m venv --system-site-packages "$venv" || exit 1
  echo "numpy, torch, PyYAML: the interpreter's own"
elif "$python" -c "import sys; sys.exit(sys.implementation.name != 'cpython' or sys.version_info[:2] != (3, 11))" &&
     [ -d /usr/lib/python3/dist-packages/numpy ] && [ -d /usr/lib/python3/dist-packages/torch ] &&
     [ -d /usr/lib/python3/dist-packages/yaml ]; then
  "$python" -m venv "$venv" || exit 1
  deb=/usr/lib/python3/dist-packages
  links=$venv/debian-cp311
  mkdir -p "$links"
  for p in numpy numpy-*.egg-info torch torch-*.egg-info typing_extensions.py \
           typing_extensions-*.dist-info yaml _yaml PyYAML-*.dist-info; do
    for path in $deb/$p; do [ -e "$path" ] && ln -s "$path" "$links/"; done
  done
  site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  echo "$links" > "$site/debian-cp311.pth"
  echo "numpy, torch, PyYAML: Debian's CPython 3.11 builds, linked into the venv"
else
  echo "skipped: $python has no numpy, torch and PyYAML, and is not a CPython 3.11"
  exit 77
fi
"$venv/bin/python" -c "import numpy" || { fail "no numpy in the venv"; finish; }

tag=$("$venv/bin/python" -c "import sys; print(f'cp{sys.version_info[0]}{sys.version_info[1]}')")
start=$(date +%s)
if timeout 1200 "$venv/bin/python" -m pip install --no-build-isolation --no-index \
     --config-settings build-dir="$pip_build-$tag" --config-settings parallel=2 \
     --config-settings cmake-args=-DFEDCAF_WERROR=ON "$src" > "$out/pip.log" 2>&1; then
  pass "pip install --no-build-isolation --no-index of the source tree ($(( $(date +%s) - start )) s)"
else
  cat "$out/pip.log"; fail "pip install"; finish
fi
module=$(cd "$out" && "$venv/bin/python" -c "import fedcaf._fedcaf as m; print(m.__file__)") ||
  { fail "import fedcaf in the venv"; finish; }
case $module in
  "$venv"/*) pass "import fedcaf: $module" ;;
  *) fail "fedcaf imported from $module, not the venv" ;;
esac
if ldd "$module" | grep -qi torch; then fail "the module links LibTorch"; else pass "no LibTorch linked"; fi

# The README's example, as the README gives it, with the venv's python3.
(cd "$out" && "$venv/bin/python3" "$src/examples/python/fashion_mnist.py" --init "$out/init.safetensors") ||
  { fail "fashion_mnist.py --init"; finish; }
uri=127.0.0.1:$(free_port)
timeout 900 "$fedcaf" server -c "$src/configs/server_python.yaml" \
  --set server_configs.comm_configs.grpc_configs.server_uri=$uri \
  --set server_configs.num_global_epochs="$rounds" \
  --set client_configs.model_configs.path="$out/init.safetensors" \
  --report "$out/server.json" > "$out/server.log" 2>&1 & pids+=($!); server=$!
clients=()
for i in 1 2; do
  (cd "$out" && exec timeout 900 "$venv/bin/python3" "$src/examples/python/fashion_mnist.py" \
     -c "$src/configs/client_$i.yaml" --set comm_configs.grpc_configs.server_uri=$uri) \
    > "$out/client_$i.log" 2>&1 & pids+=($!); clients+=($!)
done
rc=0
wait $server || rc=$?
for c in "${clients[@]}"; do wait $c || rc=$?; done
cat "$out/server.log" "$out/client_1.log"
[ $rc -eq 0 ] || { fail "a process exited $rc"; cat "$out/client_2.log"; finish; }
"$venv/bin/python" - "$out/server.json" "$rounds" <<'PY' && pass "the README's example in the venv" || fail "the README's example in the venv"
import json, sys
r = json.load(open(sys.argv[1]))
rounds = int(sys.argv[2])
assert r["ok"], r["failure"]
assert len(r["rounds"]) == rounds, r["rounds"]
acc = r["rounds"][-1]["test_accuracy"]
print(f"federated accuracy after {rounds} round(s): {acc:.4f}")
assert acc >= (0.85 if rounds >= 3 else 0.75), acc
PY
finish

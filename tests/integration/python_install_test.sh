#!/usr/bin/env bash
# The Python client installs into a user's own environment with the one
# command docs/getting-started.md gives: tools/fedcaf-venv DIR --python
# PYTHON, where PYTHON
# is not Debian's (pyenv's where present) and no index is reachable (pip's
# machine config left out). The helper makes the venv (numpy, torch and
# PyYAML from the interpreter, else Debian's CPython 3.11 builds linked in),
# builds the client through pip and the build backend, keeps the wheel, and
# installs it; its first run is timed, with the backend's progress lines
# checked. Then that page's Python example (examples/python/
# fashion_mnist.py, two clients) against `fedcaf server -c
# configs/server_python.yaml` on 127.0.0.1, FEDCAF_PIP_ROUNDS rounds
# (default 1), its federated accuracy checked. Last, the two reinstalls of
# the kept wheel, timed (seconds, not a build): the same command for a second
# venv, and `pip install --no-index --find-links WHEELS fedcaf` into a third.
#
#   python_install_test.sh FEDCAF SOURCE_DIR PIP_BUILD_DIR [PYTHON]
# pip builds in PIP_BUILD_DIR-cpXY: a folder beside build/ (the same depth)
# with the main build's flags (-DFEDCAF_WERROR=ON), so that the compiler
# cache serves the core libraries the main build compiled; a rerun builds
# incrementally. The wheels are kept in a fresh folder, so that the first
# install always runs the backend.
# PYTHON: the interpreter (default $FEDCAF_TEST_PYTHON, else the newest
# pyenv CPython 3.11). Skipped (77) without such an interpreter, where the
# helper says it cannot give it numpy, torch and PyYAML offline (exit 3), or
# without Fashion-MNIST.
set -u
fedcaf=$1; src=$2; pip_build=$3
python=${4:-${FEDCAF_TEST_PYTHON:-}}
rounds=${FEDCAF_PIP_ROUNDS:-1}
data=/usr/share/datasets/fashion-mnist
reinstall_limit_s=60 # a build of the client takes minutes; a reinstall, seconds
if [ -z "$python" ]; then
  python=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.11.*/bin/python3 2> /dev/null |
           sort -V | tail -1)
fi
[ -n "$python" ] && [ -x "$python" ] ||
  { echo "skipped: no non-Debian Python (set FEDCAF_TEST_PYTHON)"; exit 77; }
[ -e "$data/train-images-idx3-ubyte.gz" ] || { echo "skipped: no $data"; exit 77; }
. "$(dirname "$0")/lib.sh"
unset PYTHONPATH PIP_FIND_LINKS PIP_INDEX_URL PIP_EXTRA_INDEX_URL
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1
echo "interpreter: $python ($("$python" -c 'import sys; print(sys.version.split()[0])'))"

tag=$("$python" -c "import sys; print(f'cp{sys.version_info[0]}{sys.version_info[1]}')")
wheels=$out/wheels
helper=("$src/tools/fedcaf-venv" --python "$python" --build-dir "$pip_build-$tag"
        --wheel-dir "$wheels" --jobs 2 --cmake-args=-DFEDCAF_WERROR=ON)
now_s() { date +%s.%N; }
seconds_since() { awk -v a="$1" -v b="$(now_s)" 'BEGIN { printf "%.1f", b - a }'; }

# The command of docs/getting-started.md, first run: venv, build, install.
venv=$out/venv
echo "+ tools/fedcaf-venv $venv --python $python (and the build folder, wheel folder, jobs and flags of this test)"
start=$(now_s)
timeout 1200 "${helper[@]}" "$venv" > "$out/helper.log" 2>&1; rc=$?
first_s=$(seconds_since "$start")
cat "$out/helper.log"
if [ $rc -eq 3 ]; then echo "skipped: $(tail -1 "$out/helper.log")"; exit 77; fi
[ $rc -eq 0 ] || { fail "tools/fedcaf-venv exited $rc"; finish; }
pass "a venv made and the client installed offline with tools/fedcaf-venv on $python ($first_s s)"
grep -q "^fedcaf-venv: venv .*numpy .*torch .*PyYAML" "$out/helper.log" &&
  pass "numpy, torch, PyYAML in the venv: $(grep -o '([^()]*)$' <(grep '^fedcaf-venv: venv ' "$out/helper.log"))" ||
  fail "the helper names no numpy, torch and PyYAML in the venv"
grep -q "^  fedcaf: building fedcaf._fedcaf .*(log: .*)" "$out/helper.log" &&
  grep -q "^  fedcaf: built in " "$out/helper.log" &&
  pass "the backend's progress shown while it builds ($(grep -c '^  fedcaf: ' "$out/helper.log") lines, the log named)" ||
  fail "no progress lines from the backend"
kept=$(ls "$wheels"/fedcaf-*-"$tag"-*.whl 2> /dev/null)
[ -n "$kept" ] && [ -s "$kept.source" ] && pass "the wheel kept: ${kept#$out/}" ||
  fail "no wheel kept in $wheels"
module=$(cd "$out" && "$venv/bin/python" -c "import fedcaf._fedcaf as m; print(m.__file__)") ||
  { fail "import fedcaf in the venv"; finish; }
case $module in
  "$venv"/*) pass "import fedcaf: $module" ;;
  *) fail "fedcaf imported from $module, not the venv" ;;
esac
if ldd "$module" | grep -qi torch; then fail "the module links LibTorch"; else pass "no LibTorch linked"; fi

# The kept wheel, again: the same command for a second venv (the source tree
# unchanged, so no build), and plain pip into a third.
start=$(now_s)
timeout 300 "${helper[@]}" "$out/venv2" > "$out/helper2.log" 2>&1; rc=$?
second_s=$(seconds_since "$start")
cat "$out/helper2.log"
imports() { (cd "$out" && "$1/bin/python" -c "import fedcaf._fedcaf") 2> /dev/null; }
if [ $rc -eq 0 ] && grep -q "^fedcaf-venv: installing the kept wheel" "$out/helper2.log" &&
   ! grep -q "^  fedcaf: building" "$out/helper2.log" && imports "$out/venv2" &&
   awk -v s="$second_s" -v l=$reinstall_limit_s 'BEGIN { exit !(s < l) }'; then
  pass "a second venv with tools/fedcaf-venv, the kept wheel installed ($second_s s, against $first_s s the first time)"
else
  fail "tools/fedcaf-venv for a second venv: exit $rc, $second_s s (the kept wheel, under $reinstall_limit_s s, expected)"
fi
"$src/tools/fedcaf-venv" "$out/venv3" --python "$python" --no-install > /dev/null 2>&1 ||
  fail "tools/fedcaf-venv --no-install"
start=$(now_s)
timeout 300 "$out/venv3/bin/python" -m pip install --no-index --find-links "$wheels" fedcaf \
  > "$out/pip3.log" 2>&1; rc=$?
third_s=$(seconds_since "$start")
if [ $rc -eq 0 ] && imports "$out/venv3" &&
   awk -v s="$third_s" -v l=$reinstall_limit_s 'BEGIN { exit !(s < l) }'; then
  pass "pip install --no-index --find-links WHEELS fedcaf into a third venv ($third_s s)"
else
  cat "$out/pip3.log"; fail "pip install --find-links of the kept wheel: exit $rc, $third_s s"
fi
echo "times: first install $first_s s (venv, build, install); the kept wheel: $second_s s (venv and install), $third_s s (pip alone)"

# The example of docs/getting-started.md, as it is given there, with the
# venv's python3.
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
"$venv/bin/python" - "$out/server.json" "$rounds" <<'PY' && pass "the getting-started example in the venv" || fail "the getting-started example in the venv"
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

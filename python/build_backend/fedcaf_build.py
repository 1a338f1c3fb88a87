"""The build backend (PEP 517) that `pip install` uses for fedcaf's Python
client; pyproject.toml at the source tree's root names it.

It builds the module fedcaf._fedcaf with CMake for the interpreter that runs
pip (-DFEDCAF_PYTHON_ONLY=ON -DPython3_EXECUTABLE=<that interpreter>: the
client's C++ libraries, no LibTorch, no command, no tests) and packs it with
python/fedcaf/__init__.py into a wheel for that interpreter. It needs only
the standard library, so that an offline install needs nothing from an index:

    pip install --no-build-isolation --no-index /path/to/fedcaf

It needs CMake, a C++20 compiler, the C++ libraries fedcaf's client links
(docs/getting-started.md, "The Python client in your own environment"),
pybind11's CMake files and the interpreter's headers.
numpy is a requirement of the wheel: pip takes it from the environment it
installs into, and fails at once, before building, where it has none.

What pip shows: without -v only "Building wheel for fedcaf
(pyproject.toml) ..." until the build ends (its output when it fails); with
-v also this backend's lines on stderr, each starting "fedcaf: ": the build
folder and its log, then the build's progress ("fedcaf: [37/96] 38% 51 s
src/x.cpp", about every 5 % or 15 s). CMake's and the compiler's own output
goes to the log only (the last 60 lines of it to stderr when the build
fails). tools/fedcaf-venv runs pip with -v and shows these lines.

Each wheel it builds is also kept in a folder of wheels, with a stamp of
the source state it was built from (WHEEL.source: a digest of the files the
module is built from and the CMake arguments), so that

    pip install --no-index --find-links build-python/wheels fedcaf

installs it again in seconds, and tools/fedcaf-venv takes it instead of
building where kept_wheel() finds it up to date.

Settings (pip's --config-settings KEY=VALUE, or -C from pip 23.1):
  build-dir   the CMake build folder (default: build-python/<wheel tag> in
              the source tree; kept, so that a second install is
              incremental)
  wheel-dir   where the built wheel is kept (default: build-python/wheels
              in the source tree); "" keeps none
  log         the build's log (default: build.log in the build folder)
  parallel    compile jobs (default: CMake's)
  cmake-args  more CMake arguments, split as a shell would
"""

import base64
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile

SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NAME = "fedcaf"
SUMMARY = ("fedcaf's Python client: your model, your data, your training "
           "loop in a federated run")
# What the module is built from: the source state a kept wheel's stamp
# names (folders walked, __pycache__ left out).
SOURCE_INPUTS = ("CMakeLists.txt", "pyproject.toml", "cmake", "include", "src",
                 "actors", "messages", "protocol", "cli", "python")
LOG_TAIL_LINES = 60


def _version():
    """The project's version, from CMakeLists.txt's project() line."""
    with open(os.path.join(SOURCE_DIR, "CMakeLists.txt")) as f:
        m = re.search(r"project\(fedcaf\s+VERSION\s+([0-9.]+)", f.read())
    if not m:
        raise RuntimeError("CMakeLists.txt: no project(fedcaf VERSION ...)")
    return m.group(1)


def wheel_tag():
    """cpXY-cpXY<abiflags>-<platform> of the running interpreter: the module
    is built for this interpreter and no other."""
    if sys.implementation.name != "cpython":
        raise RuntimeError("fedcaf's Python client is built for CPython, "
                           f"not {sys.implementation.name}")
    py = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    abi = py + getattr(sys, "abiflags", "")
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{py}-{abi}-{platform}"


def _metadata():
    return "".join(line + "\n" for line in (
        "Metadata-Version: 2.1",
        f"Name: {NAME}",
        f"Version: {_version()}",
        f"Summary: {SUMMARY}",
        "Requires-Python: >=3.9",
        "Requires-Dist: numpy",
    ))


def _dist_info():
    return f"{NAME}-{_version()}.dist-info"


def get_requires_for_build_wheel(config_settings=None):
    return []  # the standard library and CMake only


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    """Lets pip check the requirements (numpy) before anything is built."""
    path = os.path.join(metadata_directory, _dist_info())
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "METADATA"), "w") as f:
        f.write(_metadata())
    return _dist_info()


def build_dir(settings):
    """The CMake build folder that `settings` (pip's config settings) name,
    absolute."""
    return os.path.abspath(settings.get("build-dir") or os.path.join(
        SOURCE_DIR, "build-python", wheel_tag()))


def log_path(settings):
    """The build's log: settings' log, else build.log in the build folder."""
    return os.path.abspath(settings.get("log")
                           or os.path.join(build_dir(settings), "build.log"))


def wheel_dir(settings):
    """Where built wheels are kept: settings' wheel-dir, else
    build-python/wheels in the source tree; None where it is ""."""
    path = settings.get("wheel-dir", os.path.join(SOURCE_DIR, "build-python",
                                                  "wheels"))
    return os.path.abspath(path) if path else None


def wheel_name():
    """fedcaf-<version>-<tag>.whl for the running interpreter."""
    return f"{NAME}-{_version()}-{wheel_tag()}.whl"


def source_digest(settings):
    """sha256 (hex) of the files in SOURCE_INPUTS (paths and contents) and of
    settings' cmake-args: equal digests, equal modules."""
    h = hashlib.sha256(settings.get("cmake-args", "").encode() + b"\0")
    for top in SOURCE_INPUTS:
        root = os.path.join(SOURCE_DIR, top)
        paths = [root] if os.path.isfile(root) else []
        for folder, subfolders, names in os.walk(root):
            subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
            paths += [os.path.join(folder, n) for n in sorted(names)]
        for path in paths:
            h.update(os.path.relpath(path, SOURCE_DIR).encode() + b"\0")
            h.update(_read(path) + b"\0")
    return h.hexdigest()


def kept_wheel(settings):
    """The path of the kept wheel for the running interpreter iff it was
    built from the source state and CMake arguments of now; else None."""
    folder = wheel_dir(settings)
    if not folder:
        return None
    path = os.path.join(folder, wheel_name())
    try:
        with open(path + ".source") as f:
            stamp = f.read().strip()
    except OSError:
        return None
    if os.path.isfile(path) and stamp == source_digest(settings):
        return path
    return None


def _say(line):
    print(f"{NAME}: {line}", file=sys.stderr, flush=True)


# ninja's "[37/96] Building CXX object CMakeFiles/t.dir/src/x.cpp.o" and
# make's "[ 38%] Building CXX object ...".
_NINJA_STEP = re.compile(r"^\[(\d+)/(\d+)\]\s*(.*)$")
_MAKE_STEP = re.compile(r"^\[\s*(\d+)%\]\s*(.*)$")
_OBJECT = re.compile(r"CMakeFiles/[^/ ]+\.dir/(\S+?)\.o$")


class _Progress:
    """Turns the build's output into a progress line about every 5 % or
    15 s of it."""

    def __init__(self):
        self.start_s = time.monotonic()
        self.said_percent = -5
        self.said_s = 0.0

    def line(self, text):
        m = _NINJA_STEP.match(text)
        if m and m.group(1) == "0":
            return  # ninja's own check of CMake's globs, before the build
        if m:
            step, total, what = int(m.group(1)), int(m.group(2)), m.group(3)
            percent, count = 100 * step // max(total, 1), f"[{step}/{total}] "
        else:
            m = _MAKE_STEP.match(text)
            if not m:
                return
            percent, count, what = int(m.group(1)), "", m.group(2)
        elapsed_s = time.monotonic() - self.start_s
        if percent < self.said_percent + 5 and elapsed_s < self.said_s + 15:
            return
        self.said_percent, self.said_s = percent, elapsed_s
        obj = _OBJECT.search(what)
        _say(f"{count}{percent}% {elapsed_s:.0f} s"
             + (f" {obj.group(1)}" if obj else ""))


def _run(command, log, progress=None):
    """Runs command with its output appended to the open file log (and fed
    to progress); raises RuntimeError, with the log's tail on stderr, where
    it fails."""
    log.write("+ " + " ".join(shlex.quote(c) for c in command) + "\n")
    log.flush()
    process = subprocess.Popen(command, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True,
                               errors="replace")
    for text in process.stdout:
        log.write(text)
        if progress:
            progress.line(text.rstrip("\n"))
    log.flush()
    if process.wait() != 0:
        log.seek(0)
        tail = log.read().splitlines()[-LOG_TAIL_LINES:]
        print("\n".join(tail), file=sys.stderr, flush=True)
        raise RuntimeError(f"{os.path.basename(command[0])} exited "
                           f"{process.returncode}; the build's log: "
                           f"{log.name}")


def _build_module(settings):
    """Configures and builds fedcaf_python, its output in the log and its
    progress on stderr; returns the module's path."""
    cmake = shutil.which("cmake")
    if not cmake:
        raise RuntimeError("cmake not found: the Python client is C++ "
                           "(docs/getting-started.md, \"The Python client "
                           "in your own environment\")")
    build = build_dir(settings)
    configure = [cmake, "-S", SOURCE_DIR, "-B", build,
                 "-DCMAKE_BUILD_TYPE=Release", "-DFEDCAF_PYTHON_ONLY=ON",
                 f"-DPython3_EXECUTABLE={sys.executable}"]
    if (shutil.which("ninja")
            and not os.path.exists(os.path.join(build, "CMakeCache.txt"))):
        configure += ["-G", "Ninja"]
    configure += shlex.split(settings.get("cmake-args", ""))
    compile_ = [cmake, "--build", build, "--target", "fedcaf_python"]
    if settings.get("parallel"):
        compile_ += ["--parallel", str(int(settings["parallel"]))]
    os.makedirs(build, exist_ok=True)
    log = log_path(settings)
    os.makedirs(os.path.dirname(log), exist_ok=True)
    version = ".".join(str(v) for v in sys.version_info[:3])
    _say(f"building fedcaf._fedcaf for CPython {version} in {build} "
         f"(log: {log})")
    start_s = time.monotonic()
    with open(log, "w+") as f:
        _run(configure, f)
        _say(f"configured in {time.monotonic() - start_s:.0f} s; compiling")
        _run(compile_, f, _Progress())
    _say(f"built in {time.monotonic() - start_s:.0f} s")
    out = os.path.join(build, "python", NAME)
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    module = os.path.join(out, "_fedcaf" + suffix)
    if not os.path.isfile(module):
        raise RuntimeError(f"the build made no {module}")
    return module


def _keep_wheel(path, settings, digest):
    """Copies the wheel at path into the wheel folder with its stamp, digest
    (the source state it was built from); a folder it cannot write to costs
    a line, not the install."""
    folder = wheel_dir(settings)
    if not folder:
        return
    kept = os.path.join(folder, os.path.basename(path))
    try:
        os.makedirs(folder, exist_ok=True)
        if os.path.exists(kept + ".source"):
            os.remove(kept + ".source")  # no stamp names a half-copied wheel
        shutil.copyfile(path, kept + ".part")
        os.replace(kept + ".part", kept)
        with open(kept + ".source", "w") as f:
            f.write(digest + "\n")
    except OSError as e:
        _say(f"the wheel is not kept ({e})")
        return
    _say(f"wheel kept: {kept} (pip install --no-index --find-links "
         f"{folder} fedcaf installs it again)")


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest())
    return f"{arcname},sha256={digest.rstrip(b'=').decode()},{len(data)}\n"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """Builds the module and writes fedcaf-<version>-<tag>.whl into
    wheel_directory (and a copy into the wheel folder); returns its file
    name."""
    settings = dict(config_settings or {})
    digest = source_digest(settings)  # before: an edit during the build is new
    module = _build_module(settings)
    tag = wheel_tag()
    files = [
        (f"{NAME}/__init__.py",
         _read(os.path.join(SOURCE_DIR, "python", NAME, "__init__.py"))),
        (f"{NAME}/{os.path.basename(module)}", _read(module)),
        (f"{_dist_info()}/METADATA", _metadata().encode()),
        (f"{_dist_info()}/WHEEL", (
            "Wheel-Version: 1.0\n"
            "Generator: fedcaf_build\n"
            "Root-Is-Purelib: false\n"
            f"Tag: {tag}\n").encode()),
        (f"{_dist_info()}/top_level.txt", f"{NAME}\n".encode()),
    ]
    record = f"{_dist_info()}/RECORD"
    name = wheel_name()
    os.makedirs(wheel_directory, exist_ok=True)
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w",
                         zipfile.ZIP_DEFLATED) as whl:
        lines = []
        for arcname, data in files:
            info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if arcname.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(info, data)
            lines.append(_record_line(arcname, data))
        lines.append(f"{record},,\n")
        whl.writestr(zipfile.ZipInfo(record, date_time=(2020, 1, 1, 0, 0, 0)),
                     "".join(lines))
    _keep_wheel(os.path.join(wheel_directory, name), settings, digest)
    return name

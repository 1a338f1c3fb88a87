"""The build backend (PEP 517) that `pip install` uses for fedcaf's Python
client; pyproject.toml at the source tree's root names it.

It builds the module fedcaf._fedcaf with CMake for the interpreter that runs
pip (-DFEDCAF_PYTHON_ONLY=ON -DPython3_EXECUTABLE=<that interpreter>: the
client's C++ libraries, no LibTorch, no command, no tests) and packs it with
python/fedcaf/__init__.py into a wheel for that interpreter. It needs only
the standard library, so that an offline install needs nothing from an index:

    pip install --no-build-isolation --no-index /path/to/fedcaf

It needs CMake, a C++20 compiler, the C++ libraries fedcaf's client links
(README "Building"), pybind11's CMake files and the interpreter's headers.
numpy is a requirement of the wheel: pip takes it from the environment it
installs into, and fails at once, before building, where it has none.

Settings (pip's --config-settings KEY=VALUE, or -C from pip 23.1):
  build-dir   the CMake build folder (default: build-python/<wheel tag> in
              the source tree; kept, so that a second install is
              incremental)
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
import zipfile

SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NAME = "fedcaf"
SUMMARY = ("fedcaf's Python client: your model, your data, your training "
           "loop in a federated run")


def _version():
    """The project's version, from CMakeLists.txt's project() line."""
    with open(os.path.join(SOURCE_DIR, "CMakeLists.txt")) as f:
        m = re.search(r"project\(fedcaf\s+VERSION\s+([0-9.]+)", f.read())
    if not m:
        raise RuntimeError("CMakeLists.txt: no project(fedcaf VERSION ...)")
    return m.group(1)


def _wheel_tag():
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


def _run(command):
    print("+", " ".join(shlex.quote(c) for c in command), file=sys.stderr,
          flush=True)
    subprocess.run(command, check=True)


def _build_module(settings):
    """Configures and builds fedcaf_python; returns the module's path."""
    cmake = shutil.which("cmake")
    if not cmake:
        raise RuntimeError("cmake not found: the Python client is C++ "
                           "(README \"Building\")")
    build_dir = os.path.abspath(settings.get("build-dir") or os.path.join(
        SOURCE_DIR, "build-python", _wheel_tag()))
    configure = [cmake, "-S", SOURCE_DIR, "-B", build_dir,
                 "-DCMAKE_BUILD_TYPE=Release", "-DFEDCAF_PYTHON_ONLY=ON",
                 f"-DPython3_EXECUTABLE={sys.executable}"]
    if (shutil.which("ninja")
            and not os.path.exists(os.path.join(build_dir, "CMakeCache.txt"))):
        configure += ["-G", "Ninja"]
    configure += shlex.split(settings.get("cmake-args", ""))
    _run(configure)
    build = [cmake, "--build", build_dir, "--target", "fedcaf_python"]
    if settings.get("parallel"):
        build += ["--parallel", str(int(settings["parallel"]))]
    _run(build)
    out = os.path.join(build_dir, "python", NAME)
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    module = os.path.join(out, "_fedcaf" + suffix)
    if not os.path.isfile(module):
        raise RuntimeError(f"the build made no {module}")
    return module


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest())
    return f"{arcname},sha256={digest.rstrip(b'=').decode()},{len(data)}\n"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """Builds the module and writes fedcaf-<version>-<tag>.whl into
    wheel_directory; returns its file name."""
    settings = dict(config_settings or {})
    module = _build_module(settings)
    tag = _wheel_tag()
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
    name = f"{NAME}-{_version()}-{tag}.whl"
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
    return name

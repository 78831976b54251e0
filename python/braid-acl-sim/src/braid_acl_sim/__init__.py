"""braid-acl-sim for Python programs: CANN's C API (the ACL runtime, aclnn operators, HCCL) on
braid's simulator, so that unmodified torch_npu runs on a machine without an NPU, with a race
report and a timeline of the program.

Run a program on it with the command this package installs::

    braid-acl-sim run python prog.py
    braid-acl-sim run --race-report races.json --timeline timeline.json python prog.py

(``python -m braid_acl_sim run ...`` is the same). The command lays the library out under the
file names of CANN's libraries, sets the environment that makes the program load it, and
makes the registry's CUDA build of torch load beside torch_npu; then it becomes the program.
"""

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

try:
    __version__ = version("braid-acl-sim")
except PackageNotFoundError:  # imported from a source tree, not installed
    __version__ = "unknown"

#: The directory of the package's libraries.
LIB_DIR = Path(__file__).resolve().parent / "lib"
#: braid-acl-sim itself (crates/acl-sim), the library every CANN name stands for.
LIBRARY = LIB_DIR / "libbraid_acl_sim.so"
#: The workaround that lets the registry's CUDA build of torch load beside torch_npu
#: (csrc/keyset_shim.cpp); ``braid-acl-sim run`` loads it into every Python it starts.
KEYSET_SHIM = LIB_DIR / "libbraid_keyset_shim.so"
#: The directory whose ``sitecustomize`` loads :data:`KEYSET_SHIM`; the command puts it first
#: on ``PYTHONPATH``.
PRELOAD_DIR = Path(__file__).resolve().parent / "preload"

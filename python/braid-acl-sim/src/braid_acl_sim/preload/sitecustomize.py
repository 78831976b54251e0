"""Run by Python at start-up in every process ``braid-acl-sim run`` starts (this directory
leads their ``PYTHONPATH``).

It loads the package's allocator-key workaround into the global symbol scope before anything
can import torch: the registry's torch 2.14 is its CUDA build, whose ``libc10_cuda.so``
registers the same allocator keys as torch_npu, and torch_npu aborts at import on the
duplicate ("Duplicated key 'pinned_reserve_segment_size_mb'"). torch imports torch_npu by
itself, so it must be there before ``import torch``. Child processes (multiprocessing,
``torchrun``) inherit ``PYTHONPATH`` and load it too.

A ``sitecustomize`` further along the path, which this one hides, is run afterwards.
"""

import ctypes
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
ctypes.CDLL(
    os.path.join(os.path.dirname(_HERE), "lib", "libbraid_keyset_shim.so"),
    mode=ctypes.RTLD_GLOBAL,
)


def _run_hidden_sitecustomize():
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_run_hidden_sitecustomize()

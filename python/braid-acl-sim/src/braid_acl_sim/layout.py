"""CANN's library names for braid-acl-sim: a directory of symbolic links to the package's
library, one per name torch_npu loads, for ``LD_LIBRARY_PATH``.

Links rather than copies matter: the dynamic loader opens a file reached under several names
once (it compares device and inode), so ``libascendcl.so``, ``libhccl.so`` and ``libopapi.so``
are one library with one simulated runtime, and an HCCL call sees the streams ACL made. A wheel
cannot hold links, so they are made at the first run, in the user's cache directory
(``${XDG_CACHE_HOME:-~/.cache}/braid-acl-sim/cann-<key>``, the key naming where the library is
installed), and reused by every later run of that installation, a reinstall's included (the
links name the file's path). The directory of an installation that is gone (its links lead
nowhere) is removed when another is made.
"""

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from . import LIBRARY

#: The file names of the CANN libraries torch_npu 2.14 needs: linked at load time by its
#: libraries, or opened at run time (libopapi.so for aclnn operators, libnnopbase.so for their
#: descriptors). The same list as `braid acl-sim install`'s (crates/braid-cli/src/acl_sim.rs,
#: whose tests check the two agree).
CANN_LIBRARY_NAMES = (
    "libascendcl.so",
    "libhccl.so",
    "libacl_op_compiler.so",
    "libge_runner.so",
    "libgraph.so",
    "libacl_tdt_channel.so",
    "libopapi.so",
    "libnnopbase.so",
)


class LayoutError(Exception):
    """The links could not be made (the message says where and why)."""


def cache_root(env=os.environ) -> Path:
    """Where the link directories live."""
    base = env.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "braid-acl-sim"


def _complete(directory: Path, library: Path) -> bool:
    return all(
        (directory / name).is_symlink() and (directory / name).resolve() == library
        for name in CANN_LIBRARY_NAMES
    )


def _remove_abandoned(root: Path) -> None:
    """Removes the link directories whose library is gone (uninstalled)."""
    for directory in root.glob("cann-*"):
        links = list(directory.iterdir()) if directory.is_dir() else []
        if links and all(link.is_symlink() and not link.exists() for link in links):
            shutil.rmtree(directory, ignore_errors=True)


def cann_dir(library: Path = LIBRARY, env=os.environ) -> Path:
    """The directory of CANN-named links to ``library``, made when missing. Safe when several
    runs start at once: each builds under a private name and renames; the first rename wins
    and the others use its directory."""
    library = library.resolve()
    if not library.is_file():
        raise LayoutError(f"{library} is missing: reinstall braid-acl-sim")
    key = hashlib.sha256(str(library).encode()).hexdigest()
    root = cache_root(env)
    final = root / f"cann-{key[:16]}"
    if _complete(final, library):
        return final
    _remove_abandoned(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".cann-", dir=root))
        for name in CANN_LIBRARY_NAMES:
            (staging / name).symlink_to(library)
    except OSError as e:
        raise LayoutError(
            f"cannot make CANN's library names in {root}: {e} (set XDG_CACHE_HOME to a "
            "writable directory)"
        ) from e
    try:
        os.rename(staging, final)
    except OSError:
        # Another run made it first (or an incomplete one is in the way: it is not ours to
        # remove, it is reported).
        shutil.rmtree(staging, ignore_errors=True)
        if not _complete(final, library):
            raise LayoutError(
                f"{final} exists and does not link CANN's names to {library}: remove it"
            ) from None
    return final

//! HCCL, CANN's collective communication library (`libhccl.so`): the communicator handle,
//! root info, data types, reduce operations, `HcclResult` codes and their names, and the
//! [`HcclFunctions`] table of every function braid calls ([`fns`] has their pointer types);
//! [`HcclClientFunctions`] what torch_npu calls beyond them.
//!
//! Names are CANN's (`HcclComm`, `HCCL_DATA_TYPE_FP32`, `HcclAllReduce`), from `hccl.h` /
//! `hccl_types.h` (the values are those of `reference/aclnn-hccl.md` Part B; signatures
//! checked against vllm-ascend's `pyhccl_wrapper.py` and HCCL's public header, which
//! declare `const char *HcclGetErrorString(HcclResult code)` and
//! `HcclResult HcclGetCommAsyncError(HcclComm comm, HcclResult *asyncError)`).
//!
//! Every collective is asynchronous on an `aclrtStream`; counts are element counts (for
//! all-gather the count per rank sent, for reduce-scatter the count per rank received).

mod client;
pub mod codes;
mod functions;
mod types;

pub use client::{client_fns, HcclClientFunctions};
pub use codes::{result_name, RESULT_NAMES, UNKNOWN_RESULT_NAME};
pub use functions::{fns, HcclFunctions};
pub use types::*;

use crate::LibrarySet;

/// Environment variable naming the HCCL library file to load, tried first; when set, nothing
/// else is tried.
pub const LIB_ENV: &str = "BRAID_HCCL_LIB";

/// HCCL's library file name (under `lib64/` of a CANN install, or on the loader path).
pub const LIB_NAME: &str = "libhccl.so";

/// Where HCCL is looked for: `$BRAID_HCCL_LIB`, else `libhccl.so` under the CANN homes and on
/// the loader path (the search order and rules of ACL's).
pub const LIBRARIES: LibrarySet = LibrarySet {
    what: "HCCL",
    env: LIB_ENV,
    names: &[LIB_NAME],
};

//! aclnn, CANN's single-operator API: descriptor handles, data types, formats, status codes
//! and their names, and two function tables, each resolved from its own [`LibrarySet`]:
//!
//! - [`AclnnDescriptors`] (`aclCreateTensor`, scalars, int arrays, executors), from
//!   `libnnopbase.so` ([`DESCRIPTOR_LIBRARIES`], variable [`DESCRIPTOR_LIB_ENV`]);
//! - [`AclnnOperators`] (the `aclnnXxxGetWorkspaceSize` / `aclnnXxx` pairs braid calls), from
//!   `libopapi.so` on older CANN releases or the split `libopapi_math.so`, `libopapi_nn.so`
//!   on newer ones ([`OPERATOR_LIBRARIES`], variable [`OPERATOR_LIBS_ENV`], a `:`-separated
//!   list): each symbol comes from the first library of the set that exports it;
//! - [`AclnnTensorOperators`]: the operators braid's tensor operators lower to (all
//!   optional);
//! - [`AclnnAttentionOperators`]: rotary embedding and flash attention (all optional);
//! - [`AclnnRandomOperators`]: the random family (all optional);
//! - [`AclnnClientOperators`]: the operators a foreign client (torch_npu) looks up beyond
//!   braid's, declared so `braid-acl-sim`'s exports of them are checked;
//! - [`AclnnFormatOperators`]: the conversion to and from device-private storage formats
//!   (all optional);
//! - [`AclnnModelOperators`]: indexing, concatenation, selection, triangles, ramps,
//!   LayerNorm, extremes' positions and cumulative sums (all optional).
//!
//! Every operator is two calls: `aclnnXxxGetWorkspaceSize(<tensors...>, uint64_t
//! *workspaceSize, aclOpExecutor **executor)` checks the parameters, says how many bytes of
//! device workspace the operator needs and creates an executor; `aclnnXxx(void *workspace,
//! uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream)` enqueues it on the
//! stream and consumes the executor (CANN destroys a non-repeatable executor in this call).

mod attention_ops;
mod client;
mod codes;
mod format_ops;
mod functions;
mod model_ops;
mod random_ops;
mod tensor_ops;
mod types;

pub use attention_ops::{attention_operator_fns, AclnnAttentionOperators};
pub use client::{client_operator_fns, AclnnClientOperators};
pub use codes::*;
pub use format_ops::{format_operator_fns, AclnnFormatOperators};
pub use functions::{descriptor_fns, operator_fns, AclnnDescriptors, AclnnOperators};
pub use model_ops::{model_operator_fns, AclnnModelOperators};
pub use random_ops::{random_operator_fns, AclnnRandomOperators};
pub use tensor_ops::{tensor_operator_fns, AclnnTensorOperators};
pub use types::*;

use crate::LibrarySet;

/// Environment variable naming the descriptor library file(s) (`libnnopbase.so`), tried
/// first; when set, nothing else is tried.
pub const DESCRIPTOR_LIB_ENV: &str = "BRAID_ACLNN_BASE_LIB";

/// Environment variable naming the operator library files, separated by `:`
/// (`/usr/local/Ascend/ascend-toolkit/latest/lib64/libopapi.so`, or the split libraries);
/// when set, exactly these are used.
pub const OPERATOR_LIBS_ENV: &str = "BRAID_ACLNN_LIBS";

/// Where the descriptor functions are looked for.
pub const DESCRIPTOR_LIBRARIES: LibrarySet = LibrarySet {
    what: "aclnn descriptors",
    env: DESCRIPTOR_LIB_ENV,
    names: &["libnnopbase.so"],
};

/// Where the operators are looked for: every one of these names that is installed is
/// searched, so both the older single `libopapi.so` and the newer split libraries work.
pub const OPERATOR_LIBRARIES: LibrarySet = LibrarySet {
    what: "aclnn operators",
    env: OPERATOR_LIBS_ENV,
    names: &["libopapi.so", "libopapi_math.so", "libopapi_nn.so"],
};

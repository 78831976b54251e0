//! The C surface CANN clients other than braid bind (torch_npu 2.14: see
//! `reference/torch-npu-client.md`), exported so that braid-acl-sim can stand in for a CANN
//! install such a client loads:
//!
//! | module | functions | declared in `braid-acl-sys` as |
//! |---|---|---|
//! | [`runtime`] | the runtime calls beyond braid's: finalize, current device and context, SoC name and capabilities, blocking copy and fill, `aclrtMallocAlign32`, system parameters, timeouts, forced stream destruction, event reset, model ids; binaries, IPC and dumps refused | `acl::AclClientFunctions` |
//! | [`host`] | `aclrtHostRegisterV2`, `aclrtHostUnregister` (kept), `aclrtHostRegister`, `aclrtSetStreamAttribute`, host callbacks (refused) | `acl::AclClientFunctions` |
//! | [`version`] | `aclsysGetCANNVersion`, `aclsysGetVersionStr`: the CANN release braid-acl-sim's C API matches | `acl::AclClientFunctions` |
//! | [`op_path`] | the old single-operator path: tensor descriptions, data buffers, attributes, compile options; `aclopCompileAndExecute` computes `Identity` (`op_identity`: copies and conversions to and from private formats) and refuses any other operator, naming it | `acl::AclOpFunctions` |
//! | [`hccl`] | `HcclCommInitRootInfoConfig` (torch_npu's process group) on braid-acl-sim's HCCL | `hccl::HcclClientFunctions` |
//! | [`profiling`] | `Msprof*` (clock and hashes real, reports refused) and `rt*` kernels (refused) | `msprof::MsprofFunctions`, `rt::RtFunctions` |
//!
//! The aclnn operators clients look up beyond braid's are in [`crate::aclnn`].
//!
//! Refusals use CANN's own codes (`ACL_ERROR_RT_FEATURE_NOT_SUPPORT`, `ACL_ERROR_OP_NOT_FOUND`,
//! `MSPROF_ERROR`) with a message naming the call in `aclGetRecentErrMsg`; nothing the
//! simulator cannot do answers success.

pub mod hccl;
pub mod host;
mod op_identity;
pub mod op_path;
pub mod profiling;
pub mod runtime;
pub mod version;

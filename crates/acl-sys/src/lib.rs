//! `braid-acl-sys`: the Ascend C API braid uses, declared once, in the manner of a `-sys`
//! crate: types, constants, return codes and their names, and every function signature.
//!
//! Two crates use the one declaration:
//! - `braid-backend-acl`, the importer, resolves [`acl::AclFunctions`] from a run-time loaded
//!   library with the `loader` module (feature `loader`);
//! - `braid-acl-sim`, the exporter, implements the functions as `#[no_mangle] extern "C"` and
//!   checks each against its pointer type in [`acl::fns`] (`const _: fns::aclrtMalloc =
//!   aclrtMalloc;`), so a signature that drifts fails to compile.
//!
//! Where to look:
//! - [`c_api!`]: one list of signatures becomes the `fns` pointer types, the [`Symbol`] list
//!   and a [`SymbolTable`] struct;
//! - [`acl`]: the ACL runtime (`libascendcl.so`);
//! - [`aclnn`]: CANN's single-operator API, two [`c_api!`] tables each with its
//!   [`LibrarySet`]: descriptors (`libnnopbase.so`) and operators (`libopapi.so`, or the split
//!   `libopapi_math.so`, `libopapi_nn.so`);
//! - [`dtypes`]: braid's data types and CANN's (`aclDataType`, `HcclDataType`) codes for
//!   them, one table each way;
//! - [`hccl`]: the collective communication library (`libhccl.so`), one [`c_api!`] table
//!   with its [`LibrarySet`];
//! - what foreign CANN clients (torch_npu) bind beyond braid's calls, so that
//!   `braid-acl-sim` can stand in for a CANN install they load: [`acl::client`],
//!   [`acl::op`] (the old single-operator path), [`aclnn`]'s client operators, [`msprof`]
//!   (profiling reports) and [`rt`] (the legacy kernel API);
//! - [`search`]: where a [`LibrarySet`] is looked for (explicit variable, CANN homes, loader
//!   path); `loader` (feature `loader`): opening it, with typed errors that list every path tried and never
//!   replace an explicitly configured library.
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod acl;
pub mod aclnn;
pub mod dtypes;
pub mod formats;
pub mod hccl;
#[cfg(feature = "loader")]
#[cfg_attr(docsrs, doc(cfg(feature = "loader")))]
pub mod loader;
mod macros;
pub mod msprof;
pub mod rt;
pub mod search;
mod table;

pub use search::{
    check_variables, variable, Candidate, LibrarySet, Origin, Search, VariableError, HOME_VARS,
    VARIABLES,
};
pub use table::{MissingSymbols, Symbol, SymbolTable};

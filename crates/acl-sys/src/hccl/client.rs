//! The HCCL functions a foreign client (torch_npu's process group) calls beyond braid's:
//! [`HcclClientFunctions`], optional, declared so `braid-acl-sim`'s exports of them are
//! checked.

use super::types::{HcclComm, HcclResult, HcclRootInfo};
use std::ffi::c_void;

/// Hands the list of client HCCL functions to another macro, as
/// [`acl_functions!`](crate::acl_functions) does for ACL.
#[macro_export]
macro_rules! hccl_client_functions {
    ($($callback:ident)::+ ! ($($prefix:tt)*)) => {
        $($callback)::+ ! { $($prefix)*
    /// The HCCL functions CANN clients such as torch_npu call beyond
    /// [`HcclFunctions`](crate::hccl::HcclFunctions).
    ///
    /// Calling a pointer is `unsafe`: the caller upholds the C API's contract.
    pub struct HcclClientFunctions;

    /// `HcclResult HcclCommInitRootInfoConfig(uint32_t nRanks, const HcclRootInfo *rootInfo,
    /// uint32_t rank, const HcclCommConfig *config, HcclComm *comm)`: as
    /// `HcclCommInitRootInfo`, with the communicator's options (buffer size, name, algorithm,
    /// ...) in `config`. torch_npu's process group makes its communicators with it.
    optional fn HcclCommInitRootInfoConfig(
        n_ranks: u32,
        root_info: *const HcclRootInfo,
        rank: u32,
        config: *const c_void,
        comm: *mut HcclComm,
    ) -> HcclResult;
        }
    };
}

/// The client table's function-pointer types.
pub mod client_fns {
    pub use super::table::fns::*;
}

mod table {
    #[allow(unused_imports)]
    use super::*;
    crate::hccl_client_functions!(crate::c_api!());
}

pub use table::HcclClientFunctions;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SymbolTable;

    #[test]
    fn the_client_table_is_optional() {
        assert_eq!(HcclClientFunctions::SYMBOLS.len(), 1);
        assert!(HcclClientFunctions::SYMBOLS.iter().all(|s| !s.required));
    }
}

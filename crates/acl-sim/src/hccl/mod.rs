//! HCCL (`libhccl.so`'s API) on the simulated node: communicators over the node's devices and
//! collectives enqueued on ACL streams, implemented with the simulator's collectives.
//!
//! - [`exports`]: the exported C symbols; each checks its arguments as HCCL does (a null
//!   pointer is `HCCL_E_PTR`, a data type or reduce operation that is not one, a count, rank or
//!   root out of range is `HCCL_E_PARA`; a data type HCCL has but braid's simulator does not
//!   compute in is `HCCL_E_NOT_SUPPORT`), then calls `comms`; the variable-count
//!   collectives are in `exports::variable`.
//! - `group`: `HcclGroupStart` / `HcclGroupEnd` (a per-thread group whose calls are held
//!   until the outermost end) and `HcclBatchSendRecv`.
//! - `comms`: the communicators given to the caller, as opaque handles looked up in a table.
//! - `results`: `HcclGetErrorString`'s text; the results of simulator and runtime failures.
//!
//! A failure also leaves its text for `aclGetRecentErrMsg` on the calling thread.

mod comms;
pub mod exports;
mod group;
mod results;

pub(crate) use results::from_hal;

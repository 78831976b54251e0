//! braid's conformance suite on the ACL backend, loading `braid-acl-sim` through the backend's
//! real loading path (the function table, error mapping, thread binding and `aclmdlRI*`
//! capture all run). Built-in kernels run as aclnn operators; the suite's user operator runs
//! `aclnnMuls` in a native-stream closure. The collective cases run through HCCL
//! (braid-collective's `acl` feature over `braid-acl-sim`'s HCCL).

use crate::common;

use braid_backend_acl::{aclnn, AclBackend, NativeOpFn};
use braid_conformance::ScaleOpArgs;
use std::sync::Arc;

/// The suite's user operator `y = factor * x` on ACL: `aclnnMuls` enqueued on the native
/// stream ([`aclnn::muls_op`]), its workspace the one the launching stream handed out
/// (`Stream::workspace`) before the launch.
fn acl_scale_body(args: ScaleOpArgs) -> Result<Arc<NativeOpFn>, String> {
    aclnn::muls_op(
        args.x,
        args.y,
        args.elements,
        args.dtype,
        args.factor,
        args.workspace,
    )
    .map_err(|e| e.to_string())
}

braid_conformance::conformance_tests!(
    AclBackend,
    common::device,
    scale_body = acl_scale_body,
    node = common::node,
);

braid_conformance::collective_conformance_tests!(AclBackend, common::device, node = common::node);

//! Task groups at the backend: a span of captured operators the backend can re-issue with new
//! parameters later (ACL's `aclmdlRICaptureTaskGrpBegin` / `aclmdlRICaptureTaskGrpEnd`,
//! `aclmdlRICaptureTaskUpdateBegin` / `aclmdlRICaptureTaskUpdateEnd`).

/// A backend's handle to a task group of a captured graph (ACL's `aclrtTaskGrp`, an opaque
/// pointer, kept as an integer so front types stay `Send + Sync`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct TaskGroupHandle(pub u64);

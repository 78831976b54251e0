//! braid's conformance suite on the ACL backend, loading `braid-acl-sim` through the backend's
//! real loading path (the function table, error mapping, thread binding and `aclmdlRI*`
//! capture all run).

mod common;

use braid_backend_acl::AclBackend;

braid_conformance::conformance_tests!(AclBackend, common::device);

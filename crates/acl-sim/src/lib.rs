//! `braid-acl-sim`: a shared library that will export the ACL C symbols braid uses
//! (`aclInit`, `aclrtCreateStream`, `aclrtRecordEvent`, `aclmdlRICaptureBegin`, ...) with ACL's
//! semantics, implemented on braid's simulator, so the ACL backend's real loading path can be
//! tested without an Ascend card.
//!
//! **Status: not implemented yet; it exports no symbol.** It arrives with the ACL backend issue
//! (DESIGN.md §7).

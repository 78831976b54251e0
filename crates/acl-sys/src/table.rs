//! What every declared C API shares: its [`Symbol`]s and the [`SymbolTable`] of function
//! pointers resolved for them.
//!
//! The [`c_api!`](crate::c_api) macro writes both from one list of signatures; the loader
//! (feature `loader`) fills a table from run-time loaded libraries, and an exporter checks its
//! functions against the same signatures.

use std::ffi::c_void;

/// One C function of a declared API.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Symbol {
    /// Its C name.
    pub name: &'static str,
    /// Whether a table cannot be made without it (optional symbols are `Option`s).
    pub required: bool,
}

/// Required symbols that no library searched exports, by name.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct MissingSymbols(pub Vec<&'static str>);

/// A table of function pointers, one per [`Symbol`] of an API: required ones as plain function
/// pointers, optional ones as `Option`s. Written by [`c_api!`](crate::c_api).
pub trait SymbolTable: Sized {
    /// Every symbol of the table, in declaration order.
    const SYMBOLS: &'static [Symbol];

    /// Resolves every symbol with `lookup`, which returns the address of the C function of
    /// that name, or null where it is absent. Fails naming every absent required symbol.
    ///
    /// # Safety
    /// Every non-null address `lookup` returns is the address of a C function whose signature
    /// is the one the table declares for that name, and stays valid (its library loaded) for
    /// as long as the table is used.
    unsafe fn resolve(
        lookup: impl FnMut(&'static str) -> *mut c_void,
    ) -> Result<Self, MissingSymbols>;

    /// Names of the optional symbols this table lacks.
    fn missing_optional(&self) -> Vec<&'static str>;
}

//! [`c_api!`](crate::c_api): one list of C signatures becomes the function-pointer types, the
//! symbol list and the [`SymbolTable`](crate::SymbolTable) of an API.

/// Declares a C API from one list of signatures, each `required` or `optional`:
///
/// - a module `fns` with one function-pointer type per symbol, named as the C function
///   (`fns::aclrtMalloc`): the importer's table uses them, and an exporter checks its
///   functions against them (`const _: fns::aclrtMalloc = aclrtMalloc;` fails to compile when
///   a signature drifts);
/// - a struct (named by the invocation) with one field per symbol: `fns::X` for required
///   symbols, `Option<fns::X>` for optional ones; it implements
///   [`SymbolTable`](crate::SymbolTable), whose `SYMBOLS` lists them in declaration order.
///
/// The types the signatures name must be in scope where the macro is invoked (the `fns`
/// module imports its parent's names).
#[macro_export]
macro_rules! c_api {
    (
        $(#[$table_meta:meta])*
        pub struct $table:ident;
        $(
            $(#[$fn_meta:meta])*
            $kind:ident fn $name:ident ( $($arg:ident : $arg_ty:ty),* $(,)? ) $(-> $ret:ty)? ;
        )*
    ) => {
        /// One function-pointer type per symbol, with the symbol's C signature.
        #[allow(non_camel_case_types)]
        pub mod fns {
            #[allow(unused_imports)]
            use super::*;
            $(
                $(#[$fn_meta])*
                pub type $name = unsafe extern "C" fn($($arg: $arg_ty),*) $(-> $ret)?;
            )*
        }

        $(#[$table_meta])*
        #[allow(non_snake_case)]
        #[derive(Clone, Copy)]
        pub struct $table {
            $(
                $(#[$fn_meta])*
                pub $name: $crate::c_api!(@field $kind, fns::$name),
            )*
        }

        impl $crate::SymbolTable for $table {
            const SYMBOLS: &'static [$crate::Symbol] = &[
                $( $crate::Symbol {
                    name: stringify!($name),
                    required: $crate::c_api!(@required $kind),
                }, )*
            ];

            #[allow(non_snake_case)]
            unsafe fn resolve(
                mut lookup: impl FnMut(&'static str) -> *mut ::std::ffi::c_void,
            ) -> ::std::result::Result<Self, $crate::MissingSymbols> {
                let mut missing: Vec<&'static str> = Vec::new();
                $(
                    let $name: Option<fns::$name> = {
                        let address = lookup(stringify!($name));
                        if address.is_null() {
                            None
                        } else {
                            // SAFETY: the caller guarantees a non-null address is the C
                            // function of this name with this signature; a data pointer and
                            // a function pointer have the same size.
                            Some(unsafe {
                                ::std::mem::transmute::<*mut ::std::ffi::c_void, fns::$name>(
                                    address,
                                )
                            })
                        }
                    };
                    if $name.is_none() && $crate::c_api!(@required $kind) {
                        missing.push(stringify!($name));
                    }
                )*
                if !missing.is_empty() {
                    return Err($crate::MissingSymbols(missing));
                }
                Ok($table {
                    $( $name: $crate::c_api!(@take $kind, $name), )*
                })
            }

            #[allow(unused_mut)]
            fn missing_optional(&self) -> Vec<&'static str> {
                let mut out = Vec::new();
                $( $crate::c_api!(@note_missing $kind, self.$name, stringify!($name), out); )*
                out
            }
        }

        impl ::std::fmt::Debug for $table {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.debug_struct(stringify!($table))
                    .field(
                        "missing_optional",
                        &<Self as $crate::SymbolTable>::missing_optional(self),
                    )
                    .finish()
            }
        }
    };
    (@field required, $ty:ty) => { $ty };
    (@field optional, $ty:ty) => { Option<$ty> };
    (@required required) => { true };
    (@required optional) => { false };
    // A required symbol is present here (absent ones returned above).
    (@take required, $name:ident) => {
        match $name {
            Some(f) => f,
            None => return Err($crate::MissingSymbols(vec![stringify!($name)])),
        }
    };
    (@take optional, $name:ident) => { $name };
    (@note_missing required, $field:expr, $name:expr, $out:ident) => {};
    (@note_missing optional, $field:expr, $name:expr, $out:ident) => {
        if $field.is_none() {
            $out.push($name);
        }
    };
}

/// Checks at compile time that the functions named as the symbols of an API list (in scope
/// where it expands) have exactly the declared signatures, given the API's `fns` module:
/// `acl_functions!(braid_acl_sys::check_exports!(braid_acl_sys::acl::fns;))` in the
/// exporter. A function that is missing, or whose signature drifted from the declaration,
/// fails to compile:
///
/// ```
/// mod api {
///     braid_acl_sys::c_api! {
///         /// A one-function API.
///         pub struct Api;
///         /// `int32_t twice(int32_t x)`.
///         required fn twice(x: i32) -> i32;
///     }
/// }
/// extern "C" fn twice(x: i32) -> i32 {
///     2 * x
/// }
/// braid_acl_sys::check_exports!(api::fns; pub struct Api; required fn twice(x: i32) -> i32;);
/// ```
///
/// ```compile_fail
/// mod api {
///     braid_acl_sys::c_api! {
///         /// A one-function API.
///         pub struct Api;
///         /// `int32_t twice(int32_t x)`.
///         required fn twice(x: i32) -> i32;
///     }
/// }
/// // Drifted: takes an unsigned integer.
/// extern "C" fn twice(x: u32) -> i32 {
///     2 * x as i32
/// }
/// braid_acl_sys::check_exports!(api::fns; pub struct Api; required fn twice(x: i32) -> i32;);
/// ```
#[macro_export]
macro_rules! check_exports {
    (
        $fns:path ;
        $(#[$table_meta:meta])*
        pub struct $table:ident;
        $(
            $(#[$fn_meta:meta])*
            $kind:ident fn $name:ident ( $($arg:ident : $arg_ty:ty),* $(,)? ) $(-> $ret:ty)? ;
        )*
    ) => {
        const _: () = {
            use $fns as fns;
            $( const _: fns::$name = $name; )*
        };
    };
}

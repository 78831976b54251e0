//! aclnn, CANN's single-operator API, loaded at run time: the resolved tables ([`AclnnApi`],
//! public so that users' native closures call aclnn operators too), safe descriptor wrappers
//! that destroy what they create on every path ([`Tensor`], [`Scalar`], [`IntArray`],
//! [`TensorList`]), and how
//! braid's built-in kernels run as aclnn operators ([`AclPrepared`]).
//!
//! Where the libraries are looked for (`braid_acl_sys::aclnn`): descriptors from
//! `$BRAID_ACLNN_BASE_LIB`, else `libnnopbase.so` under `$ASCEND_HOME_PATH` /
//! `$ASCEND_TOOLKIT_HOME` (`lib64/`) and on the loader path; operators from
//! `$BRAID_ACLNN_LIBS` (a `:`-separated list), else every one of `libopapi.so`,
//! `libopapi_math.so`, `libopapi_nn.so` that is installed. A variable that is set is honoured
//! or the load fails naming it (set to nothing, it is refused by name, as every `BRAID_*`
//! variable is; when only one of the two is set, a library of the other that is not found is
//! reported with the variable that sent the search there); a missing symbol is named with the
//! libraries searched. When
//! neither variable is set and the ACL library is `braid-acl-sim`, both tables come from it
//! (it exports aclnn on top of the simulator).
//!
//! Errors are [`AclError`]s carrying the aclnn status number, its name
//! (`braid_acl_sys::aclnn::status_name`) and `aclGetRecentErrMsg`'s text.

pub(crate) mod kernels;
mod lower;
mod lower_format;
mod lower_model;
mod lower_random;
mod muls;
mod objects;

pub use kernels::{acl_data_type, AclPrepared, BUSY_UNSUPPORTED};
pub use muls::muls_op;
pub use objects::{Executor, IntArray, LaunchFn, Scalar, Tensor, TensorList};

use crate::api::AclApi;
use crate::error::AclError;
use braid_acl_sys::aclnn::{
    aclnnStatus, status_name, AclnnAttentionOperators, AclnnClientOperators, AclnnDescriptors,
    AclnnFormatOperators, AclnnModelOperators, AclnnOperators, AclnnRandomOperators,
    AclnnTensorOperators, DESCRIPTOR_LIBRARIES, DESCRIPTOR_LIB_ENV, OPERATOR_LIBRARIES,
    OPERATOR_LIBS_ENV,
};
use braid_acl_sys::loader::{self, LoadError, Loaded};
use braid_stream_core::sync::GlobalMutex;
use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::sync::OnceLock;

/// What a missing descriptor library says when only `$BRAID_ACLNN_LIBS` is set.
const OPERATORS_SET_ALONE: &str = "$BRAID_ACLNN_LIBS is set, so aclnn does not come from the \
    ACL library: set $BRAID_ACLNN_BASE_LIB to the descriptor library (libnnopbase.so; on \
    braid-acl-sim, libbraid_acl_sim.so) too, or unset $BRAID_ACLNN_LIBS";

/// What a missing operator library says when only `$BRAID_ACLNN_BASE_LIB` is set.
const DESCRIPTORS_SET_ALONE: &str = "$BRAID_ACLNN_BASE_LIB is set, so aclnn does not come from \
    the ACL library: set $BRAID_ACLNN_LIBS to the operator libraries (libopapi*.so; on \
    braid-acl-sim, libbraid_acl_sim.so) too, or unset $BRAID_ACLNN_BASE_LIB";

/// The resolved aclnn tables: descriptors ([`AclnnApi::descriptors`]) and operators
/// ([`AclnnApi::operators`]), and the ACL library whose `aclGetRecentErrMsg` explains their
/// failures. Resolved once per ACL library and kept for the life of the process.
pub struct AclnnApi {
    acl: &'static AclApi,
    descriptors: Loaded<AclnnDescriptors>,
    operators: Loaded<AclnnOperators>,
    client: Loaded<AclnnClientOperators>,
    tensor_ops: Loaded<AclnnTensorOperators>,
    model_ops: Loaded<AclnnModelOperators>,
    attention_ops: Loaded<AclnnAttentionOperators>,
    random_ops: Loaded<AclnnRandomOperators>,
    format_ops: Loaded<AclnnFormatOperators>,
}

impl fmt::Debug for AclnnApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AclnnApi")
            .field("descriptors", &self.descriptors.libraries())
            .field("operators", &self.operators.libraries())
            .finish()
    }
}

/// Tables already resolved, by the path of the ACL library they go with.
fn resolved() -> &'static GlobalMutex<HashMap<PathBuf, &'static AclnnApi>> {
    static TABLES: OnceLock<GlobalMutex<HashMap<PathBuf, &'static AclnnApi>>> = OnceLock::new();
    TABLES.get_or_init(|| GlobalMutex::new(HashMap::new()))
}

impl AclnnApi {
    /// The descriptor functions (`aclCreateTensor`, ...).
    pub fn descriptors(&self) -> &AclnnDescriptors {
        &self.descriptors
    }

    /// The operator functions (`aclnnAddGetWorkspaceSize`, `aclnnAdd`, ...).
    pub fn operators(&self) -> &AclnnOperators {
        &self.operators
    }

    /// The add, sub and mul families and the fills (every symbol optional).
    pub fn client_operators(&self) -> &AclnnClientOperators {
        &self.client
    }

    /// The operators braid's tensor operators lower to (every symbol optional).
    pub fn tensor_operators(&self) -> &AclnnTensorOperators {
        &self.tensor_ops
    }

    /// Indexing, concatenation, selection, triangles, ramps, LayerNorm, extremes' positions
    /// and cumulative sums (every symbol optional).
    pub fn model_operators(&self) -> &AclnnModelOperators {
        &self.model_ops
    }

    /// Rotary embedding and flash attention (every symbol optional).
    pub fn attention_operators(&self) -> &AclnnAttentionOperators {
        &self.attention_ops
    }

    /// The random family braid's random operators lower to (every symbol optional).
    pub fn random_operators(&self) -> &AclnnRandomOperators {
        &self.random_ops
    }

    /// The conversion to and from device-private storage formats (every symbol optional).
    pub fn format_operators(&self) -> &AclnnFormatOperators {
        &self.format_ops
    }

    /// The libraries the tables were resolved from: descriptors', then operators'.
    pub fn libraries(&self) -> Vec<PathBuf> {
        self.descriptors
            .libraries()
            .into_iter()
            .chain(self.operators.libraries())
            .map(|l| l.path)
            .collect()
    }

    /// Loads the aclnn tables that go with `acl` under the process environment (see the
    /// [module](self)); resolved once per ACL library.
    pub fn load_for(acl: &'static AclApi) -> Result<&'static AclnnApi, LoadError> {
        let mut tables = resolved().lock();
        if let Some(api) = tables.get(acl.path()) {
            return Ok(api);
        }
        let api: &'static AclnnApi =
            Box::leak(Box::new(Self::load_with(|k| std::env::var_os(k), acl)?));
        tracing::info!(libraries = ?api.libraries(), "aclnn loaded");
        tables.insert(acl.path().to_path_buf(), api);
        Ok(api)
    }

    /// Loads the aclnn tables for `acl` under the environment `env` (tests inject one), not
    /// kept: the libraries are unloaded when the value drops.
    pub fn load_with(
        env: impl Fn(&str) -> Option<OsString>,
        acl: &'static AclApi,
    ) -> Result<AclnnApi, LoadError> {
        // braid's rule: a variable set to nothing is refused by name, never read as unset.
        let configured = |var: &'static str| {
            braid_acl_sys::variable(&env, var)
                .map(|v| v.is_some())
                .map_err(|source| LoadError::Variable {
                    what: "aclnn",
                    source,
                })
        };
        let (descriptors_set, operators_set) = (
            configured(DESCRIPTOR_LIB_ENV)?,
            configured(OPERATOR_LIBS_ENV)?,
        );
        let (descriptors, operators): (Loaded<AclnnDescriptors>, Loaded<AclnnOperators>) =
            if !descriptors_set && !operators_set && acl.is_braid_acl_sim() {
                (
                    loader::load_from(DESCRIPTOR_LIBRARIES.what, &[acl.path()])?,
                    loader::load_from(OPERATOR_LIBRARIES.what, &[acl.path()])?,
                )
            } else {
                // One variable set and not the other: what is not found is looked for where the
                // other variable's absence sends it, which the error says.
                (
                    DESCRIPTOR_LIBRARIES
                        .load(&env)
                        .map_err(|e| match operators_set {
                            true => e.with_hint(OPERATORS_SET_ALONE),
                            false => e,
                        })?,
                    OPERATOR_LIBRARIES
                        .load(&env)
                        .map_err(|e| match descriptors_set {
                            true => e.with_hint(DESCRIPTORS_SET_ALONE),
                            false => e,
                        })?,
                )
            };
        // Every symbol of these tables is optional: they resolve from the operator libraries
        // just found, and a missing one refuses its operator by name when it is used.
        let paths: Vec<PathBuf> = operators.libraries().into_iter().map(|l| l.path).collect();
        let paths: Vec<&std::path::Path> = paths.iter().map(PathBuf::as_path).collect();
        let client = loader::load_from(OPERATOR_LIBRARIES.what, &paths)?;
        let tensor_ops = loader::load_from(OPERATOR_LIBRARIES.what, &paths)?;
        let model_ops = loader::load_from(OPERATOR_LIBRARIES.what, &paths)?;
        let attention_ops = loader::load_from(OPERATOR_LIBRARIES.what, &paths)?;
        let random_ops = loader::load_from(OPERATOR_LIBRARIES.what, &paths)?;
        let format_ops = loader::load_from(OPERATOR_LIBRARIES.what, &paths)?;
        Ok(AclnnApi {
            acl,
            descriptors,
            operators,
            client,
            tensor_ops,
            model_ops,
            attention_ops,
            random_ops,
            format_ops,
        })
    }

    /// `aclGetRecentErrMsg`'s text ("" when there is none).
    pub fn recent_error_message(&self) -> String {
        self.acl.recent_error_message()
    }

    /// `Ok` for `ACLNN_SUCCESS`, else the typed error of `call`: the status, its name and
    /// `aclGetRecentErrMsg`'s text.
    pub fn check(&self, call: &'static str, status: aclnnStatus) -> Result<(), AclError> {
        if status == 0 {
            return Ok(());
        }
        Err(AclError {
            code: status,
            name: status_name(status),
            call,
            message: self.recent_error_message(),
        })
    }

    /// The numbers of live tensors, scalars, int arrays and executors, from braid-acl-sim's
    /// `braidSimAclnnLiveObjects` extension (`None` on CANN, which has no such function).
    pub fn live_objects(&self) -> Option<[u64; 4]> {
        let f = self.descriptors.braidSimAclnnLiveObjects?;
        let mut counts = [0u64; 4];
        // SAFETY: `counts` has the 4 values the extension writes.
        (unsafe { f(counts.as_mut_ptr()) } == 0).then_some(counts)
    }
}

/// The aclnn tables of the ACL library [`AclApi::load_or_sim`] finds (CANN when configured,
/// else `braid-acl-sim` built next to the executable): what a user's native closure calls.
pub fn api() -> Result<&'static AclnnApi, LoadError> {
    AclnnApi::load_for(AclApi::load_or_sim()?)
}

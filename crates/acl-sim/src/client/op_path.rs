//! The exported functions of CANN's old single-operator path ([`AclOpFunctions`]): tensor
//! descriptions, data buffers and operator attributes are real objects (what is set can be
//! read back), the compile options are kept, and `aclopCompileAndExecute`, which would
//! compile and run an operator braid-acl-sim has no aclnn implementation for, is refused
//! with `ACL_ERROR_OP_NOT_FOUND` (100024) and a message naming the operator. One operator is
//! computed: `Identity`, the copy torch_npu's `npu_format_cast` makes between two storage
//! formats (module `op_identity`).
//!
//! A description keeps the shape and format it was created with (the tensor's origin: its
//! logical shape and how its dimensions are named) apart from those `aclSetTensorShape` and
//! `aclSetTensorFormat` set afterwards (its storage, as torch_npu describes a tensor stored
//! in a device-private format); the getters answer the storage's.
//!
//! torch_npu takes this path for an operator whose aclnn family it cannot find in
//! `libopapi.so`, so the refusal is what a torch_npu program sees for an operator
//! braid-acl-sim does not compute.
//!
//! [`AclOpFunctions`]: braid_acl_sys::acl::AclOpFunctions

use crate::codes::*;
use crate::errmsg::{fail, ret};
use crate::registry::with;
use braid_acl_sys::acl::{
    aclDataBuffer, aclTensorDesc, aclopAttr, ACL_COMPILE_OPT_COUNT, ACL_OP_JIT_COMPILE,
};
use braid_acl_sys::aclnn::{ACL_DT_UNDEFINED, ACL_FORMAT_UNDEFINED};
use braid_stream_core::sync::{GlobalMutex, GlobalMutexGuard};
use std::collections::{BTreeMap, HashMap};
use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::OnceLock;

/// The longest value `aclSetCompileopt` takes, in bytes with the NUL
/// (`aclGetCompileoptSize`).
pub const COMPILE_OPT_MAX: usize = 4096;

struct TensorDesc {
    dtype: i32,
    /// The storage's shape (the origin's until `aclSetTensorShape`).
    dims: Vec<i64>,
    /// The storage's format (the origin's until `aclSetTensorFormat`).
    format: i32,
    /// The shape it was created with.
    origin_dims: Vec<i64>,
    /// The format it was created with.
    origin_format: i32,
    name: CString,
}

impl TensorDesc {
    /// `dtype 9 [2, 3]` (with the name first when there is one, and a private storage
    /// format with its origin shape: `dtype 0 FRACTAL_NZ [1, 2, 16, 16] of [32, 16]`), as the
    /// refusal names it.
    fn describe(&self) -> String {
        let name = self.name.to_string_lossy();
        let sep = if name.is_empty() { "" } else { " " };
        match braid_acl_sys::formats::private_of_acl(self.format) {
            Some(f) => format!(
                "{name}{sep}dtype {} {f} {:?} of {:?}",
                self.dtype, self.dims, self.origin_dims
            ),
            None => format!("{name}{sep}dtype {} {:?}", self.dtype, self.dims),
        }
    }
}

/// The live objects of the old path, by handle.
#[derive(Default)]
struct Objects {
    descs: HashMap<usize, TensorDesc>,
    buffers: HashMap<usize, (usize, usize)>,
    attrs: HashMap<usize, BTreeMap<String, String>>,
    compile_options: BTreeMap<i32, String>,
    next: usize,
}

impl Objects {
    fn handle(&mut self) -> usize {
        self.next += 1;
        0x0a0b_0000 + self.next * 0x40
    }
}

fn objects() -> GlobalMutexGuard<'static, Objects> {
    static OBJECTS: OnceLock<GlobalMutex<Objects>> = OnceLock::new();
    OBJECTS
        .get_or_init(|| GlobalMutex::new(Objects::default()))
        .lock()
}

/// The string at `p`, or `None` for null.
///
/// # Safety
/// `p` is null or NUL-terminated.
unsafe fn text(p: *const c_char) -> Option<String> {
    // SAFETY: non-null and NUL-terminated, per the caller.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// `n` values at `p` (`None` for a negative count, or null with a positive one).
///
/// # Safety
/// `p` is null or valid for `n` reads.
unsafe fn list<T: Copy>(p: *const T, n: i32) -> Option<Vec<T>> {
    let n = usize::try_from(n).ok()?;
    if n == 0 {
        return Some(Vec::new());
    }
    // SAFETY: non-null and valid for `n` reads, per the caller.
    (!p.is_null()).then(|| unsafe { std::slice::from_raw_parts(p, n) }.to_vec())
}

fn invalid(call: &str, what: &str) -> aclError {
    ret(Err(fail(
        ACL_ERROR_INVALID_PARAM,
        format!("{call}: {what}"),
    )))
}

/// `aclTensorDesc *aclCreateTensorDesc(aclDataType dataType, int numDims, const int64_t
/// *dims, aclFormat format)`: null for a negative count or null dims with a positive one.
///
/// # Safety
/// `dims` is null or valid for `num_dims` reads.
#[no_mangle]
pub unsafe extern "C" fn aclCreateTensorDesc(
    data_type: i32,
    num_dims: i32,
    dims: *const i64,
    format: i32,
) -> *mut aclTensorDesc {
    // SAFETY: the caller's guarantee on `dims`.
    let Some(dims) = (unsafe { list(dims, num_dims) }) else {
        return std::ptr::null_mut();
    };
    let mut o = objects();
    let h = o.handle();
    o.descs.insert(
        h,
        TensorDesc {
            dtype: data_type,
            origin_dims: dims.clone(),
            dims,
            format,
            origin_format: format,
            name: CString::default(),
        },
    );
    h as *mut aclTensorDesc
}

/// `void aclDestroyTensorDesc(const aclTensorDesc *desc)`.
#[no_mangle]
pub extern "C" fn aclDestroyTensorDesc(desc: *const aclTensorDesc) {
    objects().descs.remove(&(desc as usize));
}

/// Runs `f` on the description `desc` of `call`.
fn with_desc(call: &str, desc: usize, f: impl FnOnce(&mut TensorDesc)) -> aclError {
    match objects().descs.get_mut(&desc) {
        Some(d) => {
            f(d);
            ACL_SUCCESS
        }
        None => invalid(call, &format!("{desc:#x} is not a live aclTensorDesc")),
    }
}

/// `void aclSetTensorDescName(aclTensorDesc *desc, const char *name)`.
///
/// # Safety
/// `name` is null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn aclSetTensorDescName(desc: *mut aclTensorDesc, name: *const c_char) {
    let name = if name.is_null() {
        CString::default()
    } else {
        // SAFETY: non-null and NUL-terminated (the caller's guarantee).
        unsafe { CStr::from_ptr(name) }.to_owned()
    };
    with_desc("aclSetTensorDescName", desc as usize, |d| d.name = name);
}

/// `aclError aclSetTensorFormat(aclTensorDesc *desc, aclFormat format)`.
#[no_mangle]
pub extern "C" fn aclSetTensorFormat(desc: *mut aclTensorDesc, format: i32) -> aclError {
    with_desc("aclSetTensorFormat", desc as usize, |d| d.format = format)
}

/// `aclError aclSetTensorShape(aclTensorDesc *desc, int numDims, const int64_t *dims)`.
///
/// # Safety
/// `dims` is null or valid for `num_dims` reads.
#[no_mangle]
pub unsafe extern "C" fn aclSetTensorShape(
    desc: *mut aclTensorDesc,
    num_dims: i32,
    dims: *const i64,
) -> aclError {
    const CALL: &str = "aclSetTensorShape";
    // SAFETY: the caller's guarantee on `dims`.
    match unsafe { list(dims, num_dims) } {
        Some(dims) => with_desc(CALL, desc as usize, |d| d.dims = dims),
        None => invalid(CALL, "dims is null or numDims negative"),
    }
}

/// `aclError aclSetTensorPlaceMent(aclTensorDesc *desc, aclMemType memType)`: `memType` is
/// `ACL_MEMTYPE_DEVICE` (0), `ACL_MEMTYPE_HOST` (1) or `ACL_MEMTYPE_HOST_COMPILE_INDEPENDENT`
/// (2). Where a tensor lives matters only to compiling, which the simulator never does.
#[no_mangle]
pub extern "C" fn aclSetTensorPlaceMent(desc: *mut aclTensorDesc, mem_type: i32) -> aclError {
    const CALL: &str = "aclSetTensorPlaceMent";
    if !(0..=2).contains(&mem_type) {
        return invalid(CALL, &format!("{mem_type} is not an aclMemType"));
    }
    with_desc(CALL, desc as usize, |_| {})
}

/// `const char *aclGetTensorDescName(aclTensorDesc *desc)`: the name set, empty when none;
/// null for an unknown description. Valid until the name changes or the description is
/// destroyed.
#[no_mangle]
pub extern "C" fn aclGetTensorDescName(desc: *mut aclTensorDesc) -> *const c_char {
    objects()
        .descs
        .get(&(desc as usize))
        .map_or(std::ptr::null(), |d| d.name.as_ptr())
}

/// `aclError aclGetTensorDescDimV2(const aclTensorDesc *desc, size_t index, int64_t
/// *dimSize)`.
///
/// # Safety
/// `dim_size` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn aclGetTensorDescDimV2(
    desc: *const aclTensorDesc,
    index: usize,
    dim_size: *mut i64,
) -> aclError {
    const CALL: &str = "aclGetTensorDescDimV2";
    let dim = objects()
        .descs
        .get(&(desc as usize))
        .map(|d| d.dims.get(index).copied());
    match (dim, dim_size.is_null()) {
        (_, true) => invalid(CALL, "dimSize is null"),
        (Some(Some(v)), false) => {
            // SAFETY: non-null and valid for a write (the caller's guarantee).
            unsafe { dim_size.write(v) };
            ACL_SUCCESS
        }
        (Some(None), false) => invalid(CALL, &format!("index {index} is beyond the dimensions")),
        (None, false) => invalid(
            CALL,
            &format!("{:#x} is not a live aclTensorDesc", desc as usize),
        ),
    }
}

/// `aclFormat aclGetTensorDescFormat(const aclTensorDesc *desc)`: `ACL_FORMAT_UNDEFINED` for
/// an unknown description.
#[no_mangle]
pub extern "C" fn aclGetTensorDescFormat(desc: *const aclTensorDesc) -> i32 {
    objects()
        .descs
        .get(&(desc as usize))
        .map_or(ACL_FORMAT_UNDEFINED, |d| d.format)
}

/// `size_t aclGetTensorDescNumDims(const aclTensorDesc *desc)`: 0 for an unknown
/// description.
#[no_mangle]
pub extern "C" fn aclGetTensorDescNumDims(desc: *const aclTensorDesc) -> usize {
    objects()
        .descs
        .get(&(desc as usize))
        .map_or(0, |d| d.dims.len())
}

/// `aclDataType aclGetTensorDescType(const aclTensorDesc *desc)`: `ACL_DT_UNDEFINED` for an
/// unknown description.
#[no_mangle]
pub extern "C" fn aclGetTensorDescType(desc: *const aclTensorDesc) -> i32 {
    objects()
        .descs
        .get(&(desc as usize))
        .map_or(ACL_DT_UNDEFINED, |d| d.dtype)
}

/// `aclDataBuffer *aclCreateDataBuffer(void *data, size_t size)`.
#[no_mangle]
pub extern "C" fn aclCreateDataBuffer(data: *mut c_void, size: usize) -> *mut aclDataBuffer {
    let mut o = objects();
    let h = o.handle();
    o.buffers.insert(h, (data as usize, size));
    h as *mut aclDataBuffer
}

/// `aclError aclDestroyDataBuffer(const aclDataBuffer *dataBuffer)`.
#[no_mangle]
pub extern "C" fn aclDestroyDataBuffer(data_buffer: *const aclDataBuffer) -> aclError {
    let p = data_buffer as usize;
    match objects().buffers.remove(&p) {
        Some(_) => ACL_SUCCESS,
        None => invalid(
            "aclDestroyDataBuffer",
            &format!("{p:#x} is not a live aclDataBuffer"),
        ),
    }
}

/// `aclopAttr *aclopCreateAttr()`.
#[no_mangle]
pub extern "C" fn aclopCreateAttr() -> *mut aclopAttr {
    let mut o = objects();
    let h = o.handle();
    o.attrs.insert(h, BTreeMap::new());
    h as *mut aclopAttr
}

/// `void aclopDestroyAttr(const aclopAttr *attr)`.
#[no_mangle]
pub extern "C" fn aclopDestroyAttr(attr: *const aclopAttr) {
    objects().attrs.remove(&(attr as usize));
}

/// Sets attribute `name` of `attr` to `value` (rendered), for `call`.
///
/// # Safety
/// `name` is null or NUL-terminated.
unsafe fn set_attr(
    call: &str,
    attr: *mut aclopAttr,
    name: *const c_char,
    value: Option<String>,
) -> aclError {
    // SAFETY: the caller's guarantee on `name`.
    let Some(name) = (unsafe { text(name) }) else {
        return invalid(call, "attrName is null");
    };
    let Some(value) = value else {
        return invalid(call, &format!("the value of {name} is invalid"));
    };
    let p = attr as usize;
    match objects().attrs.get_mut(&p) {
        Some(a) => {
            a.insert(name, value);
            ACL_SUCCESS
        }
        None => invalid(call, &format!("{p:#x} is not a live aclopAttr")),
    }
}

/// `aclError aclopSetAttrBool(aclopAttr *attr, const char *attrName, uint8_t attrValue)`.
///
/// # Safety
/// `attr_name` is null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn aclopSetAttrBool(
    attr: *mut aclopAttr,
    attr_name: *const c_char,
    attr_value: u8,
) -> aclError {
    // SAFETY: forwarded.
    unsafe {
        set_attr(
            "aclopSetAttrBool",
            attr,
            attr_name,
            Some((attr_value != 0).to_string()),
        )
    }
}

/// `aclError aclopSetAttrInt(aclopAttr *attr, const char *attrName, int64_t attrValue)`.
///
/// # Safety
/// `attr_name` is null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn aclopSetAttrInt(
    attr: *mut aclopAttr,
    attr_name: *const c_char,
    attr_value: i64,
) -> aclError {
    // SAFETY: forwarded.
    unsafe {
        set_attr(
            "aclopSetAttrInt",
            attr,
            attr_name,
            Some(attr_value.to_string()),
        )
    }
}

/// `aclError aclopSetAttrFloat(aclopAttr *attr, const char *attrName, float attrValue)`.
///
/// # Safety
/// `attr_name` is null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn aclopSetAttrFloat(
    attr: *mut aclopAttr,
    attr_name: *const c_char,
    attr_value: f32,
) -> aclError {
    // SAFETY: forwarded.
    unsafe {
        set_attr(
            "aclopSetAttrFloat",
            attr,
            attr_name,
            Some(attr_value.to_string()),
        )
    }
}

/// `aclError aclopSetAttrString(aclopAttr *attr, const char *attrName, const char
/// *attrValue)`.
///
/// # Safety
/// `attr_name` and `attr_value` are null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn aclopSetAttrString(
    attr: *mut aclopAttr,
    attr_name: *const c_char,
    attr_value: *const c_char,
) -> aclError {
    // SAFETY: forwarded, and the caller's guarantee on `attr_value`.
    unsafe { set_attr("aclopSetAttrString", attr, attr_name, text(attr_value)) }
}

/// `aclError aclopSetAttrDataType(aclopAttr *attr, const char *attrName, aclDataType
/// attrValue)`.
///
/// # Safety
/// `attr_name` is null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn aclopSetAttrDataType(
    attr: *mut aclopAttr,
    attr_name: *const c_char,
    attr_value: i32,
) -> aclError {
    // SAFETY: forwarded.
    unsafe {
        set_attr(
            "aclopSetAttrDataType",
            attr,
            attr_name,
            Some(format!("dtype {attr_value}")),
        )
    }
}

/// `aclError aclopSetAttrListBool(...)`.
///
/// # Safety
/// `attr_name` is null or NUL-terminated; `values` null or valid for `num_values` reads.
#[no_mangle]
pub unsafe extern "C" fn aclopSetAttrListBool(
    attr: *mut aclopAttr,
    attr_name: *const c_char,
    num_values: i32,
    values: *const u8,
) -> aclError {
    // SAFETY: the caller's guarantees.
    unsafe {
        set_attr(
            "aclopSetAttrListBool",
            attr,
            attr_name,
            list(values, num_values).map(|v| format!("{v:?}")),
        )
    }
}

/// `aclError aclopSetAttrListInt(...)`.
///
/// # Safety
/// `attr_name` is null or NUL-terminated; `values` null or valid for `num_values` reads.
#[no_mangle]
pub unsafe extern "C" fn aclopSetAttrListInt(
    attr: *mut aclopAttr,
    attr_name: *const c_char,
    num_values: i32,
    values: *const i64,
) -> aclError {
    // SAFETY: the caller's guarantees.
    unsafe {
        set_attr(
            "aclopSetAttrListInt",
            attr,
            attr_name,
            list(values, num_values).map(|v| format!("{v:?}")),
        )
    }
}

/// `aclError aclopSetAttrListFloat(...)`.
///
/// # Safety
/// `attr_name` is null or NUL-terminated; `values` null or valid for `num_values` reads.
#[no_mangle]
pub unsafe extern "C" fn aclopSetAttrListFloat(
    attr: *mut aclopAttr,
    attr_name: *const c_char,
    num_values: i32,
    values: *const f32,
) -> aclError {
    // SAFETY: the caller's guarantees.
    unsafe {
        set_attr(
            "aclopSetAttrListFloat",
            attr,
            attr_name,
            list(values, num_values).map(|v| format!("{v:?}")),
        )
    }
}

/// `aclError aclopSetAttrListListInt(aclopAttr *attr, const char *attrName, int numLists,
/// const int *numValues, const int64_t *const values[])`.
///
/// # Safety
/// `attr_name` is null or NUL-terminated; `num_values` null or valid for `num_lists` reads,
/// and `values` likewise, each list valid for its count of reads.
#[no_mangle]
pub unsafe extern "C" fn aclopSetAttrListListInt(
    attr: *mut aclopAttr,
    attr_name: *const c_char,
    num_lists: i32,
    num_values: *const i32,
    values: *const *const i64,
) -> aclError {
    // SAFETY: the caller's guarantees on the counts and the lists.
    let lists = unsafe { list(num_values, num_lists).zip(list(values, num_lists)) }.and_then(
        |(counts, lists)| {
            counts
                .iter()
                .zip(&lists)
                // SAFETY: each list valid for its count (the caller's guarantee).
                .map(|(&n, &p)| unsafe { list(p, n) })
                .collect::<Option<Vec<_>>>()
        },
    );
    // SAFETY: forwarded.
    unsafe {
        set_attr(
            "aclopSetAttrListListInt",
            attr,
            attr_name,
            lists.map(|v| format!("{v:?}")),
        )
    }
}

/// One tensor of an operator on the compile path: its description and its buffer.
#[derive(Clone, Debug)]
pub(super) struct OpOperand {
    /// Its `aclDataType`.
    pub dtype: i32,
    /// The storage's shape and format.
    pub dims: Vec<i64>,
    /// The storage's format.
    pub format: i32,
    /// The logical shape and the format naming its dimensions.
    pub origin_dims: Vec<i64>,
    /// The format naming the logical dimensions.
    pub origin_format: i32,
    /// The buffer's address and size in bytes.
    pub data: (u64, u64),
}

/// The `n` tensors of `descs` with their `buffers` (`None` for a null array, an unknown
/// description or buffer).
///
/// # Safety
/// `descs` and `buffers` are null or valid for `n` reads.
unsafe fn operands(
    o: &Objects,
    descs: *const *const aclTensorDesc,
    buffers: *const *const aclDataBuffer,
    n: i32,
) -> Option<Vec<OpOperand>> {
    // SAFETY: the caller's guarantee.
    let (descs, buffers) = unsafe { (list(descs, n)?, list(buffers, n)?) };
    descs
        .iter()
        .zip(&buffers)
        .map(|(d, b)| {
            let d = o.descs.get(&(*d as usize))?;
            let &(data, size) = o.buffers.get(&(*b as usize))?;
            Some(OpOperand {
                dtype: d.dtype,
                dims: d.dims.clone(),
                format: d.format,
                origin_dims: d.origin_dims.clone(),
                origin_format: d.origin_format,
                data: (data as u64, size as u64),
            })
        })
        .collect()
}

/// The descriptions of `n` tensors at `descs`, for a message.
///
/// # Safety
/// `descs` is null or valid for `n` reads.
unsafe fn describe_all(o: &Objects, descs: *const *const aclTensorDesc, n: i32) -> String {
    // SAFETY: the caller's guarantee.
    let Some(list) = (unsafe { list(descs, n) }) else {
        return "?".into();
    };
    let text: Vec<String> = list
        .iter()
        .map(|p| {
            o.descs
                .get(&(*p as usize))
                .map_or("?".into(), TensorDesc::describe)
        })
        .collect();
    text.join(", ")
}

/// The refusal of an operator on the compile path: `ACL_ERROR_OP_NOT_FOUND`, naming the
/// operator, its tensors and attributes (braid-acl-sim compiles nothing; the operators it
/// computes are aclnn operators). Only the operator type, the descriptions and the
/// attributes are read. The refusal fails the stream's device (`registry::failures`): its
/// later host waits report it, so that work a client queued behind it is never read back as
/// if it had run.
///
/// # Safety
/// `op_type` is null or NUL-terminated; `input_desc` and `output_desc` are null or valid for
/// `num_inputs` and `num_outputs` reads.
unsafe fn refuse(
    call: &str,
    op_type: *const c_char,
    (num_inputs, input_desc): (i32, *const *const aclTensorDesc),
    (num_outputs, output_desc): (i32, *const *const aclTensorDesc),
    attr: *const aclopAttr,
    stream: *mut c_void,
) -> aclError {
    // SAFETY: the caller's guarantee on `op_type`.
    let Some(op) = (unsafe { text(op_type) }) else {
        return invalid(call, "opType is null");
    };
    let what = {
        let o = objects();
        // SAFETY: the caller's guarantees on the description arrays.
        let (inputs, outputs) = unsafe {
            (
                describe_all(&o, input_desc, num_inputs),
                describe_all(&o, output_desc, num_outputs),
            )
        };
        let attrs: Vec<String> = o
            .attrs
            .get(&(attr as usize))
            .map(|a| a.iter().map(|(k, v)| format!("{k}={v}")).collect())
            .unwrap_or_default();
        format!(
            "inputs [{inputs}], outputs [{outputs}], attributes [{}]",
            attrs.join(", ")
        )
    };
    tracing::warn!(operator = %op, %what, "braid-acl-sim refuses an operator it does not compute");
    let refusal = fail(
        ACL_ERROR_OP_NOT_FOUND,
        format!(
            "{call}: operator {op} is not computed by braid-acl-sim ({what}): it runs the aclnn operators it exports only and compiles nothing"
        ),
    );
    let _ = with(|r| {
        r.note_refused_launch(stream as usize, &refusal);
        Ok(())
    });
    ret(Err(refusal))
}

/// `Identity` computed ([`super::op_identity`]), any other operator refused (see
/// `refuse`).
///
/// # Safety
/// As `aclopCompileAndExecute`.
unsafe fn compile_and_execute(
    call: &'static str,
    op_type: *const c_char,
    (num_inputs, input_desc, inputs): (
        i32,
        *const *const aclTensorDesc,
        *const *const aclDataBuffer,
    ),
    (num_outputs, output_desc, outputs): (
        i32,
        *const *const aclTensorDesc,
        *const *const aclDataBuffer,
    ),
    attr: *const aclopAttr,
    stream: *mut c_void,
) -> aclError {
    // SAFETY: the caller's guarantee on `op_type`.
    if unsafe { text(op_type) }.as_deref() == Some("Identity") {
        let tensors = {
            let o = objects();
            // SAFETY: the caller's guarantees on the arrays.
            unsafe {
                (
                    operands(&o, input_desc, inputs, num_inputs),
                    operands(&o, output_desc, outputs, num_outputs),
                )
            }
        };
        let result = match tensors {
            (Some(ins), Some(outs)) => super::op_identity::run(call, stream as usize, &ins, &outs),
            _ => Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!(
                    "{call}: Identity: a tensor description or data buffer is null or not live"
                ),
            )),
        };
        if let Err(refusal) = &result {
            let _ = with(|r| {
                r.note_refused_launch(stream as usize, refusal);
                Ok(())
            });
        }
        return ret(result);
    }
    let (ins, outs) = ((num_inputs, input_desc), (num_outputs, output_desc));
    // SAFETY: forwarded.
    unsafe { refuse(call, op_type, ins, outs, attr, stream) }
}

/// `aclError aclopCompileAndExecute(const char *opType, ...)`: `Identity` computed, any
/// other operator refused with `ACL_ERROR_OP_NOT_FOUND` naming it (see `refuse`).
///
/// # Safety
/// `op_type` is null or NUL-terminated; `input_desc` and `output_desc` are null or valid for
/// `num_inputs` and `num_outputs` reads.
#[no_mangle]
pub unsafe extern "C" fn aclopCompileAndExecute(
    op_type: *const c_char,
    num_inputs: i32,
    input_desc: *const *const aclTensorDesc,
    inputs: *const *const aclDataBuffer,
    num_outputs: i32,
    output_desc: *const *const aclTensorDesc,
    outputs: *const *mut aclDataBuffer,
    attr: *const aclopAttr,
    _engine_type: i32,
    _compile_flag: i32,
    _op_path: *const c_char,
    stream: *mut c_void,
) -> aclError {
    let ins = (num_inputs, input_desc, inputs);
    let outs = (
        num_outputs,
        output_desc,
        outputs as *const *const aclDataBuffer,
    );
    // SAFETY: forwarded.
    unsafe { compile_and_execute("aclopCompileAndExecute", op_type, ins, outs, attr, stream) }
}

/// `aclError aclopCompileAndExecuteV2(const char *opType, ...)`: as
/// `aclopCompileAndExecute`.
///
/// # Safety
/// As `aclopCompileAndExecute`.
#[no_mangle]
pub unsafe extern "C" fn aclopCompileAndExecuteV2(
    op_type: *const c_char,
    num_inputs: i32,
    input_desc: *mut *mut aclTensorDesc,
    inputs: *mut *mut aclDataBuffer,
    num_outputs: i32,
    output_desc: *mut *mut aclTensorDesc,
    outputs: *mut *mut aclDataBuffer,
    attr: *mut aclopAttr,
    _engine_type: i32,
    _compile_flag: i32,
    _op_path: *const c_char,
    stream: *mut c_void,
) -> aclError {
    let ins = (
        num_inputs,
        input_desc as *const *const aclTensorDesc,
        inputs as *const *const aclDataBuffer,
    );
    let outs = (
        num_outputs,
        output_desc as *const *const aclTensorDesc,
        outputs as *const *const aclDataBuffer,
    );
    // SAFETY: forwarded.
    unsafe { compile_and_execute("aclopCompileAndExecuteV2", op_type, ins, outs, attr, stream) }
}

/// `aclError aclSetCompileopt(aclCompileOpt opt, const char *value)`: kept; a value longer
/// than [`COMPILE_OPT_MAX`] bytes is refused.
///
/// # Safety
/// `value` is null or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn aclSetCompileopt(opt: i32, value: *const c_char) -> aclError {
    const CALL: &str = "aclSetCompileopt";
    if !(0..ACL_COMPILE_OPT_COUNT).contains(&opt) {
        return invalid(CALL, &format!("{opt} is not an aclCompileOpt"));
    }
    // SAFETY: the caller's guarantee on `value`.
    let Some(value) = (unsafe { text(value) }) else {
        return invalid(CALL, "value is null");
    };
    if value.len() >= COMPILE_OPT_MAX {
        return invalid(
            CALL,
            &format!(
                "the value has {} bytes, at most {} are taken",
                value.len(),
                COMPILE_OPT_MAX - 1
            ),
        );
    }
    objects().compile_options.insert(opt, value);
    ACL_SUCCESS
}

/// `aclError aclGetCompileopt(aclCompileOpt opt, char *value, size_t length)`: the value
/// set, else the option's default (`ACL_OP_JIT_COMPILE`: `disable`, the default of the
/// Atlas A2 and A3 every simulated SoC is, which torch_npu reads at start-up to take the
/// aclnn paths; the others: empty), NUL-terminated; `length` must hold it.
///
/// # Safety
/// `value` is null or valid for `length` writes.
#[no_mangle]
pub unsafe extern "C" fn aclGetCompileopt(opt: i32, value: *mut c_char, length: usize) -> aclError {
    const CALL: &str = "aclGetCompileopt";
    if !(0..ACL_COMPILE_OPT_COUNT).contains(&opt) {
        return invalid(CALL, &format!("{opt} is not an aclCompileOpt"));
    }
    if value.is_null() {
        return invalid(CALL, "value is null");
    }
    let text = objects()
        .compile_options
        .get(&opt)
        .cloned()
        .unwrap_or_else(|| {
            if opt == ACL_OP_JIT_COMPILE {
                "disable".to_string()
            } else {
                String::new()
            }
        });
    if text.len() >= length {
        return invalid(
            CALL,
            &format!(
                "length {length} cannot hold the value's {} bytes and its NUL",
                text.len()
            ),
        );
    }
    // SAFETY: `value` is valid for `length > text.len()` writes (the caller's guarantee).
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), value.cast::<u8>(), text.len());
        value.add(text.len()).write(0);
    }
    ACL_SUCCESS
}

/// `size_t aclGetCompileoptSize(aclCompileOpt opt)`: [`COMPILE_OPT_MAX`] for every option
/// (0 for a value that is not one).
#[no_mangle]
pub extern "C" fn aclGetCompileoptSize(opt: i32) -> usize {
    if (0..ACL_COMPILE_OPT_COUNT).contains(&opt) {
        COMPILE_OPT_MAX
    } else {
        0
    }
}

braid_acl_sys::acl_op_functions!(braid_acl_sys::check_exports!(braid_acl_sys::acl::op::fns;));

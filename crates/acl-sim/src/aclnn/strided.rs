//! aclnn's general tensor semantics on the simulator: strided views (any non-negative element
//! strides and an element offset, as torch_npu passes non-contiguous tensors), broadcasting
//! (NumPy's rule, as CANN's binary operators take it), scalar factors, and reductions over any
//! subset of dimensions. Each operator becomes a host operator ([`braid_backend_sim::host_op`])
//! over exactly the byte ranges its tensors span, so the timeline and the sanitizer see it
//! like any kernel; it computes in `f32` (sums accumulate in `f64`) and rounds every stored
//! element to the tensor's type, as the simulator's kernels do.
//!
//! All tensors of one operator share one data type (float32, float16 or bfloat16): mixed
//! types, other types and negative strides are refused with `ACLNN_ERR_PARAM_INVALID`
//! naming the tensor, never computed approximately.

use super::TensorDesc;
use crate::errmsg::{fail, Fail};
use braid_acl_sys::aclnn::ACLNN_ERR_PARAM_INVALID;
use braid_backend_sim::{host_op, SimBackend};
use braid_stream_core::dtype::DType;
use braid_stream_core::types::{DevicePtr, DeviceSlice};
use braid_stream_core::{ComputeUnit, CustomOp, OpCost};

fn invalid(call: &str, message: String) -> Fail {
    fail(ACLNN_ERR_PARAM_INVALID, format!("{call}: {message}"))
}

/// A tensor as an operator reads or writes it: its shape and element strides over the byte
/// range from its first element (the lowest address, strides being non-negative) to its
/// last.
#[derive(Clone, Debug)]
pub(crate) struct Strided {
    pub dtype: DType,
    pub dims: Vec<usize>,
    pub strides: Vec<usize>,
    pub range: DeviceSlice,
}

impl Strided {
    /// The view of `t` (named `name` in messages).
    pub fn of(call: &str, name: &str, t: &TensorDesc) -> Result<Strided, Fail> {
        let dtype = super::dtype_of(t.dtype).ok_or_else(|| {
            invalid(
                call,
                format!(
                    "{name} has data type {}, which is not supported (float32, float16, bfloat16)",
                    t.dtype
                ),
            )
        })?;
        if t.strides.len() != t.dims.len() {
            return Err(invalid(
                call,
                format!(
                    "{name} has {} strides for {} dimensions",
                    t.strides.len(),
                    t.dims.len()
                ),
            ));
        }
        let dims: Vec<usize> = t.dims.iter().map(|&d| d as usize).collect();
        let strides = t
            .strides
            .iter()
            .map(|&s| usize::try_from(s))
            .collect::<Result<Vec<usize>, _>>()
            .map_err(|_| {
                invalid(
                    call,
                    format!(
                        "{name} has negative strides {:?}, which the simulator does not take",
                        t.strides
                    ),
                )
            })?;
        let numel: usize = dims.iter().product();
        let span = if numel == 0 {
            0
        } else {
            1 + dims
                .iter()
                .zip(&strides)
                .map(|(d, s)| (d - 1) * s)
                .sum::<usize>()
        };
        let size = dtype.size();
        Ok(Strided {
            dtype,
            range: DeviceSlice::new(
                DevicePtr(t.data + t.offset as u64 * size),
                span as u64 * size,
            ),
            dims,
            strides,
        })
    }

    /// The element positions (from the start of the range) of this tensor broadcast to
    /// `shape`, in row-major order of `shape`.
    pub fn positions(&self, shape: &[usize]) -> Vec<usize> {
        let lead = shape.len() - self.dims.len();
        let strides: Vec<usize> = (0..shape.len())
            .map(|i| match i.checked_sub(lead) {
                Some(j) if self.dims[j] != 1 => self.strides[j],
                _ => 0,
            })
            .collect();
        let total: usize = shape.iter().product();
        let mut out = Vec::with_capacity(total);
        let mut index = vec![0usize; shape.len()];
        let mut at = 0usize;
        for _ in 0..total {
            out.push(at);
            // Odometer step, last dimension fastest.
            for d in (0..shape.len()).rev() {
                index[d] += 1;
                at += strides[d];
                if index[d] < shape[d] {
                    break;
                }
                at -= strides[d] * index[d];
                index[d] = 0;
            }
        }
        out
    }
}

/// The shape `a` and `b` broadcast to, by NumPy's rule (dimensions aligned on the right,
/// each pair equal or one of them 1); `None` when they do not broadcast.
pub(crate) fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let at = |s: &[usize], i: usize| i.checked_sub(n - s.len()).map_or(1, |j| s[j]);
    (0..n)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

/// Checks `tensor` broadcasts to `shape` exactly (it may have fewer or size-1 dimensions).
pub(crate) fn expect_broadcast(
    call: &str,
    name: &str,
    tensor: &[usize],
    shape: &[usize],
) -> Result<(), Fail> {
    if broadcast(tensor, shape).as_deref() == Some(shape) {
        Ok(())
    } else {
        Err(invalid(
            call,
            format!("{name} of shape {tensor:?} does not broadcast to {shape:?}"),
        ))
    }
}

/// Reads element `at` of a range in `dtype`.
fn load(dtype: DType, bytes: &[u8], at: usize) -> f32 {
    dtype.get(bytes, at).unwrap_or(f32::NAN)
}

/// Writes `value`, rounded to `dtype`, as element `at` of `bytes`.
fn store(dtype: DType, bytes: &mut [u8], at: usize, value: f32) {
    let size = dtype.size() as usize;
    let mut one = Vec::with_capacity(size);
    dtype.push(&mut one, value);
    if let Some(slot) = bytes.get_mut(at * size..(at + 1) * size) {
        slot.copy_from_slice(&one);
    }
}

/// An elementwise operator: `out[i] = f(inputs[0][i], inputs[1][i], ...)` with the inputs
/// broadcast to `out`'s shape. `name` labels it in timelines and reports.
pub(crate) fn elementwise(
    name: &str,
    inputs: Vec<Strided>,
    out: Strided,
    f: impl Fn(&[f32]) -> f32 + Send + Sync + 'static,
) -> CustomOp<SimBackend> {
    let shape = out.dims.clone();
    let plans: Vec<(DType, Vec<usize>)> = inputs
        .iter()
        .map(|t| (t.dtype, t.positions(&shape)))
        .collect();
    let targets = out.positions(&shape);
    let numel = targets.len() as u64;
    let bytes = inputs.iter().map(|t| t.range.len).sum::<u64>() + out.range.len;
    let dtype = out.dtype;
    let body = host_op(move |read, written| {
        let mut args = vec![0f32; plans.len()];
        for (i, &target) in targets.iter().enumerate() {
            for (k, (t, plan)) in plans.iter().enumerate() {
                args[k] = load(*t, read[k], plan[i]);
            }
            store(dtype, written[0], target, f(&args));
        }
    });
    let mut op = CustomOp::new(name).dtype(dtype).in_place();
    for t in &inputs {
        op = op.read(t.range);
    }
    op.write(out.range)
        .cost(OpCost::Work {
            unit: ComputeUnit::Vector,
            flops: numel * inputs.len().max(1) as u64,
            bytes,
        })
        .body(body)
}

/// A sum of `src` over the dimensions `reduced` into `out`, which has `src`'s shape with
/// those dimensions removed (or kept as 1).
pub(crate) fn reduce_sum(
    name: &str,
    src: Strided,
    reduced: &[bool],
    out: Strided,
) -> CustomOp<SimBackend> {
    // Each source element's output element, in row-major order of the source.
    let kept: Vec<usize> = src
        .dims
        .iter()
        .zip(reduced)
        .map(|(&d, &r)| if r { 1 } else { d })
        .collect();
    let out_index = {
        // Row-major strides of the kept shape, 0 on reduced dimensions.
        let mut strides = vec![0usize; kept.len()];
        let mut acc = 1usize;
        for d in (0..kept.len()).rev() {
            if !reduced[d] {
                strides[d] = acc;
            }
            acc *= kept[d];
        }
        Strided {
            dims: src.dims.clone(),
            strides,
            ..src.clone()
        }
        .positions(&src.dims)
    };
    let sources = src.positions(&src.dims);
    let targets = out.positions(&out.dims);
    let bytes = src.range.len + out.range.len;
    let numel = sources.len() as u64;
    let (from, dtype) = (src.dtype, out.dtype);
    let body = host_op(move |read, written| {
        let mut sums = vec![0f64; targets.len()];
        for (&at, &k) in sources.iter().zip(&out_index) {
            sums[k] += f64::from(load(from, read[0], at));
        }
        for (&target, sum) in targets.iter().zip(sums) {
            store(dtype, written[0], target, sum as f32);
        }
    });
    CustomOp::new(name)
        .dtype(dtype)
        .in_place()
        .read(src.range)
        .write(out.range)
        .cost(OpCost::Work {
            unit: ComputeUnit::Vector,
            flops: numel,
            bytes,
        })
        .body(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(dims: &[usize], strides: &[usize]) -> Strided {
        Strided {
            dtype: DType::F32,
            dims: dims.to_vec(),
            strides: strides.to_vec(),
            range: DeviceSlice::new(DevicePtr(0x1000), 0),
        }
    }

    #[test]
    fn broadcasting_follows_numpys_rule() {
        assert_eq!(broadcast(&[2, 3], &[3]), Some(vec![2, 3]));
        assert_eq!(broadcast(&[2, 1], &[1, 4]), Some(vec![2, 4]));
        assert_eq!(broadcast(&[], &[5]), Some(vec![5]));
        assert_eq!(broadcast(&[2, 3], &[2]), None);
        assert!(expect_broadcast("op", "other", &[3], &[2, 3]).is_ok());
        let err = expect_broadcast("op", "other", &[2, 3], &[3]).unwrap_err();
        assert_eq!(err.code, ACLNN_ERR_PARAM_INVALID);
        assert!(
            err.message.contains("other of shape [2, 3]"),
            "{}",
            err.message
        );
    }

    #[test]
    fn positions_follow_strides_and_broadcast_size_one_dimensions() {
        // A contiguous 2x3.
        assert_eq!(
            view(&[2, 3], &[3, 1]).positions(&[2, 3]),
            vec![0, 1, 2, 3, 4, 5]
        );
        // Its transpose (3x2 with strides 1, 3).
        assert_eq!(
            view(&[3, 2], &[1, 3]).positions(&[3, 2]),
            vec![0, 3, 1, 4, 2, 5]
        );
        // A row broadcast over 2 rows, a column over 3 columns.
        assert_eq!(view(&[3], &[1]).positions(&[2, 3]), vec![0, 1, 2, 0, 1, 2]);
        assert_eq!(
            view(&[2, 1], &[1, 1]).positions(&[2, 3]),
            vec![0, 0, 0, 1, 1, 1]
        );
        // A scalar tensor.
        assert_eq!(view(&[], &[]).positions(&[2]), vec![0, 0]);
    }

    #[test]
    fn a_view_spans_from_its_first_to_its_last_element() {
        let t = TensorDesc {
            dims: vec![3, 2],
            strides: vec![1, 3],
            offset: 2,
            dtype: braid_acl_sys::aclnn::ACL_FLOAT16,
            data: 0x1000,
        };
        let v = Strided::of("op", "self", &t).unwrap();
        // From element 2 to element 2 + 2*1 + 1*3 = 7: 6 elements of 2 bytes.
        assert_eq!(v.range, DeviceSlice::new(DevicePtr(0x1004), 12));
        let negative = TensorDesc {
            strides: vec![-1, 3],
            ..t
        };
        let err = Strided::of("op", "self", &negative).unwrap_err();
        assert!(err.message.contains("negative strides"), "{}", err.message);
    }
}

//! Tensors as operators see them: a typed, shaped, strided view of device memory
//! ([`Tensor`]).
//!
//! A tensor is a descriptor, not an owner: an address, a data type, a shape and element
//! strides, like an `aclTensor` or a PyTorch view. It borrows nothing, so it is cheap to clone
//! and can describe memory of any owner (an allocator buffer, raw device memory, a foreign
//! framework's tensor). Views (transpose, narrow, broadcast, reshape) make new descriptors of
//! the same memory without moving it.
//!
//! Strides are in elements and never negative; a stride of 0 repeats one element along a
//! dimension (a broadcast view, as `torch.expand`). The element at index `[i, j, ...]` lives at
//! `ptr + (i * strides[0] + j * strides[1] + ...) * dtype.size()`, so the tensor's bytes are
//! the range from `ptr` to its last element ([`Tensor::range`]): that range is what an
//! operator declares, so the ordering model, the allocator's lifetime tracking and the
//! simulator's sanitizer see exactly the memory the tensor spans.

use crate::dtype::DType;
use crate::types::{DevicePtr, DeviceSlice};
use std::fmt;

/// The most dimensions a tensor has (CANN's limit for most operators is 8).
pub const MAX_RANK: usize = 8;

/// Why a tensor descriptor cannot be made.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum TensorError {
    /// More dimensions than [`MAX_RANK`].
    #[error("a tensor has at most {MAX_RANK} dimensions, {rank} were given")]
    Rank {
        /// The dimensions given.
        rank: usize,
    },
    /// The shape and the strides have different lengths.
    #[error("{strides} strides were given for {rank} dimensions")]
    StrideCount {
        /// Dimensions.
        rank: usize,
        /// Strides.
        strides: usize,
    },
    /// The shape's bytes do not fit in the slice given.
    #[error(
        "shape {shape:?} of {dtype} needs {needed} bytes, the slice at {slice} has {available}"
    )]
    TooSmall {
        /// The shape.
        shape: Vec<usize>,
        /// The data type.
        dtype: DType,
        /// The slice.
        slice: DeviceSlice,
        /// Bytes the shape needs.
        needed: u64,
        /// Bytes the slice has.
        available: u64,
    },
    /// The tensor's last element lies past the end of the address space.
    #[error("a tensor of shape {shape:?} at {ptr} runs past the end of the address space")]
    Overflow {
        /// The shape.
        shape: Vec<usize>,
        /// Its address.
        ptr: DevicePtr,
    },
    /// A view names a dimension the tensor does not have.
    #[error("dimension {dim} is out of range for a tensor of rank {rank}")]
    Dim {
        /// The dimension named.
        dim: usize,
        /// The tensor's rank.
        rank: usize,
    },
    /// A view's range or shape does not fit the tensor.
    #[error("{view} of a tensor of shape {shape:?}: {reason}")]
    View {
        /// The view (`narrow`, `reshape`, `broadcast_to`...).
        view: &'static str,
        /// The tensor's shape.
        shape: Vec<usize>,
        /// What does not fit.
        reason: String,
    },
}

/// A typed, shaped, strided view of device memory (see the [module](self) docs).
///
/// ```
/// use braid_stream_core::tensor::Tensor;
/// use braid_stream_core::{DType, DevicePtr, DeviceSlice};
/// let w = Tensor::new(DeviceSlice::new(DevicePtr(0x1000), 6 * 4), DType::F32, &[2, 3])?;
/// assert_eq!(w.strides(), [3, 1]);
/// let wt = w.t()?; // a [3, 2] view of the same bytes
/// assert_eq!((wt.shape(), wt.strides()), (&[3, 2][..], &[1, 3][..]));
/// assert!(!wt.is_contiguous());
/// assert_eq!(wt.range(), w.range());
/// # Ok::<(), braid_stream_core::tensor::TensorError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Tensor {
    ptr: DevicePtr,
    dtype: DType,
    shape: Vec<usize>,
    strides: Vec<usize>,
}

/// Row-major (contiguous) strides of `shape`.
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![0usize; shape.len()];
    let mut acc = 1usize;
    for d in (0..shape.len()).rev() {
        strides[d] = acc;
        acc = acc.saturating_mul(shape[d].max(1));
    }
    strides
}

impl Tensor {
    /// A contiguous (row-major) tensor of `shape` at the start of `slice`, which must hold its
    /// bytes (it may be longer: an allocation rounded up, or a larger buffer).
    pub fn new(slice: DeviceSlice, dtype: DType, shape: &[usize]) -> Result<Tensor, TensorError> {
        let t = Tensor::strided(slice.ptr, dtype, shape, &contiguous_strides(shape))?;
        let needed = t.range().len;
        if needed > slice.len {
            return Err(TensorError::TooSmall {
                shape: shape.to_vec(),
                dtype,
                slice,
                needed,
                available: slice.len,
            });
        }
        Ok(t)
    }

    /// A tensor of `shape` with element `strides` whose first element is at `ptr`.
    pub fn strided(
        ptr: DevicePtr,
        dtype: DType,
        shape: &[usize],
        strides: &[usize],
    ) -> Result<Tensor, TensorError> {
        if shape.len() > MAX_RANK {
            return Err(TensorError::Rank { rank: shape.len() });
        }
        if strides.len() != shape.len() {
            return Err(TensorError::StrideCount {
                rank: shape.len(),
                strides: strides.len(),
            });
        }
        let t = Tensor {
            ptr,
            dtype,
            shape: shape.to_vec(),
            strides: strides.to_vec(),
        };
        match t.span_elements().and_then(|n| n.checked_mul(dtype.size())) {
            Some(bytes) if ptr.0.checked_add(bytes).is_some() => Ok(t),
            _ => Err(TensorError::Overflow {
                shape: shape.to_vec(),
                ptr,
            }),
        }
    }

    /// A one-element tensor of `dtype` at `ptr` with no dimensions.
    pub fn scalar(ptr: DevicePtr, dtype: DType) -> Tensor {
        Tensor {
            ptr,
            dtype,
            shape: Vec::new(),
            strides: Vec::new(),
        }
    }

    /// Elements from the first to the last one, both included (0 for an empty tensor).
    fn span_elements(&self) -> Option<u64> {
        if self.shape.contains(&0) {
            return Some(0);
        }
        let mut last = 0u64;
        for (&d, &s) in self.shape.iter().zip(&self.strides) {
            let step = (d as u64 - 1).checked_mul(s as u64)?;
            last = last.checked_add(step)?;
        }
        last.checked_add(1)
    }

    /// The address of its first element.
    pub fn ptr(&self) -> DevicePtr {
        self.ptr
    }

    /// Its data type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Its shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Its element strides.
    pub fn strides(&self) -> &[usize] {
        &self.strides
    }

    /// Its number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Its number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// The bytes it spans, from its first element to the end of its last: what an operator
    /// reading or writing it declares.
    pub fn range(&self) -> DeviceSlice {
        // `strided` checked that the span fits in the address space.
        let bytes = self.span_elements().unwrap_or(0) * self.dtype.size();
        DeviceSlice::new(self.ptr, bytes)
    }

    /// Whether its elements are laid out row-major without gaps (dimensions of size 1 may
    /// have any stride).
    pub fn is_contiguous(&self) -> bool {
        let mut expect = 1usize;
        for (&d, &s) in self.shape.iter().zip(&self.strides).rev() {
            if d > 1 && s != expect {
                return false;
            }
            expect = expect.saturating_mul(d.max(1));
        }
        true
    }

    /// Whether two elements share memory (a stride of 0 on a dimension longer than 1).
    pub fn has_broadcast(&self) -> bool {
        self.shape
            .iter()
            .zip(&self.strides)
            .any(|(&d, &s)| d > 1 && s == 0)
    }

    /// The same memory seen as `dtype` with the same shape and strides (no conversion).
    pub fn with_dtype(&self, dtype: DType) -> Result<Tensor, TensorError> {
        Tensor::strided(self.ptr, dtype, &self.shape, &self.strides)
    }

    fn check_dim(&self, dim: usize) -> Result<(), TensorError> {
        if dim < self.rank() {
            Ok(())
        } else {
            Err(TensorError::Dim {
                dim,
                rank: self.rank(),
            })
        }
    }

    /// The view with dimensions `a` and `b` swapped.
    pub fn transpose(&self, a: usize, b: usize) -> Result<Tensor, TensorError> {
        self.check_dim(a)?;
        self.check_dim(b)?;
        let mut t = self.clone();
        t.shape.swap(a, b);
        t.strides.swap(a, b);
        Ok(t)
    }

    /// The view with its last two dimensions swapped (a matrix's transpose, as `W.t()`).
    pub fn t(&self) -> Result<Tensor, TensorError> {
        if self.rank() < 2 {
            return Err(TensorError::View {
                view: "t",
                shape: self.shape.clone(),
                reason: "it needs at least two dimensions".to_string(),
            });
        }
        self.transpose(self.rank() - 2, self.rank() - 1)
    }

    /// The view of elements `start..start + len` of dimension `dim`.
    pub fn narrow(&self, dim: usize, start: usize, len: usize) -> Result<Tensor, TensorError> {
        self.check_dim(dim)?;
        if start
            .checked_add(len)
            .is_none_or(|end| end > self.shape[dim])
        {
            return Err(TensorError::View {
                view: "narrow",
                shape: self.shape.clone(),
                reason: format!(
                    "elements {start}..{} of dimension {dim}, which has {}",
                    start.saturating_add(len),
                    self.shape[dim]
                ),
            });
        }
        let mut t = self.clone();
        let offset = (start * self.strides[dim]) as u64 * self.dtype.size();
        t.ptr = DevicePtr(self.ptr.0 + offset);
        t.shape[dim] = len;
        Ok(t)
    }

    /// The view of index `index` of dimension `dim`, without that dimension.
    pub fn select(&self, dim: usize, index: usize) -> Result<Tensor, TensorError> {
        let mut t = self.narrow(dim, index, 1)?;
        t.shape.remove(dim);
        t.strides.remove(dim);
        Ok(t)
    }

    /// The view with a dimension of size 1 inserted at `dim` (`0..=rank`).
    pub fn unsqueeze(&self, dim: usize) -> Result<Tensor, TensorError> {
        if dim > self.rank() || self.rank() == MAX_RANK {
            return Err(TensorError::Dim {
                dim,
                rank: self.rank(),
            });
        }
        let mut t = self.clone();
        let stride = self.strides.get(dim).map_or(1, |&s| s * self.shape[dim]);
        t.shape.insert(dim, 1);
        t.strides.insert(dim, stride);
        Ok(t)
    }

    /// The same contiguous memory with another shape of as many elements.
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor, TensorError> {
        let fail = |reason: String| TensorError::View {
            view: "reshape",
            shape: self.shape.clone(),
            reason,
        };
        if !self.is_contiguous() {
            return Err(fail("only a contiguous tensor can be reshaped".to_string()));
        }
        if shape.iter().product::<usize>() != self.numel() {
            return Err(fail(format!(
                "{shape:?} has {} elements, the tensor {}",
                shape.iter().product::<usize>(),
                self.numel()
            )));
        }
        Tensor::strided(self.ptr, self.dtype, shape, &contiguous_strides(shape))
    }

    /// The view repeated to `shape` by NumPy's broadcasting rule (dimensions aligned on the
    /// right, a dimension of size 1 repeated with stride 0), as `torch.expand`.
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Tensor, TensorError> {
        let fail = || TensorError::View {
            view: "broadcast_to",
            shape: self.shape.clone(),
            reason: format!("it does not broadcast to {shape:?}"),
        };
        if shape.len() < self.rank() {
            return Err(fail());
        }
        let lead = shape.len() - self.rank();
        let mut strides = vec![0usize; shape.len()];
        for (i, &want) in shape.iter().enumerate().skip(lead) {
            let (have, stride) = (self.shape[i - lead], self.strides[i - lead]);
            strides[i] = match (have, want) {
                (h, w) if h == w => stride,
                (1, _) => 0,
                _ => return Err(fail()),
            };
        }
        Tensor::strided(self.ptr, self.dtype, shape, &strides)
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor({} {:?} at {}", self.dtype, self.shape, self.ptr)?;
        if !self.is_contiguous() {
            write!(f, " strides {:?}", self.strides)?;
        }
        f.write_str(")")
    }
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:?}", self.dtype, self.shape)
    }
}

/// The shape `a` and `b` broadcast to by NumPy's rule (dimensions aligned on the right, each
/// pair equal or one of them 1); `None` when they do not broadcast.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn t(shape: &[usize]) -> Tensor {
        let bytes = shape.iter().product::<usize>() as u64 * 4;
        Tensor::new(
            DeviceSlice::new(DevicePtr(0x1000), bytes),
            DType::F32,
            shape,
        )
        .unwrap()
    }

    #[test]
    fn a_contiguous_tensor_spans_its_elements() {
        let x = t(&[2, 3, 4]);
        assert_eq!(x.strides(), [12, 4, 1]);
        assert_eq!(x.range(), DeviceSlice::new(DevicePtr(0x1000), 96));
        assert!(x.is_contiguous() && !x.has_broadcast());
        assert_eq!(x.numel(), 24);
        let err = Tensor::new(
            DeviceSlice::new(DevicePtr(0x1000), 95),
            DType::F32,
            &[2, 3, 4],
        )
        .unwrap_err();
        assert!(err.to_string().contains("needs 96 bytes"), "{err}");
        let empty = t(&[0, 5]);
        assert_eq!(empty.range().len, 0);
        assert!(matches!(
            Tensor::strided(DevicePtr(u64::MAX - 8), DType::F32, &[4], &[1]),
            Err(TensorError::Overflow { .. })
        ));
        assert!(matches!(
            Tensor::strided(DevicePtr(0), DType::F32, &[4, 1], &[1]),
            Err(TensorError::StrideCount { .. })
        ));
    }

    #[test]
    fn views_share_memory_and_keep_their_range_inside_it() {
        let x = t(&[4, 6]);
        let col = x.narrow(1, 2, 3).unwrap();
        assert_eq!(col.ptr(), DevicePtr(0x1000 + 8));
        assert_eq!(col.range().len, (3 * 6 + 3) as u64 * 4);
        assert!(!col.is_contiguous());
        let row = x.select(0, 3).unwrap();
        assert_eq!((row.shape(), row.ptr()), (&[6][..], DevicePtr(0x1000 + 72)));
        assert!(row.is_contiguous());
        let u = row.unsqueeze(0).unwrap();
        assert_eq!((u.shape(), u.strides()), (&[1, 6][..], &[6, 1][..]));
        let b = u.broadcast_to(&[5, 6]).unwrap();
        assert_eq!(b.strides(), [0, 1]);
        assert!(b.has_broadcast());
        assert_eq!(b.range(), row.range());
        assert!(x.narrow(1, 4, 3).is_err());
        assert!(x.transpose(0, 2).is_err());
        assert!(x.t().unwrap().reshape(&[24]).is_err());
        assert_eq!(x.reshape(&[2, 12]).unwrap().strides(), [12, 1]);
        assert!(x.reshape(&[5]).is_err());
        assert!(t(&[3]).broadcast_to(&[2, 4]).is_err());
    }

    #[test]
    fn shapes_broadcast_by_numpys_rule() {
        assert_eq!(broadcast_shapes(&[2, 3], &[3]), Some(vec![2, 3]));
        assert_eq!(broadcast_shapes(&[2, 1], &[1, 4]), Some(vec![2, 4]));
        assert_eq!(broadcast_shapes(&[], &[5]), Some(vec![5]));
        assert_eq!(broadcast_shapes(&[2, 3], &[2]), None);
    }
}

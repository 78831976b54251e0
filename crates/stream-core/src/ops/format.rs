//! Device-private storage formats and [`FormatCast`], the operator that converts a tensor to
//! and from one.
//!
//! An Ascend NPU's cube unit reads some operands in blocked layouts: a tensor in a private
//! format is stored not row-major in its shape but as fixed-size blocks, padded with zeros
//! where its dimensions are not a multiple of the block. [`Blocked`] describes such a tensor
//! (its logical shape, how its dimensions are named, the format and the block size `C0`)
//! and maps each of its elements to its place in the storage; it is the one definition of
//! each layout, which every backend computes with.
//!
//! The layouts are [`Blocked`]'s.

use super::check::{same_dtype, shape_is};
use super::{OpCheckError, OpSpec, OperandUse};
use crate::tensor::Tensor;
use std::fmt;

/// A device-private (blocked) storage format.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum PrivateFormat {
    /// `NC1HWC0`: 4-D activations, channels cut into blocks of `C0`.
    Nc1hwc0,
    /// `FRACTAL_Z`: 4-D convolution weights, blocks of 16 kernels by `C0` channels.
    FractalZ,
    /// `FRACTAL_NZ`: the last two dimensions as 16 × `C0` blocks, column blocks outermost.
    FractalNz,
    /// `NDC1HWC0`: 5-D activations, channels cut into blocks of `C0`.
    Ndc1hwc0,
    /// `FRACTAL_Z_3D`: 5-D convolution weights, blocks of 16 kernels by `C0` channels.
    FractalZ3d,
}

impl PrivateFormat {
    /// CANN's name for it.
    pub fn name(self) -> &'static str {
        match self {
            PrivateFormat::Nc1hwc0 => "NC1HWC0",
            PrivateFormat::FractalZ => "FRACTAL_Z",
            PrivateFormat::FractalNz => "FRACTAL_NZ",
            PrivateFormat::Ndc1hwc0 => "NDC1HWC0",
            PrivateFormat::FractalZ3d => "FRACTAL_Z_3D",
        }
    }

    /// The plain formats a tensor in it can be converted from and to.
    pub fn plain_formats(self) -> &'static [PlainFormat] {
        use PlainFormat::*;
        match self {
            PrivateFormat::Nc1hwc0 => &[Nd, Nchw, Nhwc],
            PrivateFormat::FractalZ => &[Nd, Nchw, Hwcn],
            PrivateFormat::FractalNz => &[Nd, Nchw, Nhwc, Hwcn, Ncdhw, Ndhwc, Dhwcn],
            PrivateFormat::Ndc1hwc0 => &[Ncdhw, Ndhwc],
            PrivateFormat::FractalZ3d => &[Ncdhw, Dhwcn],
        }
    }
}

impl fmt::Display for PrivateFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How the dimensions of a plain (row-major) tensor are named.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum PlainFormat {
    /// Named by rank only (`ND`, `NC`, `NCL`).
    Nd,
    /// `NCHW`.
    Nchw,
    /// `NHWC`.
    Nhwc,
    /// `HWCN`.
    Hwcn,
    /// `NCDHW`.
    Ncdhw,
    /// `NDHWC`.
    Ndhwc,
    /// `DHWCN`.
    Dhwcn,
}

impl PlainFormat {
    /// CANN's name for it.
    pub fn name(self) -> &'static str {
        match self {
            PlainFormat::Nd => "ND",
            PlainFormat::Nchw => "NCHW",
            PlainFormat::Nhwc => "NHWC",
            PlainFormat::Hwcn => "HWCN",
            PlainFormat::Ncdhw => "NCDHW",
            PlainFormat::Ndhwc => "NDHWC",
            PlainFormat::Dhwcn => "DHWCN",
        }
    }

    /// The rank it names (`None` for [`PlainFormat::Nd`]: any).
    fn rank(self) -> Option<usize> {
        match self {
            PlainFormat::Nd => None,
            PlainFormat::Nchw | PlainFormat::Nhwc | PlainFormat::Hwcn => Some(4),
            PlainFormat::Ncdhw | PlainFormat::Ndhwc | PlainFormat::Dhwcn => Some(5),
        }
    }
}

impl fmt::Display for PlainFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The rows of a `FRACTAL_NZ` block, and the kernels of a `FRACTAL_Z` one.
pub const FRACTAL_ROWS: usize = 16;

/// Which logical dimension holds N, C, D, H and W (`None`: a missing dimension of size 1).
type Axes = [Option<usize>; 5];
const N: usize = 0;
const C: usize = 1;
const D: usize = 2;
const H: usize = 3;
const W: usize = 4;

/// A tensor stored in a private format: its logical shape and how its dimensions are named,
/// the format, and the block size `C0`. Made by [`Blocked::new`], which checks that the
/// format takes the tensor.
///
/// The layouts (`⌈a/b⌉` is `a` divided by `b` rounded up; `C1 = ⌈C/C0⌉`, `N1 = ⌈N/16⌉`):
///
/// | format | from | storage shape | element `(n, c, h, w)` / `[..., m, k]` at |
/// |---|---|---|---|
/// | `NC1HWC0` | NCHW, NHWC | `[N, C1, H, W, C0]` | `[n, c/C0, h, w, c%C0]` |
/// | `FRACTAL_Z` | NCHW, HWCN | `[C1·H·W, N1, 16, C0]` | `[(c/C0·H + h)·W + w, n/16, n%16, c%C0]` |
/// | `FRACTAL_NZ` | any of 2 to 6 dimensions | `[..., ⌈K/C0⌉, ⌈M/16⌉, 16, C0]` | `[..., k/C0, m/16, m%16, k%C0]` |
/// | `NDC1HWC0` | NCDHW, NDHWC | `[N, D, C1, H, W, C0]` | `[n, d, c/C0, h, w, c%C0]` |
/// | `FRACTAL_Z_3D` | NCDHW, DHWCN | `[D·C1·H·W, N1, 16, C0]` | `[((d·C1 + c/C0)·H + h)·W + w, n/16, n%16, c%C0]` |
///
/// A tensor of fewer than 4 dimensions, named only by its rank ([`PlainFormat::Nd`]) or
/// NCHW, goes to `NC1HWC0` or `FRACTAL_Z` as torch_npu pads it: `[C]`, `[C, H]`, `[C, H,
/// W]` (N, H and W of size 1 where missing); a 4-D `ND` one as NCHW.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Blocked {
    format: PrivateFormat,
    plain: PlainFormat,
    shape: Vec<usize>,
    c0: usize,
    /// Where N, C, D, H, W are in `shape` (the NZ format uses none of them).
    axes: Axes,
}

impl Blocked {
    /// A tensor of logical `shape`, its dimensions named by `plain`, stored in `format`
    /// with blocks of `c0`. Refused (naming `operand` of operator `op`) when `format` is not
    /// converted from `plain`, when the rank does not fit, or when `c0` is 0.
    pub fn new(
        op: &'static str,
        operand: &'static str,
        format: PrivateFormat,
        plain: PlainFormat,
        shape: &[usize],
        c0: usize,
    ) -> Result<Blocked, OpCheckError> {
        let refuse = |rule: String| OpCheckError::Shape {
            op,
            operand,
            shape: shape.to_vec(),
            rule,
        };
        if c0 == 0 {
            return Err(OpCheckError::Attribute {
                op,
                attribute: "C0",
                reason: "is 0; a block holds at least one element".to_string(),
            });
        }
        if !format.plain_formats().contains(&plain) {
            return Err(refuse(format!(
                "{format} is converted from {} only, not from {plain}",
                names(format.plain_formats())
            )));
        }
        // torch_npu names a tensor of fewer than 4 dimensions NCHW when it stores it in
        // NC1HWC0 or FRACTAL_Z, and pads it as it pads ND.
        let padded_nchw = plain == PlainFormat::Nchw
            && matches!(format, PrivateFormat::Nc1hwc0 | PrivateFormat::FractalZ)
            && (1..4).contains(&shape.len());
        if let Some(rank) = plain.rank().filter(|_| !padded_nchw) {
            if shape.len() != rank {
                return Err(refuse(format!("{plain} names {rank} dimensions")));
            }
        }
        let axes = match format {
            PrivateFormat::FractalNz => {
                if shape.len() < 2 || shape.len() > 6 {
                    return Err(refuse(format!("{format} takes 2 to 6 dimensions")));
                }
                [None; 5]
            }
            PrivateFormat::Nc1hwc0 | PrivateFormat::FractalZ => match (plain, shape.len()) {
                (PlainFormat::Nd | PlainFormat::Nchw, 1) => [None, Some(0), None, None, None],
                (PlainFormat::Nd | PlainFormat::Nchw, 2) => [None, Some(0), None, Some(1), None],
                (PlainFormat::Nd | PlainFormat::Nchw, 3) => [None, Some(0), None, Some(1), Some(2)],
                (PlainFormat::Nd | PlainFormat::Nchw, 4) => {
                    [Some(0), Some(1), None, Some(2), Some(3)]
                }
                (PlainFormat::Nhwc, _) => [Some(0), Some(3), None, Some(1), Some(2)],
                (PlainFormat::Hwcn, _) => [Some(3), Some(2), None, Some(0), Some(1)],
                _ => return Err(refuse(format!("{format} takes 1 to 4 dimensions"))),
            },
            PrivateFormat::Ndc1hwc0 | PrivateFormat::FractalZ3d => match plain {
                PlainFormat::Ndhwc => [Some(0), Some(4), Some(1), Some(2), Some(3)],
                PlainFormat::Dhwcn => [Some(4), Some(3), Some(0), Some(1), Some(2)],
                _ => [Some(0), Some(1), Some(2), Some(3), Some(4)],
            },
        };
        let b = Blocked {
            format,
            plain,
            shape: shape.to_vec(),
            c0,
            axes,
        };
        let storage = b.storage_shape();
        if storage.len() > crate::tensor::MAX_RANK
            || storage
                .iter()
                .try_fold(1usize, |acc, &d| acc.checked_mul(d))
                .is_none()
        {
            return Err(refuse(format!(
                "its {format} storage {storage:?} is too large"
            )));
        }
        Ok(b)
    }

    /// The format.
    pub fn format(&self) -> PrivateFormat {
        self.format
    }

    /// How its logical dimensions are named.
    pub fn plain(&self) -> PlainFormat {
        self.plain
    }

    /// Its logical shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The block size `C0`.
    pub fn c0(&self) -> usize {
        self.c0
    }

    /// The size of logical dimension `which` (N, C, D, H or W; 1 when missing).
    fn dim(&self, which: usize) -> usize {
        self.axes[which].map_or(1, |a| self.shape[a])
    }

    /// The storage's shape (row-major, padded to whole blocks).
    pub fn storage_shape(&self) -> Vec<usize> {
        let c1 = self.dim(C).div_ceil(self.c0);
        let n1 = self.dim(N).div_ceil(FRACTAL_ROWS);
        let (n, d, h, w) = (self.dim(N), self.dim(D), self.dim(H), self.dim(W));
        match self.format {
            PrivateFormat::Nc1hwc0 => vec![n, c1, h, w, self.c0],
            PrivateFormat::FractalZ => vec![c1 * h * w, n1, FRACTAL_ROWS, self.c0],
            PrivateFormat::Ndc1hwc0 => vec![n, d, c1, h, w, self.c0],
            PrivateFormat::FractalZ3d => vec![d * c1 * h * w, n1, FRACTAL_ROWS, self.c0],
            PrivateFormat::FractalNz => {
                let r = self.shape.len();
                let (m, k) = (self.shape[r - 2], self.shape[r - 1]);
                let mut s = self.shape[..r - 2].to_vec();
                s.extend([
                    k.div_ceil(self.c0),
                    m.div_ceil(FRACTAL_ROWS),
                    FRACTAL_ROWS,
                    self.c0,
                ]);
                s
            }
        }
    }

    /// Elements the storage holds, padding included.
    pub fn storage_numel(&self) -> usize {
        self.storage_shape().iter().product()
    }

    /// Where the element at logical `index` is in the storage, in elements from its start.
    /// `index` must be inside the logical shape.
    pub fn storage_offset(&self, index: &[usize]) -> usize {
        let at = |which: usize| self.axes[which].map_or(0, |a| index[a]);
        let (c0, rows) = (self.c0, FRACTAL_ROWS);
        let (c1s, n1s) = (self.dim(C).div_ceil(c0), self.dim(N).div_ceil(rows));
        let (n, c, d, h, w) = (at(N), at(C), at(D), at(H), at(W));
        let (hs, ws, ds) = (self.dim(H), self.dim(W), self.dim(D));
        match self.format {
            PrivateFormat::Nc1hwc0 => (((n * c1s + c / c0) * hs + h) * ws + w) * c0 + c % c0,
            PrivateFormat::Ndc1hwc0 => {
                ((((n * ds + d) * c1s + c / c0) * hs + h) * ws + w) * c0 + c % c0
            }
            PrivateFormat::FractalZ => {
                let row = (c / c0 * hs + h) * ws + w;
                ((row * n1s + n / rows) * rows + n % rows) * c0 + c % c0
            }
            PrivateFormat::FractalZ3d => {
                let row = ((d * c1s + c / c0) * hs + h) * ws + w;
                ((row * n1s + n / rows) * rows + n % rows) * c0 + c % c0
            }
            PrivateFormat::FractalNz => {
                let r = self.shape.len();
                let (ms, ks) = (self.shape[r - 2], self.shape[r - 1]);
                let (m, k) = (index[r - 2], index[r - 1]);
                let batch = self.shape[..r - 2]
                    .iter()
                    .zip(&index[..r - 2])
                    .fold(0, |acc, (&s, &i)| acc * s + i);
                let (k1s, m1s) = (ks.div_ceil(c0), ms.div_ceil(rows));
                (((batch * k1s + k / c0) * m1s + m / rows) * rows + m % rows) * c0 + k % c0
            }
        }
    }
}

fn names(formats: &[PlainFormat]) -> String {
    let v: Vec<&str> = formats.iter().map(|f| f.name()).collect();
    v.join(", ")
}

/// Which way a [`FormatCast`] converts.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum CastDirection {
    /// From the plain tensor `srcTensor` into the private storage `dstTensor`.
    ToPrivate,
    /// From the private storage `srcTensor` into the plain tensor `dstTensor`.
    ToPlain,
}

/// `aclnnNpuFormatCast`: `dst` = `src` converted to or from the private format `layout`
/// describes. The private side is the storage, a contiguous tensor of
/// [`Blocked::storage_shape`]; the plain side has [`Blocked::shape`] (any strides). Both
/// have one data type (the conversion moves elements, it computes nothing); converting to a
/// private format writes the whole storage, its padding as zeros.
#[derive(Clone, PartialEq, Debug)]
pub struct FormatCast {
    /// The input (`srcTensor`).
    pub src: Tensor,
    /// The output (`dstTensor`).
    pub dst: Tensor,
    /// The private side's layout.
    pub layout: Blocked,
    /// Which side is private.
    pub direction: CastDirection,
}

impl FormatCast {
    /// The plain tensor and the private storage, with their roles.
    fn sides(&self) -> ((&'static str, &Tensor), (&'static str, &Tensor)) {
        match self.direction {
            CastDirection::ToPrivate => (("srcTensor", &self.src), ("dstTensor", &self.dst)),
            CastDirection::ToPlain => (("dstTensor", &self.dst), ("srcTensor", &self.src)),
        }
    }
}

impl OpSpec for FormatCast {
    fn name(&self) -> &'static str {
        "format_cast"
    }

    fn operands(&self) -> Vec<OperandUse<'_>> {
        vec![
            OperandUse::read("srcTensor", &self.src),
            OperandUse::write("dstTensor", &self.dst),
        ]
    }

    fn check(&self) -> Result<(), OpCheckError> {
        let op = "format_cast";
        same_dtype(op, "dstTensor", &self.dst, self.src.dtype(), "srcTensor")?;
        let ((plain_role, plain), (private_role, storage)) = self.sides();
        shape_is(op, plain_role, plain, self.layout.shape())?;
        shape_is(op, private_role, storage, &self.layout.storage_shape())?;
        if !storage.is_contiguous() {
            return Err(OpCheckError::Shape {
                op,
                operand: private_role,
                shape: storage.shape().to_vec(),
                rule: format!(
                    "a {} storage is contiguous, its strides are {:?}",
                    self.layout.format(),
                    storage.strides()
                ),
            });
        }
        Ok(())
    }

    fn flops(&self) -> u64 {
        self.layout.storage_numel() as u64
    }
}

/// `dst` = `src` converted to or from a private format ([`FormatCast`]), checked.
pub fn format_cast(
    src: &Tensor,
    dst: &Tensor,
    layout: Blocked,
    direction: CastDirection,
) -> Result<crate::kernel::Kernel, OpCheckError> {
    super::TensorOp::FormatCast(FormatCast {
        src: src.clone(),
        dst: dst.clone(),
        layout,
        direction,
    })
    .kernel()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(format: PrivateFormat, plain: PlainFormat, shape: &[usize], c0: usize) -> Blocked {
        Blocked::new("t", "x", format, plain, shape, c0).unwrap()
    }

    /// Every logical index of `shape`, row-major.
    fn indices(shape: &[usize]) -> Vec<Vec<usize>> {
        let mut all = vec![vec![]];
        for &d in shape {
            all = all
                .into_iter()
                .flat_map(|p| {
                    (0..d).map(move |i| {
                        let mut q = p.clone();
                        q.push(i);
                        q
                    })
                })
                .collect();
        }
        all
    }

    /// Distinct elements land on distinct places inside the storage.
    fn injective(b: &Blocked) {
        let mut seen = std::collections::HashSet::new();
        let n = b.storage_numel();
        for i in indices(b.shape()) {
            let o = b.storage_offset(&i);
            assert!(o < n, "{b:?} {i:?} -> {o} outside {n}");
            assert!(seen.insert(o), "{b:?}: {i:?} collides at {o}");
        }
    }

    #[test]
    fn storage_shapes_are_cann_s() {
        use PlainFormat::*;
        use PrivateFormat::*;
        /// A format, the plain format and shape it is made from, C0, the storage shape.
        type Case<'a> = (PrivateFormat, PlainFormat, &'a [usize], usize, &'a [usize]);
        let cases: &[Case<'_>] = &[
            (Nc1hwc0, Nchw, &[2, 17, 3, 5], 16, &[2, 2, 3, 5, 16]),
            (Nc1hwc0, Nhwc, &[2, 3, 5, 17], 8, &[2, 3, 3, 5, 8]),
            (Nc1hwc0, Nd, &[20, 7], 16, &[1, 2, 7, 1, 16]),
            (FractalZ, Nchw, &[33, 20, 3, 3], 16, &[18, 3, 16, 16]),
            (FractalZ, Hwcn, &[3, 3, 20, 33], 16, &[18, 3, 16, 16]),
            (FractalNz, Nd, &[20, 33], 16, &[3, 2, 16, 16]),
            (FractalNz, Nd, &[4, 20, 33], 8, &[4, 5, 2, 16, 8]),
            (FractalNz, Nchw, &[2, 3, 5, 40], 32, &[2, 3, 2, 1, 16, 32]),
            (Ndc1hwc0, Ncdhw, &[2, 17, 3, 4, 5], 16, &[2, 3, 2, 4, 5, 16]),
            (FractalZ3d, Ncdhw, &[17, 9, 2, 3, 3], 8, &[36, 2, 16, 8]),
        ];
        for &(format, plain, shape, c0, storage) in cases {
            let b = blocked(format, plain, shape, c0);
            assert_eq!(
                b.storage_shape(),
                storage,
                "{format} from {plain} {shape:?}"
            );
            injective(&b);
        }
    }

    #[test]
    fn elements_land_where_the_layouts_say() {
        use PlainFormat::*;
        use PrivateFormat::*;
        // NC1HWC0 from NCHW [1, 20, 2, 3], C0 16: (0, 17, 1, 2) is in channel block 1 at 1.
        let b = blocked(Nc1hwc0, Nchw, &[1, 20, 2, 3], 16);
        assert_eq!(b.storage_offset(&[0, 17, 1, 2]), ((2 + 1) * 3 + 2) * 16 + 1);
        // The same element named NHWC.
        let b = blocked(Nc1hwc0, Nhwc, &[1, 2, 3, 20], 16);
        assert_eq!(b.storage_offset(&[0, 1, 2, 17]), ((2 + 1) * 3 + 2) * 16 + 1);
        // FRACTAL_NZ [20, 33], C0 16: (m 17, k 20) is in column block 1, row block 1.
        let b = blocked(FractalNz, Nd, &[20, 33], 16);
        assert_eq!(b.storage_offset(&[17, 20]), ((2 + 1) * 16 + 1) * 16 + 4);
        // FRACTAL_Z NCHW [17, 3, 1, 1], C0 16: kernel 16 is in kernel block 1.
        let b = blocked(FractalZ, Nchw, &[17, 3, 1, 1], 16);
        assert_eq!(b.storage_offset(&[16, 2, 0, 0]), 16 * 16 + 2);
        // NDC1HWC0 from NDHWC and NCDHW agree.
        let a = blocked(Ndc1hwc0, Ncdhw, &[2, 9, 3, 2, 2], 8);
        let b = blocked(Ndc1hwc0, Ndhwc, &[2, 3, 2, 2, 9], 8);
        assert_eq!(
            a.storage_offset(&[1, 8, 2, 1, 0]),
            b.storage_offset(&[1, 2, 1, 0, 8])
        );
        // FRACTAL_Z_3D from DHWCN and NCDHW agree.
        let a = blocked(FractalZ3d, Ncdhw, &[17, 9, 2, 3, 3], 8);
        let b = blocked(FractalZ3d, Dhwcn, &[2, 3, 3, 9, 17], 8);
        assert_eq!(
            a.storage_offset(&[16, 8, 1, 2, 0]),
            b.storage_offset(&[1, 2, 0, 8, 16])
        );
    }

    #[test]
    fn formats_refuse_what_they_do_not_take_naming_it() {
        use PlainFormat::*;
        use PrivateFormat::*;
        let refused = |f, p, s: &[usize], c0| Blocked::new("t", "x", f, p, s, c0).unwrap_err();
        let e = refused(Ndc1hwc0, Nchw, &[1, 2, 3, 4], 16);
        assert!(e.to_string().contains("NCDHW, NDHWC only"), "{e}");
        let e = refused(Nc1hwc0, Nhwc, &[1, 2, 3], 16);
        assert!(e.to_string().contains("NHWC names 4"), "{e}");
        // torch_npu's NCHW of fewer dimensions is padded as ND is.
        assert_eq!(
            blocked(Nc1hwc0, Nchw, &[6, 20], 16).storage_shape(),
            blocked(Nc1hwc0, Nd, &[6, 20], 16).storage_shape()
        );
        let e = refused(FractalNz, Nd, &[5], 16);
        assert!(e.to_string().contains("2 to 6"), "{e}");
        let e = refused(Nc1hwc0, Nd, &[1, 2, 3, 4, 5], 16);
        assert!(e.to_string().contains("1 to 4"), "{e}");
        let e = refused(FractalNz, Nd, &[2, 2], 0);
        assert_eq!(e.operand(), "C0");
    }
}

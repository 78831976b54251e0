//! Walking tensors element by element in runs: the shape every element-wise kernel iterates
//! over, each operand's strides broadcast to it, adjacent dimensions merged where every
//! operand allows (so a contiguous tensor is one run), and the innermost dimension cut into
//! runs of at most [`RUN`] elements that a kernel handles with one typed loop.

/// The most elements one run holds: long enough to amortise the walk, short enough that a
/// run's buffers stay in the L1 cache.
pub const RUN: usize = 1024;

/// The strides (in elements) of a tensor of `shape` / `strides` broadcast to `to` (a stride of
/// 0 on dimensions it repeats). The caller checked that it broadcasts.
pub fn broadcast_strides(shape: &[usize], strides: &[usize], to: &[usize]) -> Vec<usize> {
    let lead = to.len() - shape.len();
    (0..to.len())
        .map(|i| match i.checked_sub(lead) {
            Some(j) if shape[j] != 1 => strides[j],
            _ => 0,
        })
        .collect()
}

/// A shape and the strides of `N` operands over it, with dimensions of size 1 dropped and
/// adjacent dimensions merged where every operand's layout allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Walk<const N: usize> {
    shape: Vec<usize>,
    strides: [Vec<usize>; N],
}

impl<const N: usize> Walk<N> {
    /// The walk of `shape` with each operand's `strides` (already broadcast to `shape`).
    pub fn new(shape: &[usize], strides: [&[usize]; N]) -> Self {
        let mut dims: Vec<usize> = Vec::with_capacity(shape.len());
        let mut out: [Vec<usize>; N] = std::array::from_fn(|_| Vec::with_capacity(shape.len()));
        for (d, &size) in shape.iter().enumerate() {
            if size == 1 {
                continue;
            }
            let mergeable = dims.last().is_some_and(|_| {
                (0..N).all(|k| {
                    let prev = *out[k].last().unwrap_or(&0);
                    prev == strides[k][d] * size
                })
            });
            if mergeable {
                let last = dims.len() - 1;
                dims[last] *= size;
                for k in 0..N {
                    let l = out[k].len() - 1;
                    out[k][l] = strides[k][d];
                }
            } else {
                dims.push(size);
                for k in 0..N {
                    out[k].push(strides[k][d]);
                }
            }
        }
        Walk {
            shape: dims,
            strides: out,
        }
    }

    /// Elements walked.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether it walks no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Calls `f(bases, steps, len)` for each run, in row-major order: `bases[k]` is operand
    /// `k`'s element offset of the run's first element, `steps[k]` its stride along the run.
    pub fn runs(&self, mut f: impl FnMut([usize; N], [usize; N], usize)) {
        let total = self.len();
        if total == 0 {
            return;
        }
        let rank = self.shape.len();
        if rank == 0 {
            f([0; N], [0; N], 1);
            return;
        }
        let inner = self.shape[rank - 1];
        let steps: [usize; N] = std::array::from_fn(|k| self.strides[k][rank - 1]);
        let outer = &self.shape[..rank - 1];
        let mut index = vec![0usize; outer.len()];
        let mut bases = [0usize; N];
        loop {
            let mut start = 0;
            while start < inner {
                let len = RUN.min(inner - start);
                let at: [usize; N] = std::array::from_fn(|k| bases[k] + start * steps[k]);
                f(at, steps, len);
                start += len;
            }
            // Odometer over the outer dimensions, last fastest.
            let mut d = outer.len();
            loop {
                if d == 0 {
                    return;
                }
                d -= 1;
                index[d] += 1;
                for (k, base) in bases.iter_mut().enumerate() {
                    *base += self.strides[k][d];
                }
                if index[d] < outer[d] {
                    break;
                }
                for (k, base) in bases.iter_mut().enumerate() {
                    *base -= self.strides[k][d] * index[d];
                }
                index[d] = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets<const N: usize>(w: &Walk<N>) -> Vec<[usize; N]> {
        let mut v = Vec::new();
        w.runs(|bases, steps, len| {
            for i in 0..len {
                v.push(std::array::from_fn(|k| bases[k] + i * steps[k]));
            }
        });
        v
    }

    #[test]
    fn contiguous_operands_merge_into_one_run() {
        let w = Walk::new(&[2, 3, 4], [&[12, 4, 1], &[12, 4, 1]]);
        assert_eq!(w.shape, vec![24]);
        let mut runs = 0;
        w.runs(|_, steps, len| {
            runs += 1;
            assert_eq!((steps, len), ([1, 1], 24));
        });
        assert_eq!(runs, 1);
    }

    #[test]
    fn transposed_and_broadcast_operands_walk_in_the_output_order() {
        // out [3, 2] contiguous; a is a [2, 3] tensor's transpose; b a row broadcast.
        let w = Walk::new(&[3, 2], [&[2, 1], &[1, 3], &[0, 1]]);
        assert_eq!(
            offsets(&w),
            vec![
                [0, 0, 0],
                [1, 3, 1],
                [2, 1, 0],
                [3, 4, 1],
                [4, 2, 0],
                [5, 5, 1]
            ]
        );
        assert_eq!(broadcast_strides(&[2], &[1], &[3, 2]), vec![0, 1]);
        assert_eq!(broadcast_strides(&[3, 1], &[1, 1], &[3, 2]), vec![1, 0]);
    }

    #[test]
    fn long_rows_are_cut_into_runs_and_scalars_are_one_element() {
        // Padded rows do not merge: each is cut on its own.
        let w = Walk::new(&[2, RUN + 5], [&[RUN + 7, 1]]);
        let mut lens = Vec::new();
        w.runs(|_, _, len| lens.push(len));
        assert_eq!(lens, vec![RUN, 5, RUN, 5]);
        // Contiguous rows merge, then the whole is cut.
        let w = Walk::new(&[2, RUN + 5], [&[RUN + 5, 1]]);
        let mut lens = Vec::new();
        w.runs(|_, _, len| lens.push(len));
        assert_eq!(lens, vec![RUN, RUN, 10]);
        let scalar = Walk::new(&[], [&[]]);
        assert_eq!(offsets(&scalar), vec![[0]]);
        let empty = Walk::new(&[3, 0], [&[0, 1]]);
        assert!(empty.is_empty() && offsets(&empty).is_empty());
    }
}

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
    pub fn runs(&self, f: impl FnMut([usize; N], [usize; N], usize)) {
        self.runs_in(0..self.len(), f)
    }

    /// [`Walk::runs`] over the elements whose row-major index lies in `range` only (a part
    /// of the walk one thread computes).
    pub fn runs_in(
        &self,
        range: std::ops::Range<usize>,
        mut f: impl FnMut([usize; N], [usize; N], usize),
    ) {
        let end = range.end.min(self.len());
        if range.start >= end {
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
        // The odometer of the outer dimensions at the range's first element.
        let mut index = vec![0usize; outer.len()];
        let mut rest = range.start / inner;
        for d in (0..outer.len()).rev() {
            index[d] = rest % outer[d];
            rest /= outer[d];
        }
        let mut bases: [usize; N] = std::array::from_fn(|k| {
            (0..outer.len())
                .map(|d| index[d] * self.strides[k][d])
                .sum()
        });
        let mut at = range.start;
        let mut start = range.start % inner;
        loop {
            let stop = inner.min(start + (end - at));
            while start < stop {
                let len = RUN.min(stop - start);
                let run: [usize; N] = std::array::from_fn(|k| bases[k] + start * steps[k]);
                f(run, steps, len);
                start += len;
                at += len;
            }
            if at >= end {
                return;
            }
            start = 0;
            // Odometer over the outer dimensions, last fastest.
            let mut d = outer.len();
            loop {
                // `at < end` leaves an outer position to go to.
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

/// The element offset of the element whose row-major index over `shape` is `flat`, in an
/// operand of `strides`.
pub fn offset_of(mut flat: usize, shape: &[usize], strides: &[usize]) -> usize {
    let mut at = 0;
    for d in (0..shape.len()).rev() {
        at += (flat % shape[d]) * strides[d];
        flat /= shape[d];
    }
    at
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

    #[test]
    fn a_part_of_a_walk_is_that_part_of_the_whole_walk() {
        // A padded, transposed, broadcast walk whose rows are longer than a run.
        let shape = [3, 2, RUN + 3];
        let w = Walk::new(
            &shape,
            [&[2 * (RUN + 3), RUN + 3, 1], &[1, 3, 6], &[0, RUN + 9, 1]],
        );
        let whole = offsets(&w);
        for (start, end) in [
            (0, whole.len()),
            (5, 6),
            (RUN - 1, RUN + 7),
            (7, 3 * RUN),
            (900, whole.len()),
        ] {
            let mut part = Vec::new();
            w.runs_in(start..end, |bases, steps, len| {
                for i in 0..len {
                    part.push(std::array::from_fn::<usize, 3, _>(|k| {
                        bases[k] + i * steps[k]
                    }));
                }
            });
            assert_eq!(part, whole[start..end], "{start}..{end}");
        }
        // Each element's offset is `offset_of` its index.
        for (flat, offs) in whole.iter().enumerate() {
            assert_eq!(offset_of(flat, &shape, &[1, 3, 6]), offs[1]);
        }
    }
}

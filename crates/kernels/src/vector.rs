//! Vectorised loops: the CPU's widest vector instructions chosen at run time, a
//! vectorisable `exp`, and sums kept in lanes.
//!
//! The crate is built for the baseline of its target (x86-64: SSE2), so a loop the compiler
//! vectorises uses 4 float lanes; [`simd`] runs a closure compiled again for the best
//! instruction set the CPU has (`pulp`'s dispatch: AVX2 and FMA on x86-64 where present), where
//! the same loop takes 8. The compiler never reorders or fuses floating-point operations, so
//! a loop gives the same bits whichever version runs: the dispatch changes speed, never
//! numbers.

use std::sync::OnceLock;

/// Runs `op` compiled for the best instruction set this CPU has. Its `with_simd` is
/// `#[inline(always)]`, and so is everything it calls in its loops (iterator adapters,
/// helpers such as [`exp`]), so all of it is compiled for that instruction set. (A closure
/// would not do: the compiler may leave a closure's body out of line, compiled for the
/// baseline.)
#[inline(always)]
pub(crate) fn simd<Op: pulp::WithSimd>(op: Op) -> Op::Output {
    static ARCH: OnceLock<pulp::Arch> = OnceLock::new();
    ARCH.get_or_init(pulp::Arch::new).dispatch(op)
}

/// `dst[i] = f(src[i])`: an element-wise conversion for [`simd`].
pub(crate) struct MapInto<'a, T, U, F> {
    pub src: &'a [T],
    pub dst: &'a mut [U],
    pub f: F,
}

impl<T: Copy, U, F: Fn(T) -> U> pulp::WithSimd for MapInto<'_, T, U, F> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        for (d, &s) in self.dst.iter_mut().zip(self.src) {
            *d = (self.f)(s);
        }
    }
}

/// `e^x` in float32 without a library call, so that loops over it vectorise: `x = n·ln 2 + r`
/// with `|r| ≤ ln 2 / 2` (ln 2 in two parts, so `r` is exact), `e^r` by a degree-7
/// polynomial (Cephes' `expf` coefficients) in fused multiply-adds, scaled by `2^n` in two
/// steps so that results in the subnormal range keep their bits. Within 2 units in the last
/// place of the exact value; `exp(+∞) = +∞`, `exp(-∞) = 0`, NaN stays NaN.
///
/// Fused multiply-adds (`mul_add`) round once whatever the CPU: one instruction where it has
/// them (every x86-64 CPU `simd` dispatches to), a library call where it does not, the same
/// bits either way.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Rounds to the nearest integer for |v| < 2^22 (1.5 · 2^23: the sum's last bit is a unit).
    const ROUND: f32 = 12_582_912.0;
    let over = x > 88.722_84;
    let c = x.clamp(-104.0, 88.8);
    // `t`'s low bits hold `n` (`t` is 1.5 · 2^23 + n): read there, not by a float-to-int
    // conversion, which does not vectorise.
    let t = c.mul_add(LOG2E, ROUND);
    let n = t - ROUND;
    let r = (-n).mul_add(LN2_LO, (-n).mul_add(LN2_HI, c));
    let p = 1.987_569_1e-4_f32;
    let p = p.mul_add(r, 1.398_199_9e-3);
    let p = p.mul_add(r, 8.333_452e-3);
    let p = p.mul_add(r, 4.166_579_6e-2);
    let p = p.mul_add(r, 1.666_666_5e-1);
    let p = p.mul_add(r, 0.5);
    let e = (p * r).mul_add(r, r) + 1.0;
    let n = t.to_bits().wrapping_sub(ROUND.to_bits()) as i32;
    let half = n >> 1;
    let scale = |k: i32| f32::from_bits((k.wrapping_add(127) as u32) << 23);
    let y = e * scale(half) * scale(n - half);
    if over {
        f32::INFINITY
    } else {
        y
    }
}

/// How many partial sums [`LaneSum`] keeps: four AVX-512 registers of `f64`, so that four
/// chains of additions run side by side (one chain waits for each addition's latency).
pub(crate) const LANES: usize = 32;

/// A float sum in [`LANES`] partial sums of `f64`: element `i` of the sequence goes to lane
/// `i % LANES`, and the lanes are added in a fixed tree at the end. The rounding depends only
/// on the sequence, never on how it is cut into runs or on the instruction set, and the
/// lanes let the compiler vectorise the loop (one chain of additions cannot be).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LaneSum {
    lanes: [f64; LANES],
    count: usize,
}

impl LaneSum {
    /// Adds `values` (mapped by `f`) to the sequence.
    #[inline(always)]
    pub fn add<T: Copy>(&mut self, values: &[T], f: impl Fn(T) -> f64) {
        let mut rest = values;
        // Up to the next lane boundary one by one, then whole rows of lanes.
        while self.count % LANES != 0 {
            let Some((&v, tail)) = rest.split_first() else {
                return;
            };
            self.lanes[self.count % LANES] += f(v);
            self.count += 1;
            rest = tail;
        }
        let rows = rest.chunks_exact(LANES);
        let tail = rows.remainder();
        // In a local array, which the compiler keeps in registers (the field it would load
        // and store at every row).
        let mut lanes = self.lanes;
        for row in rows {
            for (lane, &v) in lanes.iter_mut().zip(row) {
                *lane += f(v);
            }
        }
        self.lanes = lanes;
        self.count += rest.len() - tail.len();
        for &v in tail {
            self.lanes[self.count % LANES] += f(v);
            self.count += 1;
        }
    }

    /// The sum so far: the lanes added pairwise, neighbours first.
    pub fn total(&self) -> f64 {
        let mut l = self.lanes;
        let mut n = LANES;
        while n > 1 {
            n /= 2;
            for i in 0..n {
                l[i] = l[2 * i] + l[2 * i + 1];
            }
        }
        l[0]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_within_two_units_in_the_last_place() {
        let mut worst = 0f64;
        let mut x = -103.9f32;
        while x < 88.7 {
            let want = f64::from(x).exp();
            let got = f64::from(exp(x));
            if want > f64::from(f32::MIN_POSITIVE) {
                let ulp = f64::from(f32::EPSILON) * want;
                worst = worst.max((got - want).abs() / ulp);
            } else {
                // Subnormal results: within two of the smallest step.
                assert!((got - want).abs() <= 2.0 * 1.4e-45, "{x}: {got} vs {want}");
            }
            x += 0.001_37;
        }
        assert!(worst <= 2.0, "worst error {worst} units in the last place");
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(-200.0), 0.0);
        assert_eq!(exp(89.0), f32::INFINITY);
        assert!(exp(f32::NAN).is_nan());
    }

    #[test]
    fn a_lane_sum_does_not_depend_on_how_the_sequence_is_cut() {
        let v: Vec<f32> = (0..1000).map(|i| 1.0 / (i as f32 + 1.0)).collect();
        let mut whole = LaneSum::default();
        whole.add(&v, f64::from);
        for cut in [1, 3, 7, 8, 9, 31, 32, 33, 500] {
            let mut parts = LaneSum::default();
            for chunk in v.chunks(cut) {
                parts.add(chunk, f64::from);
            }
            assert_eq!(
                parts.total().to_bits(),
                whole.total().to_bits(),
                "cut {cut}"
            );
        }
        let exact: f64 = v.iter().map(|&x| f64::from(x)).sum();
        assert!((whole.total() - exact).abs() < 1e-12);
    }
}

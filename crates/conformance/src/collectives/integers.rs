//! Every data type HCCL's table lists beyond the float types the other cases use: the
//! signed and unsigned integers of 8 to 64 bits and `float64`. Integer reductions are exact
//! and wrap around in their type (a sum or a product that overflows), max and min compare as
//! the type does (a `uint64` above 2⁶³ is large, not negative), `float64` keeps its
//! precision; gathers and broadcasts move the bytes unchanged.

use super::Ranks;
use crate::{CaseError, Harness};
use braid_collective::{CollectiveBackend, ReduceOp};
use braid_stream_core::{DType, DeviceMemory};

/// The integer types, with a value pair per type: `(a, b)` are rank 0's and rank 1's first
/// elements, chosen so that their sum (and product) wraps.
const INTEGERS: [(DType, i128, i128); 8] = [
    (DType::I8, 100, 100),
    (DType::I16, 300, 32_700),
    (DType::I32, 2_000_000_000, 2_000_000_000),
    (DType::I64, 1 << 62, 3 << 61),
    (DType::U8, 200, 100),
    (DType::U16, 65_000, 1_000),
    (DType::U32, 4_000_000_000, 500_000_000),
    (DType::U64, 1 << 63, (1 << 63) + 5),
];

/// `value` wrapped into `dtype`, as its little-endian bytes.
fn raw(dtype: DType, values: &[i128]) -> Vec<u8> {
    let size = dtype.size() as usize;
    values
        .iter()
        .flat_map(|v| (*v as u64).to_le_bytes()[..size].to_vec())
        .collect()
}

/// `value` as `dtype` reads it back (wrapped, sign-extended for a signed type).
fn wrapped(dtype: DType, value: i128) -> i128 {
    let bits = 8 * dtype.size() as u32;
    let modulus = 1i128 << bits;
    let v = value.rem_euclid(modulus);
    let signed = matches!(dtype, DType::I8 | DType::I16 | DType::I32 | DType::I64);
    if signed && v >= modulus / 2 {
        v - modulus
    } else {
        v
    }
}

fn upload<B: CollectiveBackend>(
    rs: &Ranks<B>,
    r: usize,
    bytes: Vec<u8>,
) -> Result<DeviceMemory<B>, CaseError> {
    let mem = rs.device(r).alloc(bytes.len() as u64)?;
    rs.streams[r].copy_h2d(mem.slice(), bytes.into())?;
    Ok(mem)
}

fn expect<B: CollectiveBackend>(
    rs: &Ranks<B>,
    r: usize,
    mem: &DeviceMemory<B>,
    want: &[u8],
    what: &str,
) -> Result<(), CaseError> {
    let got = rs.streams[r].copy_d2h(mem.slice())?.wait()?;
    if got.as_ref() != want {
        return Err(CaseError::new(format!(
            "{what}: rank {r} read {:?}, expected {want:?}",
            got.as_ref()
        )));
    }
    Ok(())
}

/// All-reduce by sum, prod, max and min, all-gather and broadcast over two ranks in every
/// integer type and `float64`, every element checked bit for bit.
pub fn integer_and_double_collectives<B: CollectiveBackend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    for (dtype, a, b) in INTEGERS {
        let rs = Ranks::new(h, 2, dtype, "integer collectives")?;
        // Element 1 is small: 3 and -2 (wrapped into an unsigned type).
        let sends = [[a, 3], [b, -2]];
        let mut outs = Vec::new();
        for (r, send) in sends.iter().enumerate() {
            let (comm, stream) = (&rs.comms[r], &rs.streams[r]);
            let src = upload(&rs, r, raw(dtype, send))?;
            let mut per_op = Vec::new();
            for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min] {
                let dst = upload(&rs, r, raw(dtype, &[0, 0]))?;
                comm.all_reduce(stream, &src, &dst, dtype, op)?;
                per_op.push((op, dst));
            }
            let gathered = upload(&rs, r, raw(dtype, &[0; 4]))?;
            comm.all_gather(stream, &src, &gathered, dtype)?;
            let root_data = upload(&rs, r, raw(dtype, send))?;
            comm.broadcast(stream, &root_data, dtype, 1)?;
            outs.push((src, per_op, gathered, root_data));
        }
        for (r, (_, per_op, gathered, root_data)) in outs.iter().enumerate() {
            for (op, dst) in per_op {
                let want: Vec<i128> = (0..2)
                    .map(|i| {
                        let (x, y) = (wrapped(dtype, sends[0][i]), wrapped(dtype, sends[1][i]));
                        match op {
                            ReduceOp::Sum => x + y,
                            ReduceOp::Prod => x * y,
                            ReduceOp::Max => x.max(y),
                            _ => x.min(y),
                        }
                    })
                    .collect();
                let what = format!("all-reduce {op:?} in {dtype}");
                expect(&rs, r, dst, &raw(dtype, &want), &what)?;
            }
            let all: Vec<i128> = sends.iter().flatten().copied().collect();
            expect(
                &rs,
                r,
                gathered,
                &raw(dtype, &all),
                &format!("all-gather in {dtype}"),
            )?;
            expect(
                &rs,
                r,
                root_data,
                &raw(dtype, &sends[1]),
                &format!("broadcast in {dtype}"),
            )?;
        }
    }
    // float64: 0.1 + 0.2 and 1e300 + 1e300 in double precision.
    let rs = Ranks::new(h, 2, DType::F64, "float64 all-reduce")?;
    let doubles = |v: [f64; 2]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let mut dsts = Vec::new();
    for (r, v) in [[0.1, 1e300], [0.2, 1e300]].into_iter().enumerate() {
        let src = upload(&rs, r, doubles(v))?;
        let dst = upload(&rs, r, doubles([0.0; 2]))?;
        rs.comms[r].all_reduce(&rs.streams[r], &src, &dst, DType::F64, ReduceOp::Sum)?;
        dsts.push((src, dst));
    }
    for (r, (_, dst)) in dsts.iter().enumerate() {
        expect(&rs, r, dst, &doubles([0.1 + 0.2, 2e300]), "float64 sum")?;
    }
    Ok(())
}

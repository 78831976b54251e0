use braid_stream_core::kernel::Kernel;
use braid_stream_core::ops::{self, BinaryOp, Scalar};
use braid_stream_core::types::{DevicePtr, DeviceSlice};
use braid_stream_core::{DType, Tensor};
use std::time::Instant;

fn t(at: u64, dtype: DType, shape: &[usize]) -> (Tensor, Vec<u8>) {
    let n: usize = shape.iter().product();
    let bytes = n * dtype.size() as usize;
    let t = Tensor::new(DeviceSlice::new(DevicePtr(at << 32), bytes as u64), dtype, shape).unwrap();
    let mut v = vec![0u8; bytes];
    for (i, c) in v.chunks_exact_mut(4).enumerate() { c.copy_from_slice(&(((i * 7919) % 1000) as f32 / 1000.0 - 0.5).to_le_bytes()); }
    (t, v)
}

fn time(name: &str, k: Kernel, ins: &[&[u8]], outs: &mut [Vec<u8>]) {
    let Kernel::Op(op) = k else { panic!() };
    let mut best = f64::MAX;
    for _ in 0..30 {
        let mut o: Vec<&mut [u8]> = outs.iter_mut().map(|v| &mut v[..]).collect();
        let s = Instant::now();
        braid_kernels::compute(op.op(), ins, &mut o).unwrap();
        best = best.min(s.elapsed().as_secs_f64());
    }
    println!("{name} {:.1} us", best * 1e6);
}

fn main() {
    let (x, xb) = t(1, DType::F32, &[64, 4096]);
    let (y, yb) = t(2, DType::F32, &[64, 4096]);
    time("softmax", ops::softmax(&x, 1, &y).unwrap(), &[&xb], &mut [yb.clone()]);
    let (g, gb) = t(3, DType::F32, &[4096]);
    let (r, rb) = t(4, DType::F32, &[64, 1]);
    time("rmsnorm", ops::rms_norm(&x, &g, 1e-6, &y, &r).unwrap(), &[&xb, &gb], &mut [yb.clone(), rb]);
    let (a, ab) = t(5, DType::F32, &[1 << 20]);
    let (b, bb) = t(6, DType::F32, &[1 << 20]);
    let (o, ob) = t(7, DType::F32, &[1 << 20]);
    time("add1M", ops::binary(BinaryOp::Add { alpha: Scalar::Float(1.0) }, a.clone(), b.clone(), &o).unwrap(), &[&ab, &bb], &mut [ob.clone()]);
    time("mul1M", ops::binary(BinaryOp::Mul, a, b, &o).unwrap(), &[&ab, &bb], &mut [ob]);
    let (a, ab) = t(5, DType::F32, &[16384]);
    let (b, bb) = t(6, DType::F32, &[16384]);
    let (o, ob) = t(7, DType::F32, &[16384]);
    time("add16K", ops::binary(BinaryOp::Add { alpha: Scalar::Float(1.0) }, a, b, &o).unwrap(), &[&ab, &bb], &mut [ob]);
}

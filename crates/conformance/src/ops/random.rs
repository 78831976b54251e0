//! The random operators on every backend: the numbers are a function of the seed, the
//! offset and the element, so a backend draws exactly the host reference's numbers (the
//! Philox4x32-10 layout `braid_stream_core::ops` documents, computed here by `braid-kernels`
//! on host bytes) whether the seed and offset are given or read from device tensors, into
//! contiguous or transposed outputs.

use super::{download, err, upload};
use crate::support::still_works;
use crate::{CaseError, Harness};
use braid_stream_core::hal::Backend;
use braid_stream_core::ops::{self, RandomKind, RngState, Scalar};
use braid_stream_core::{DType, Kernel};

/// What `kind` drawn at `state` writes into a zeroed `out`, computed on the host.
fn host(
    kind: RandomKind,
    state: RngState,
    out: &braid_stream_core::Tensor,
    inputs: &[&[u8]],
) -> Result<Vec<f64>, CaseError> {
    let Kernel::Op(k) = ops::random(kind, state, out).map_err(err)? else {
        return Err(CaseError::new("a random operator is a tensor operator"));
    };
    let mut bytes = vec![0u8; out.range().len as usize];
    braid_kernels::compute(k.op(), inputs, &mut [bytes.as_mut_slice()]).map_err(err)?;
    let dtype = out.dtype();
    Ok((0..out.numel())
        .map(|i| dtype.get_f64(&bytes, i).unwrap_or(f64::NAN))
        .collect())
}

fn same(got: &[f64], want: &[f64], what: &str) -> Result<(), CaseError> {
    match got.iter().zip(want).position(|(g, w)| g != w) {
        None if got.len() == want.len() => Ok(()),
        Some(i) => Err(CaseError::new(format!(
            "{what}: element {i} is {}, the host draws {}",
            got[i], want[i]
        ))),
        None => Err(CaseError::new(format!(
            "{what}: {} elements, expected {}",
            got.len(),
            want.len()
        ))),
    }
}

/// Uniform, normal, Bernoulli and integer draws, a permutation and a dropout mask applied,
/// each equal to the host's draw for the same seed and offset; the seed and offset read from
/// device tensors give the numbers they give as values; a transposed output gets each
/// logical element's number.
pub fn random_operators_draw_the_host_s_numbers<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let s = device.create_stream(0)?;
    let seed = |offset| RngState::Seed {
        seed: 0x5eed,
        offset,
    };
    let kinds = [
        (
            RandomKind::Uniform {
                from: -1.0,
                to: 3.0,
            },
            DType::F32,
        ),
        (
            RandomKind::Normal {
                mean: Scalar::Float(2.0).into(),
                std: Scalar::Float(0.5).into(),
            },
            DType::F16,
        ),
        (
            RandomKind::Bernoulli {
                p: Scalar::Float(0.25).into(),
            },
            DType::F32,
        ),
        (RandomKind::Integers { from: -5, to: 50 }, DType::I64),
    ];
    for (kind, dtype) in kinds {
        let out = upload(&device, &s, dtype, &[8, 8], &[])?;
        s.launch(ops::random(kind.clone(), seed(8), &out.t).map_err(err)?)?;
        let want = host(kind.clone(), seed(8), &out.t, &[])?;
        same(&download(&s, &out)?, &want, kind.name())?;
        // Transposed: element [i, j] of the view is element [j, i] of the memory.
        let t = out.t.t().map_err(err)?;
        s.launch(ops::random(kind.clone(), seed(8), &t).map_err(err)?)?;
        let mem = download(&s, &out)?;
        let transposed: Vec<f64> = (0..64).map(|k| mem[(k % 8) * 8 + k / 8]).collect();
        same(
            &transposed,
            &want,
            &format!("{} into a transposed view", kind.name()),
        )?;
    }
    // The seed and offset read from device tensors when the operator runs.
    let (seed_t, offset_t) = (
        upload(&device, &s, DType::I64, &[1], &[f64::from(0x5eed)])?,
        upload(&device, &s, DType::I64, &[1], &[4.0])?,
    );
    let out = upload(&device, &s, DType::F32, &[64], &[])?;
    let uniform = RandomKind::Uniform { from: 0.0, to: 1.0 };
    let on_device = RngState::Device {
        seed: seed_t.t.clone(),
        offset: offset_t.t.clone(),
        add: 4,
    };
    s.launch(ops::random(uniform.clone(), on_device, &out.t).map_err(err)?)?;
    let want = host(uniform, seed(8), &out.t, &[])?;
    same(
        &download(&s, &out)?,
        &want,
        "uniform with the seed and offset on the device",
    )?;
    // A permutation, and a dropout mask drawn then applied.
    let perm = upload(&device, &s, DType::I64, &[100], &[])?;
    s.launch(ops::random(RandomKind::Permutation, seed(0), &perm.t).map_err(err)?)?;
    let mut p = download(&s, &perm)?;
    same(
        &p,
        &host(RandomKind::Permutation, seed(0), &perm.t, &[])?,
        "randperm",
    )?;
    p.sort_by(f64::total_cmp);
    same(
        &p,
        &(0..100).map(f64::from).collect::<Vec<_>>(),
        "randperm holds 0..100",
    )?;
    let x = upload(&device, &s, DType::F32, &[256], &[2.0; 256])?;
    let mask = upload(&device, &s, DType::U8, &[32], &[])?;
    let y = upload(&device, &s, DType::F32, &[256], &[])?;
    let gen = RandomKind::DropoutMask {
        numel: 256,
        prob: 0.5,
    };
    s.launch(ops::random(gen, seed(12), &mask.t).map_err(err)?)?;
    s.launch(ops::apply_dropout_mask(&x.t, &mask.t, 0.5, &y.t).map_err(err)?)?;
    let bits: Vec<u8> = download(&s, &mask)?.iter().map(|b| *b as u8).collect();
    let want: Vec<f64> = (0..256)
        .map(|i| {
            if bits[i / 8] >> (i % 8) & 1 == 1 {
                4.0
            } else {
                0.0
            }
        })
        .collect();
    same(&download(&s, &y)?, &want, "dropout mask applied")?;
    let kept = want.iter().filter(|v| **v != 0.0).count();
    if !(64..=192).contains(&kept) {
        return Err(CaseError::new(format!(
            "a mask of p 0.5 kept {kept} of 256"
        )));
    }
    still_works(&device)
}

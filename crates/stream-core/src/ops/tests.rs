//! The declarations' refusals: each names the operand (or attribute) that does not fit.

use super::*;
use crate::types::DevicePtr;

/// A contiguous tensor of `dtype` and `shape` at its own address (`slot` apart).
fn at(slot: u64, dtype: DType, shape: &[usize]) -> Tensor {
    let bytes = shape.iter().product::<usize>() as u64 * dtype.size();
    Tensor::new(
        DeviceSlice::new(DevicePtr(0x10_0000 * (slot + 1)), bytes),
        dtype,
        shape,
    )
    .unwrap()
}

fn refused(k: Result<Kernel, OpCheckError>) -> &'static str {
    k.unwrap_err().operand()
}

#[test]
fn indexing_refuses_float_ids_wrong_outputs_and_sources() {
    let w = at(0, DType::F32, &[10, 4]);
    let ids = at(1, DType::I64, &[2, 3]);
    assert!(embedding(&w, &ids, &at(2, DType::F32, &[2, 3, 4])).is_ok());
    assert_eq!(
        refused(embedding(
            &w,
            &at(3, DType::F32, &[2]),
            &at(4, DType::F32, &[2, 4])
        )),
        "indices"
    );
    assert_eq!(
        refused(embedding(&w, &ids, &at(5, DType::F32, &[6, 4]))),
        "out"
    );
    assert_eq!(
        refused(embedding(&w, &ids, &at(6, DType::F16, &[2, 3, 4]))),
        "out"
    );
    let a = at(7, DType::I64, &[2]);
    let b = at(8, DType::I64, &[3]);
    assert_eq!(
        refused(index(&w, &[Some(a), Some(b)], &at(9, DType::F32, &[2]))),
        "indices"
    );
    assert_eq!(
        refused(index(&w, &[None, None], &at(10, DType::F32, &[10, 4]))),
        "indices"
    );
    let cache = at(11, DType::F16, &[1, 2, 8, 4]);
    let pos = at(12, DType::I64, &[2]);
    assert!(index_copy(&cache, 2, &pos, &at(13, DType::F16, &[1, 2, 2, 4])).is_ok());
    assert_eq!(
        refused(index_copy(
            &cache,
            2,
            &pos,
            &at(14, DType::F16, &[1, 2, 3, 4])
        )),
        "source"
    );
    assert_eq!(
        refused(index_copy(
            &cache,
            4,
            &pos,
            &at(15, DType::F16, &[1, 2, 2, 4])
        )),
        "dim"
    );
}

#[test]
fn shape_operators_refuse_what_does_not_fit() {
    let a = at(0, DType::F32, &[2, 3]);
    let b = at(1, DType::F32, &[2, 4]);
    assert!(cat(&[a.clone(), b.clone()], 1, &at(2, DType::F32, &[2, 7])).is_ok());
    assert_eq!(
        refused(cat(&[a.clone(), b.clone()], 0, &at(3, DType::F32, &[4, 3]))),
        "tensors"
    );
    assert_eq!(
        refused(cat(&[a.clone(), b], 1, &at(4, DType::F32, &[2, 8]))),
        "out"
    );
    let mask = at(5, DType::F32, &[2, 3]);
    assert_eq!(
        refused(where_(
            &mask,
            &a,
            Scalar::Float(0.0),
            &at(6, DType::F32, &[2, 3])
        )),
        "condition"
    );
    let vector = at(7, DType::F32, &[5]);
    assert_eq!(
        refused(triangle(&vector, 0, true, &at(8, DType::F32, &[5]))),
        "self"
    );
    assert_eq!(
        refused(arange(0i64, 0i64, &at(9, DType::I64, &[3]))),
        "step"
    );
    assert_eq!(
        refused(arange(0.5, 1i64, &at(10, DType::I64, &[3]))),
        "start"
    );
}

#[test]
fn norms_and_positions_refuse_what_does_not_fit() {
    let x = at(0, DType::F16, &[3, 8]);
    let w = at(1, DType::F16, &[8]);
    let out = at(2, DType::F16, &[3, 8]);
    assert!(layer_norm(&x, 1, Some(&w), Some(&w), 1e-5, &out).is_ok());
    let wrong = at(3, DType::F16, &[1, 8]);
    assert_eq!(
        refused(layer_norm(&x, 1, Some(&wrong), None, 1e-5, &out)),
        "weightOptional"
    );
    assert_eq!(
        refused(layer_norm(&x, 3, None, None, 1e-5, &out)),
        "normalizedShape"
    );
    assert_eq!(refused(layer_norm(&x, 1, None, None, -1.0, &out)), "eps");
    let ids = at(4, DType::I64, &[3]);
    assert!(argmax(&x, 1, true, &ids).is_ok());
    assert_eq!(
        refused(argmax(&x, 1, true, &at(5, DType::F32, &[3]))),
        "out"
    );
    assert_eq!(refused(argmax(&x, 2, true, &ids)), "dim");
    let empty = at(6, DType::F32, &[3, 0]);
    assert_eq!(refused(argmax(&empty, 1, true, &ids)), "self");
    assert_eq!(refused(cumsum(&x, 1, &at(7, DType::Bool, &[3, 8]))), "out");
    assert_eq!(refused(cumsum(&x, 1, &at(8, DType::F32, &[8, 3]))), "out");
}

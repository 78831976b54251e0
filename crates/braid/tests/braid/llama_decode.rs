//! The Llama decoder (`braid::scenarios::llama`) on the simulator: greedy tokens equal over
//! 1, 2, 4 and 8 devices, the graph replay equal to the eager step, the decode pool as the
//! dry run predicted it, no recapture; and every bad input refused with a typed error naming
//! the tensor or dimension before any device work.

#![cfg(feature = "sim")]

use braid::scenarios::devices::{sim_devices, sim_node, Role};
use braid::scenarios::llama::weights::{Part, WEIGHTS_FILE};
use braid::scenarios::llama::{self, ci, HostWeights, LlamaConfig, LlamaError, Request};
use safetensors::tensor::{Dtype, TensorView};
use std::path::{Path, PathBuf};

fn model_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("braid-llama-{name}-{}", std::process::id()));
    llama::write_model(&dir, &LlamaConfig::ci(), ci::SEED).unwrap();
    dir
}

fn request() -> Request {
    Request {
        prompts: vec![vec![11, 108, 205, 302], vec![400, 497, 594, 691]],
        generate: 4,
        micro_batches: 2,
    }
}

#[test]
fn tokens_are_the_same_on_every_device_count_and_the_graph_equals_the_eager_step() {
    let dir = model_dir("counts");
    let weights = HostWeights::load(&dir, &LlamaConfig::ci()).unwrap();
    let mut first: Option<Vec<Vec<u32>>> = None;
    for n in [1, 2, 4, 8] {
        let devices = sim_devices(&sim_node(Role::Data, n)).unwrap();
        let g = llama::generate(&devices, &weights, &ci::request(4)).unwrap();
        assert!(
            ci::matches_reference(&g.tokens),
            "{n} devices: {:?}",
            g.tokens
        );
        assert_eq!(g.tokens.len(), 2);
        assert!(g.tokens.iter().all(|t| t.len() == 4), "{:?}", g.tokens);
        assert!(
            g.eager_equals_graph,
            "{n} devices: replay differs from eager"
        );
        assert_eq!(g.recaptures(), 0);
        assert_eq!(g.updates, (n as u64) * 3 * (1 + 4 * 2));
        assert_eq!(g.predicted_pool_bytes, g.pool_bytes, "{n} devices");
        assert!(g.pool_bytes >= g.cache_bytes);
        assert!(g.graph_step_us > 0.0 && g.graph_step_us < g.eager_step_us);
        for device in &devices {
            let races = braid::sim_race_reports(device).unwrap();
            assert!(races.is_empty(), "{n} devices: {races:?}");
        }
        match &first {
            None => first = Some(g.tokens),
            Some(tokens) => assert_eq!(&g.tokens, tokens, "{n} devices"),
        }
    }
    std::fs::remove_dir_all(dir).ok();
}

/// Rewrites the model's file with `edit` applied to its tensors (name, dtype, shape, bytes).
fn rewrite(dir: &Path, edit: impl FnOnce(&mut Vec<(String, Dtype, Vec<usize>, Vec<u8>)>)) {
    let path = dir.join(WEIGHTS_FILE);
    let buffer = std::fs::read(&path).unwrap();
    let file = safetensors::SafeTensors::deserialize(&buffer).unwrap();
    let mut tensors: Vec<_> = file
        .tensors()
        .into_iter()
        .map(|(name, v)| (name, v.dtype(), v.shape().to_vec(), v.data().to_vec()))
        .collect();
    edit(&mut tensors);
    let views: Vec<_> = tensors
        .iter()
        .map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    safetensors::serialize_to_file(views, None, &path).unwrap();
}

#[test]
fn a_missing_tensor_is_refused_naming_it() {
    let dir = model_dir("missing");
    let name = Part::Down(2).name();
    rewrite(&dir, |t| t.retain(|(n, ..)| *n != name));
    let err = HostWeights::load(&dir, &LlamaConfig::ci()).unwrap_err();
    assert!(
        matches!(&err, LlamaError::MissingTensor { name: n } if *n == name),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("model.layers.2.mlp.down_proj.weight"),
        "{err}"
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_tensor_of_another_shape_is_refused_naming_it_and_both_shapes() {
    let dir = model_dir("shape");
    let name = Part::K(1).name();
    rewrite(&dir, |t| {
        let k = t.iter_mut().find(|(n, ..)| *n == name).unwrap();
        k.2 = vec![64, 256];
        k.3.truncate(64 * 256 * 4);
    });
    let err = HostWeights::load(&dir, &LlamaConfig::ci()).unwrap_err();
    match &err {
        LlamaError::WrongShape {
            name: n,
            expected,
            found,
        } => {
            assert_eq!(n, &name);
            assert_eq!(expected, &[128, 256]);
            assert_eq!(found, &[64, 256]);
        }
        other => panic!("{other}"),
    }
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_tensor_of_another_data_type_is_refused_naming_it() {
    let dir = model_dir("dtype");
    let name = Part::LmHead.name();
    rewrite(&dir, |t| {
        let head = t.iter_mut().find(|(n, ..)| *n == name).unwrap();
        head.1 = Dtype::F16;
        head.3.truncate(head.3.len() / 2);
    });
    let err = HostWeights::load(&dir, &LlamaConfig::ci()).unwrap_err();
    assert!(
        matches!(&err, LlamaError::WrongDType { name: n, .. } if *n == name),
        "{err}"
    );
    assert!(err.to_string().contains("lm_head.weight"), "{err}");
    std::fs::remove_dir_all(dir).ok();
}

/// Asserts `err` came before any device work: nothing allocated on `devices`.
fn untouched(devices: &[braid::Device<braid::sim::SimBackend>]) {
    for d in devices {
        let info = d.mem_info().unwrap();
        assert_eq!(info.free, info.total, "device memory was allocated");
    }
}

#[test]
fn a_prompt_longer_than_the_cache_is_refused_before_any_device_work() {
    let dir = model_dir("long");
    let weights = HostWeights::load(&dir, &LlamaConfig::ci()).unwrap();
    let devices = sim_devices(&sim_node(Role::Data, 2)).unwrap();
    let mut r = request();
    r.prompts = vec![vec![1; 60], vec![2; 60]];
    r.generate = 5;
    let err = llama::generate(&devices, &weights, &r).unwrap_err();
    assert!(
        matches!(
            err,
            LlamaError::PromptTooLong {
                prompt: 60,
                generate: 5,
                cache: 64
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("max_position_embeddings"), "{err}");
    untouched(&devices);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_device_count_that_does_not_divide_the_heads_is_refused_naming_the_dimension() {
    let dir = model_dir("split");
    let weights = HostWeights::load(&dir, &LlamaConfig::ci()).unwrap();
    let devices = sim_devices(&sim_node(Role::Data, 3)).unwrap();
    let err = llama::generate(&devices, &weights, &request()).unwrap_err();
    assert!(
        matches!(
            err,
            LlamaError::Indivisible {
                devices: 3,
                dimension: "num_attention_heads",
                value: 8
            }
        ),
        "{err}"
    );
    untouched(&devices);
    // Key/value heads: 12 query heads in groups of 3 over 6 devices, 4 KV heads.
    let config = LlamaConfig {
        hidden: 384,
        heads: 12,
        kv_heads: 4,
        intermediate: 768,
        ..LlamaConfig::ci()
    };
    let err = config.split(6).unwrap_err();
    assert!(
        matches!(
            err,
            LlamaError::Indivisible {
                dimension: "num_key_value_heads",
                ..
            }
        ),
        "{err}"
    );
    let config = LlamaConfig {
        intermediate: 510,
        ..LlamaConfig::ci()
    };
    let err = config.split(4).unwrap_err();
    assert!(
        matches!(
            err,
            LlamaError::Indivisible {
                dimension: "intermediate_size",
                value: 510,
                ..
            }
        ),
        "{err}"
    );
    // More devices than KV heads replicate them: 8 devices over 4 KV heads is fine.
    let split = LlamaConfig::ci().split(8).unwrap();
    assert_eq!((split.heads, split.kv_heads), (1, 1));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn tokens_outside_the_vocabulary_and_ragged_prompts_are_refused() {
    let config = LlamaConfig::ci();
    let mut r = request();
    r.prompts[1][2] = 1024;
    let err = r.check(&config, 1).unwrap_err();
    assert!(err.to_string().contains("token 1024"), "{err}");
    let mut r = request();
    r.prompts[1].pop();
    let err = r.check(&config, 1).unwrap_err();
    assert!(err.to_string().contains("prompt 1"), "{err}");
}

#[test]
fn the_same_seed_writes_the_same_file() {
    let (a, b) = (model_dir("seed-a"), model_dir("seed-b"));
    let read = |d: &Path| std::fs::read(d.join(WEIGHTS_FILE)).unwrap();
    assert_eq!(read(&a), read(&b));
    std::fs::remove_dir_all(a).ok();
    std::fs::remove_dir_all(b).ok();
}

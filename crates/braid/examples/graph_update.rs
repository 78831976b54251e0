//! Updating a captured graph without recapturing: decode steps whose sequence length changes
//! every step, through one captured graph. The step's attention-like scaling (`scores =
//! kv · 1/√seq_len`, then `out = scores + bias`) is captured once; its scaling operator is a
//! task group, and each step re-issues it with that step's sequence length (ACL's
//! `aclmdlRICaptureTaskUpdateBegin/End`, as vllm-ascend feeds its fused attention operator)
//! before replaying. Each step's output is checked against the same work run eagerly.
//!
//! `cargo run -p braid --example graph_update` (add `--features acl` to run it through ACL).

use braid::scenarios::devices::{self, Role};
use braid::{f32_bytes, CaptureMode, Kernel};

/// Floats in the KV row.
const N: u64 = 256;
/// The sequence length of each decode step.
const SEQ_LENS: [u32; 8] = [5, 9, 13, 17, 3, 64, 128, 33];

fn main() -> Result<(), braid::Report> {
    println!("running on {}", devices::describe());
    let device = devices::open(Role::Data)?;
    let (s, update) = (device.create_stream(0)?, device.create_stream(0)?);
    let [kv, bias, scores, out, eager_scores, eager_out] = [(); 6].map(|()| device.alloc(N * 4));
    let (kv, bias, scores, out) = (kv?, bias?, scores?, out?);
    let (eager_scores, eager_out) = (eager_scores?, eager_out?);
    let values: Vec<f32> = (0..N).map(|i| (i as f32 * 0.37).sin() * 4.0).collect();
    s.copy_h2d(kv.slice(), f32_bytes(&values))?;
    s.launch(&Kernel::Fill {
        dst: bias.slice(),
        value: 0.5,
    })?;
    s.synchronize()?;

    let scale = |seq_len: u32, dst| Kernel::Scale {
        src: kv.slice(),
        dst,
        factor: 1.0 / (seq_len as f32).sqrt(),
    };
    let add = |a, dst| Kernel::Add {
        a,
        b: bias.slice(),
        out: dst,
    };
    let capture = |seq_len: u32| -> braid::Result<_> {
        s.begin_capture(CaptureMode::Global)?;
        let captured = (|| -> braid::Result<_> {
            s.begin_task_group()?;
            s.launch(scale(seq_len, scores.slice()))?;
            let group = s.end_task_group()?;
            s.launch(add(scores.slice(), out.slice()))?;
            Ok(group)
        })();
        let graph = s.end_capture()?;
        Ok((graph, captured?))
    };
    let (mut graph, mut group) = capture(SEQ_LENS[0])?;
    let (mut captures, mut updates) = (1u32, 0u64);

    let mut correct = true;
    for &seq_len in &SEQ_LENS {
        // Where an update is refused (it never is here), capture again: the fallback
        // a server without updates takes every step.
        match graph.update(&group, &update, |u| {
            u.launch(scale(seq_len, scores.slice())).map(|_| ())
        }) {
            Ok(_) => updates += 1,
            Err(e) => {
                println!("update refused ({e}); capturing again");
                (graph, group) = capture(seq_len)?;
                captures += 1;
            }
        }
        graph.launch(&s)?;
        let replayed = s.copy_d2h(out.slice())?.wait_f32()?;
        s.launch(scale(seq_len, eager_scores.slice()))?;
        s.launch(add(eager_scores.slice(), eager_out.slice()))?;
        let eager = s.copy_d2h(eager_out.slice())?.wait_f32()?;
        let same = replayed == eager;
        correct &= same;
        println!(
            "step seq_len={seq_len:>3}: out[1]={:>9.5} eager={:>9.5} {}",
            replayed[1],
            eager[1],
            if same { "ok" } else { "DIFFERS" }
        );
    }
    println!(
        "RESULT correct={correct} steps={} recaptures={} updates={}",
        SEQ_LENS.len(),
        captures - 1,
        updates
    );
    if !correct {
        return Err(braid::Report::msg("a replay differed from the eager run"));
    }
    Ok(())
}

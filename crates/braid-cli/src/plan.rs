//! `braid plan`: the simulator as a planner. For a tensor-parallel layer stack (the
//! `tensor_parallel` scenario's Megatron-style blocks) at a batch, sequence length, data type
//! and device count, the step time with the all-reduce serial, overlapped and replayed as a
//! graph, under a named profile, with the resource each figure sits against: the cube units
//! (compute), device memory (HBM) or the links, each as the time that resource alone needs.

use braid::collective::ReduceOp;
use braid::core::collective::CollectiveOp;
use braid::scenarios::tensor_parallel::{self, Mode, Shape, Timing};
use braid::sim::profile::Profile;
use braid::sim::{collective_bound, NodeConfig, SimComm, SimConfig, SimDevice, SimMode, SimNode};
use braid::DType;
use std::io::Write;

/// What to plan.
#[derive(Clone, Debug)]
pub struct Request {
    /// Devices the stack is sharded over (one server).
    pub devices: u32,
    /// Sequences in the batch.
    pub batch: u32,
    /// Tokens per sequence in the step (1 for a decode step).
    pub seq_len: u32,
    /// Layers, hidden size and MLP size of the stack.
    pub layers: u32,
    /// Hidden size.
    pub hidden: u32,
    /// MLP intermediate size.
    pub ffn: u32,
    /// Micro-batches the tokens are split into (the overlap needs 2 or more).
    pub micro_batches: u32,
    /// Data type of weights and activations.
    pub dtype: DType,
}

/// A request `braid plan` refuses, named in the command's flags.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A size of 0.
    #[error("--{flag} 0: it must be at least 1")]
    Zero {
        /// The flag, without its dashes.
        flag: &'static str,
    },
    /// A device count the profile's server does not have.
    #[error("--devices {devices}: the profile's server holds 2 to {most} devices")]
    Devices {
        /// The count asked for.
        devices: u32,
        /// The most the profile's server holds.
        most: u32,
    },
    /// A hidden or MLP size the devices do not split evenly.
    #[error("--{flag} {size} does not split evenly over --devices {devices}: each device holds an equal share of its columns, so it must be a multiple of the device count")]
    Columns {
        /// `hidden` or `ffn`.
        flag: &'static str,
        /// The size.
        size: u32,
        /// The device count.
        devices: u32,
    },
    /// Tokens the micro-batches do not split evenly.
    #[error("--batch {batch} x --seq-len {seq_len} = {tokens} tokens do not split evenly into --micro-batches {micro_batches}: the tokens must be a multiple of the micro-batches")]
    Tokens {
        /// Sequences.
        batch: u32,
        /// Tokens per sequence.
        seq_len: u32,
        /// Their product.
        tokens: u64,
        /// Micro-batches.
        micro_batches: u32,
    },
    /// More tokens than a step can hold.
    #[error(
        "--batch {batch} x --seq-len {seq_len} = {tokens} tokens: a step holds at most {} tokens",
        u32::MAX
    )]
    TooManyTokens {
        /// Sequences.
        batch: u32,
        /// Tokens per sequence.
        seq_len: u32,
        /// Their product.
        tokens: u64,
    },
}

impl Request {
    /// Refuses a request the stack cannot be planned for, naming the flags (before anything
    /// is simulated).
    pub fn check(&self, devices_per_server: u32) -> Result<(), PlanError> {
        let sizes = [
            ("batch", self.batch),
            ("seq-len", self.seq_len),
            ("layers", self.layers),
            ("hidden", self.hidden),
            ("ffn", self.ffn),
            ("micro-batches", self.micro_batches),
        ];
        if let Some((flag, _)) = sizes.iter().find(|(_, size)| *size == 0) {
            return Err(PlanError::Zero { flag });
        }
        if self.devices < 2 || self.devices > devices_per_server {
            return Err(PlanError::Devices {
                devices: self.devices,
                most: devices_per_server,
            });
        }
        for (flag, size) in [("hidden", self.hidden), ("ffn", self.ffn)] {
            if size % self.devices != 0 {
                return Err(PlanError::Columns {
                    flag,
                    size,
                    devices: self.devices,
                });
            }
        }
        let tokens = u64::from(self.batch) * u64::from(self.seq_len);
        if tokens > u64::from(u32::MAX) {
            return Err(PlanError::TooManyTokens {
                batch: self.batch,
                seq_len: self.seq_len,
                tokens,
            });
        }
        if tokens % u64::from(self.micro_batches) != 0 {
            return Err(PlanError::Tokens {
                batch: self.batch,
                seq_len: self.seq_len,
                tokens,
                micro_batches: self.micro_batches,
            });
        }
        Ok(())
    }

    fn shape(&self) -> Shape {
        Shape {
            layers: self.layers,
            batch: self.batch.saturating_mul(self.seq_len),
            micro_batches: self.micro_batches,
            hidden: self.hidden,
            ffn: self.ffn,
            dtype: self.dtype,
        }
    }
}

/// The time each resource alone needs for one step on one device, microseconds.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct Bounds {
    /// The matmuls' floating-point work at the cube rate of the data type.
    pub compute_us: f64,
    /// The bytes the kernels move (weights once per micro-batch, activations in and out) at
    /// the achievable HBM bandwidth.
    pub hbm_us: f64,
    /// The all-reduces on the links, each at the collective cost model's time.
    pub link_us: f64,
}

impl Bounds {
    /// The resource that needs the most time, and that time.
    pub fn largest(&self) -> (&'static str, f64) {
        [
            ("compute", self.compute_us),
            ("HBM", self.hbm_us),
            ("link", self.link_us),
        ]
        .into_iter()
        .fold(("compute", f64::MIN), |a, b| if b.1 > a.1 { b } else { a })
    }
}

/// The plan: the profile, the figures and the bounds.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Name of the profile the figures come from.
    pub profile: String,
    /// Step times per mode.
    pub timing: Timing,
    /// Per-resource lower bounds.
    pub bounds: Bounds,
}

/// What a figure sits against: the resource whose time alone is the largest, or the host's
/// eager launches when every resource together covers under half the step (the host, not the
/// device, sets the pace).
pub fn sits_against(step_us: f64, mode: Mode, bounds: &Bounds) -> String {
    let (resource, us) = bounds.largest();
    let device = match mode {
        // Serial: the all-reduce waits for the matmuls and the next matmuls for it.
        Mode::Serial => bounds.compute_us.max(bounds.hbm_us) + bounds.link_us,
        Mode::Overlap | Mode::Graph => us,
    };
    if device < 0.5 * step_us && mode != Mode::Graph {
        return format!(
            "host launches (the device's resources need {:.0}% of the step)",
            100.0 * device / step_us
        );
    }
    format!("{resource} ({:.0}% of the step)", 100.0 * us / step_us)
}

/// Simulates `request` on `profile` (which must describe a node), after [`Request::check`].
pub fn plan(request: &Request, profile: &Profile) -> Result<Plan, Box<dyn std::error::Error>> {
    let node_profile = profile
        .node
        .ok_or_else(|| format!("profile {} describes no node (no links)", profile.name))?;
    request.check(node_profile.devices_per_server)?;
    let shape = request.shape();
    let node = SimNode::new(
        NodeConfig::new(request.devices)
            .device(SimConfig::for_profile(profile.device.clone()).mode(SimMode::TimingOnly))
            .topology(node_profile.topology(request.devices, 1)),
    );
    let sims = node.devices();
    let devices = sims
        .iter()
        .cloned()
        .map(braid::Device::<braid::sim::SimBackend>::new)
        .collect::<braid::Result<Vec<braid::Device<braid::sim::SimBackend>>>>()?;
    let timing = tensor_parallel::time(&devices, &shape)?;
    let bounds = bounds(request, profile, &sims)?;
    Ok(Plan {
        profile: profile.name.clone(),
        timing,
        bounds,
    })
}

/// The per-resource times of one device's step (see [`Bounds`]).
fn bounds(
    request: &Request,
    profile: &Profile,
    sims: &[SimDevice],
) -> Result<Bounds, Box<dyn std::error::Error>> {
    let p = &profile.device;
    let n = f64::from(request.devices);
    let dt = request.dtype.size() as f64;
    let rows =
        f64::from(request.batch) * f64::from(request.seq_len) / f64::from(request.micro_batches);
    let h = f64::from(request.hidden);
    let micro = f64::from(request.micro_batches);
    let layers = f64::from(request.layers);
    let cube = p.cube_rate(request.dtype) as f64;
    let (mut flops, mut bytes) = (0.0, 0.0);
    for width in [f64::from(request.hidden), f64::from(request.ffn)] {
        let cols = width / n;
        // Two matmuls per block and micro-batch: rows × hidden × cols each way.
        flops += micro * 2.0 * (2.0 * rows * h * cols);
        // Each reads its weight shard and its input and writes its output.
        bytes += micro * 2.0 * (h * cols + rows * h + rows * cols) * dt;
    }
    let refs: Vec<&SimDevice> = sims.iter().collect();
    let comms = SimComm::init_all(&refs)?;
    let params = comms[0].link_params(request.dtype);
    let all_reduce = collective_bound(
        CollectiveOp::AllReduce(ReduceOp::Sum),
        request.devices,
        (rows * h * dt) as u64,
        &params,
    ) as f64;
    Ok(Bounds {
        compute_us: layers * flops / cube * 1e6,
        hbm_us: layers * bytes / p.hbm_effective_bytes_per_s as f64 * 1e6,
        link_us: layers * 2.0 * micro * all_reduce / 1e3,
    })
}

/// Writes the plan.
pub fn write(out: &mut impl Write, request: &Request, plan: &Plan) -> std::io::Result<()> {
    writeln!(
        out,
        "braid plan, simulated with profile {}: {} layers (hidden {}, MLP {}) sharded over {} devices, batch {} x sequence {} = {} tokens in {} micro-batches, {}",
        plan.profile,
        request.layers,
        request.hidden,
        request.ffn,
        request.devices,
        request.batch,
        request.seq_len,
        request.shape().batch,
        request.micro_batches,
        request.dtype
    )?;
    writeln!(out)?;
    let b = &plan.bounds;
    writeln!(
        out,
        "one device's step needs, resource by resource: compute {:.1} us, HBM {:.1} us, link {:.1} us",
        b.compute_us, b.hbm_us, b.link_us
    )?;
    writeln!(out)?;
    writeln!(out, "{:<45} {:>12}  sits against", "mode", "step us")?;
    for mode in Mode::ALL {
        let us = plan.timing.us(mode);
        writeln!(
            out,
            "{:<45} {:>12.1}  {}",
            mode.name(),
            us,
            sits_against(us, mode, b)
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "RESULT profile={} devices={} serial_us={:.1} overlap_us={:.1} graph_us={:.1}",
        plan.profile,
        request.devices,
        plan.timing.serial_us,
        plan.timing.overlap_us,
        plan.timing.graph_us
    )
}

/// `braid plan`: simulates and prints.
pub fn run(
    out: &mut impl Write,
    request: &Request,
    profile: Option<&std::path::Path>,
) -> Result<bool, Box<dyn std::error::Error>> {
    let loaded;
    let profile = match profile {
        Some(path) => {
            loaded = Profile::from_file(path)?;
            &loaded
        }
        None => Profile::atlas_800t_a2(),
    };
    let plan = plan(request, profile)?;
    write(out, request, &plan)?;
    Ok(true)
}

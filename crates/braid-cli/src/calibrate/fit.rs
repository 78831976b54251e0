//! Fits the simulator's parameters to what the benchmarks measured, each with the
//! simulator's own cost formula for that work (`braid_backend_sim`'s `OpKind::duration_ns`
//! and the collectives' alpha–beta model), so the fitted profile predicts the measurements.

use super::bench::{Measurements, Point};
use braid::DType;

/// A parameter the measurements cannot give.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("cannot fit {quantity}: {reason}")]
pub struct FitError {
    /// The quantity (`h2d bandwidth`).
    pub quantity: &'static str,
    /// Why.
    pub reason: String,
}

/// One fitted parameter: its value in the profile's unit and how it was obtained.
#[derive(Clone, PartialEq, Debug)]
pub struct Fitted {
    /// The value, in the unit the profile writes the field in.
    pub value: f64,
    /// How it was fitted, for the figure's source.
    pub how: String,
}

/// Every parameter `braid calibrate` fits; `None` where the machine cannot measure it (peer
/// copies and collectives with one device, graphs without capture).
#[derive(Clone, PartialEq, Debug)]
pub struct Fit {
    /// `device.cube_f16`, TFLOP/s.
    pub cube_f16: Fitted,
    /// `device.cube_bf16`, TFLOP/s.
    pub cube_bf16: Fitted,
    /// `device.cube_f32`, TFLOP/s.
    pub cube_f32: Fitted,
    /// `device.cube_efficiency`: points (ideal µs at the f16 peak, share of the peak).
    pub cube_efficiency: (Vec<[f64; 2]>, String),
    /// `device.hbm_effective_bandwidth`, TB/s, from the element-wise additions.
    pub hbm_effective: Fitted,
    /// The same rate from the copies inside a device, TB/s: a check, not written (the
    /// simulator times both with the one figure).
    pub hbm_by_copy: Fitted,
    /// `device.memory_total`, GiB.
    pub memory_total: Fitted,
    /// `device.h2d_bandwidth`, GB/s.
    pub h2d: Fitted,
    /// `device.d2h_bandwidth`, GB/s.
    pub d2h: Fitted,
    /// `device.eager_launch`, µs.
    pub eager_launch: Fitted,
    /// `device.min_kernel`, µs.
    pub min_kernel: Fitted,
    /// `device.host_call`, µs.
    pub host_call: Fitted,
    /// `device.graph_launch` and `device.graph_node`, µs.
    pub graph: Option<(Fitted, Fitted)>,
    /// `node.link_bandwidth` (GB/s) and `node.link_latency` (µs).
    pub link: Option<(Fitted, Fitted)>,
    /// `node.collective_link_bandwidth` (GB/s) and `node.collective_overhead` (µs).
    pub collective: Option<(Fitted, Fitted)>,
    /// Figures whose benchmark the device rather than the host may have bounded (the host's
    /// launch costs are fitted from loops that must be host-bound), each a sentence naming
    /// the figure.
    pub cautions: Vec<String>,
}

/// Whether `us` for an operation is no longer than `device_us` of device work (within 1%):
/// the device, not the host, may have set the pace.
fn device_bound(us: f64, device_us: f64) -> bool {
    us <= device_us * 1.01
}

/// Least-squares line `us = intercept + slope · x` through `points` (`None` with fewer than
/// two distinct sizes).
pub fn line(points: &[Point]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    let mean_x = points.iter().map(|p| p.x).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.us).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.x - mean_x).powi(2)).sum();
    let sxy: f64 = points
        .iter()
        .map(|p| (p.x - mean_x) * (p.us - mean_y))
        .sum();
    if points.len() < 2 || sxx <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    Some((mean_y - slope * mean_x, slope))
}

/// A rate from a sweep: bytes per second moved by `factor × x` bytes per operation, from the
/// slope of the line through the sweep (the fixed costs in the intercept).
fn rate(quantity: &'static str, points: &[Point], factor: f64) -> Result<(f64, f64), FitError> {
    let (intercept, slope) = line(points).ok_or_else(|| FitError {
        quantity,
        reason: "needs at least two sizes".to_string(),
    })?;
    if !(slope > 0.0 && slope.is_finite()) {
        return Err(FitError {
            quantity,
            reason: format!("the time does not grow with the size (slope {slope} us/B)"),
        });
    }
    Ok((factor * 1e6 / slope, intercept))
}

fn sizes(points: &[Point]) -> String {
    let mib: Vec<String> = points
        .iter()
        .map(|p| format!("{}", p.x / 1048576.0))
        .collect();
    format!("{} MiB", mib.join(", "))
}

/// The matmul peak of `dtype`: the floating-point rate of the largest matmul timed.
fn peak(quantity: &'static str, points: &[Point]) -> Result<(f64, f64), FitError> {
    let last = points
        .iter()
        .copied()
        .max_by(|a, b| a.x.total_cmp(&b.x))
        .ok_or_else(|| FitError {
            quantity,
            reason: "no matmul was timed".to_string(),
        })?;
    if last.us <= 0.0 {
        return Err(FitError {
            quantity,
            reason: "the largest matmul took no time".to_string(),
        });
    }
    Ok((2.0 * last.x.powi(3) / (last.us * 1e-6) / 1e12, last.x))
}

impl Fit {
    /// Fits every parameter the measurements give.
    pub fn from_measurements(m: &Measurements) -> Result<Fit, FitError> {
        let matmul = |dtype: DType| -> &[Point] {
            m.matmul
                .iter()
                .find(|(d, _)| *d == dtype)
                .map_or(&[], |(_, p)| p.as_slice())
        };
        let cube = |quantity, dtype| -> Result<Fitted, FitError> {
            let (tflops, n) = peak(quantity, matmul(dtype))?;
            Ok(Fitted {
                value: tflops,
                how: format!(
                    "the rate of the largest matmul timed ({n}^3 {}, back to back on one stream)",
                    dtype.name()
                ),
            })
        };
        let cube_f16 = cube("the f16 cube rate", DType::F16)?;
        let peak_flops = cube_f16.value * 1e12;
        let points = matmul(DType::F16)
            .iter()
            .map(|p| {
                let ideal_us = 2.0 * p.x.powi(3) / peak_flops * 1e6;
                [ideal_us, (ideal_us / p.us).min(1.0)]
            })
            .collect::<Vec<_>>();
        let edges: Vec<String> = matmul(DType::F16)
            .iter()
            .map(|p| format!("{}^3", p.x))
            .collect();
        let curve_how = format!(
            "f16 matmuls of {}: each point is the matmul's ideal duration at the fitted f16 \
             peak and the share of the peak it reached (capped at 1)",
            edges.join(", ")
        );

        let (h2d, _) = rate("host-to-device bandwidth", &m.h2d, 1.0)?;
        let (d2h, _) = rate("device-to-host bandwidth", &m.d2h, 1.0)?;
        // An addition reads two operands and writes one; a copy reads and writes each byte.
        let (hbm, _) = rate("device memory bandwidth", &m.vector_add, 3.0)?;
        let (hbm_by_copy, _) = rate("device-to-device copy bandwidth", &m.d2d, 2.0)?;
        let line_how = |what: &str, points: &[Point]| {
            format!(
                "slope of the least-squares line through {what} of {} (back to back on one stream)",
                sizes(points)
            )
        };
        let link = if m.peer.is_empty() {
            None
        } else {
            let (bw, latency_us) = rate("the peer link's bandwidth", &m.peer, 1.0)?;
            Some((
                Fitted {
                    value: bw / 1e9,
                    how: line_how("peer copies device 1 -> device 0", &m.peer),
                },
                Fitted {
                    value: latency_us.max(0.0),
                    how: format!(
                        "intercept of the same line through peer copies of {}",
                        sizes(&m.peer)
                    ),
                },
            ))
        };
        let collective = match (m.collectives.last(), &link) {
            (Some(largest), Some((_, latency))) => {
                let p = f64::from(largest.ranks);
                // All-gather on a full mesh: (p-1)α + n/(p·bw) + overhead, n the output.
                let (bw, _) = rate("the collective link rate", &largest.all_gather, 1.0 / p)?;
                let mut overheads = Vec::new();
                for sweep in &m.collectives {
                    let (_, intercept) = rate("the collective overhead", &sweep.all_gather, 1.0)?;
                    overheads.push(intercept - (f64::from(sweep.ranks) - 1.0) * latency.value);
                }
                let overhead = overheads.iter().sum::<f64>() / overheads.len() as f64;
                let ranks: Vec<String> =
                    m.collectives.iter().map(|s| s.ranks.to_string()).collect();
                Some((
                    Fitted {
                        value: bw / 1e9,
                        how: format!(
                            "f32 all-gathers on {} devices of {}: the slope of the \
                             least-squares line is 1/(p x per-link rate), the simulator's mesh \
                             all-gather",
                            largest.ranks,
                            sizes(&largest.all_gather)
                        ),
                    },
                    Fitted {
                        value: overhead.max(0.0),
                        how: format!(
                            "f32 all-gathers on {} devices: the lines' intercepts less \
                             (p - 1) link latencies, averaged",
                            ranks.join(", ")
                        ),
                    },
                ))
            }
            _ => None,
        };
        let floor = m.queued_kernel_us;
        let mut cautions = Vec::new();
        if device_bound(m.kernel_launch_us, floor) {
            cautions.push(format!(
                "device.eager_launch: a launch took {:.3} us, no longer than the kernel floor \
                 ({floor:.3} us): the device may have set the pace, and the host's launch cost \
                 is at most this",
                m.kernel_launch_us
            ));
        }
        if let Some(p) = m.graph.iter().find(|p| device_bound(p.us, p.x * floor)) {
            cautions.push(format!(
                "device.graph_launch and device.graph_node: a graph of {} fills took {:.3} us \
                 per launch, no longer than its fills at the kernel floor ({floor:.3} us each): \
                 the device may have set the pace",
                p.x, p.us
            ));
        }
        let graph = match line(&m.graph) {
            Some((intercept, slope)) => {
                let nodes: Vec<String> = m.graph.iter().map(|p| p.x.to_string()).collect();
                let how = format!(
                    "launches of captured graphs of {} one-element fills, back to back on one \
                     stream: least-squares line of the time per launch against the nodes",
                    nodes.join(", ")
                );
                Some((
                    Fitted {
                        value: intercept.max(0.0),
                        how: format!("intercept; {how}"),
                    },
                    Fitted {
                        value: slope.max(0.0),
                        how: format!("slope; {how}"),
                    },
                ))
            }
            None => None,
        };
        Ok(Fit {
            cube_f16,
            cube_bf16: cube("the bf16 cube rate", DType::BF16)?,
            cube_f32: cube("the f32 cube rate", DType::F32)?,
            cube_efficiency: (points, curve_how),
            hbm_effective: Fitted {
                value: hbm / 1e12,
                how: format!(
                    "{} (each reads two operands and writes one; at these sizes the \
                     memory traffic, not the vector units, bounds an addition)",
                    line_how(
                        "f32 element-wise additions (aclnnAdd) on device 0",
                        &m.vector_add
                    )
                ),
            },
            hbm_by_copy: Fitted {
                value: hbm_by_copy / 1e12,
                how: format!(
                    "{} (a copy reads and writes each byte)",
                    line_how("copies inside device 0", &m.d2d)
                ),
            },
            memory_total: Fitted {
                value: m.memory_total_bytes as f64 / 1073741824.0,
                how: "the device's total memory as the runtime reports it (aclrtGetMemInfo)"
                    .to_string(),
            },
            h2d: Fitted {
                value: h2d / 1e9,
                how: line_how("host-to-device copies", &m.h2d),
            },
            d2h: Fitted {
                value: d2h / 1e9,
                how: line_how("device-to-host copies", &m.d2h),
            },
            eager_launch: Fitted {
                value: m.kernel_launch_us,
                how: format!(
                    "time per launch of a one-element fill, back to back on one stream (the \
                     host's launch rate); event record {:.3} us, event wait {:.3} us",
                    m.event_record_us, m.event_wait_us
                ),
            },
            min_kernel: Fitted {
                value: m.queued_kernel_us,
                how: "time per one-element fill queued behind long f16 matmuls, so that the \
                      device runs the fills back to back (the smallest kernel's device time)"
                    .to_string(),
            },
            host_call: Fitted {
                value: m.stream_query_us,
                how: "time per query of an idle stream, back to back (the host's rate of \
                      cheap calls)"
                    .to_string(),
            },
            graph,
            link,
            collective,
            cautions,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::calibrate::bench::CollectiveSweep;

    fn pts(f: impl Fn(f64) -> f64, xs: &[f64]) -> Vec<Point> {
        xs.iter().map(|&x| Point { x, us: f(x) }).collect()
    }

    fn measurements() -> Measurements {
        let mib = [1048576.0, 4.0 * 1048576.0, 16.0 * 1048576.0];
        let gather = |p: f64| pts(move |n| 20.0 + (p - 1.0) * 2.0 + n / (p * 18e3), &mib);
        Measurements {
            devices: 8,
            memory_total_bytes: 60 << 30,
            kernel_launch_us: 10.0,
            event_record_us: 10.0,
            event_wait_us: 10.0,
            queued_kernel_us: 2.0,
            stream_query_us: 1.5,
            // 25 GB/s = 25e3 bytes per µs; 5 µs of fixed cost.
            h2d: pts(|b| 5.0 + b / 25e3, &mib),
            d2h: pts(|b| 5.0 + b / 20e3, &mib),
            d2d: pts(|b| 2.0 * b / 1.2e6, &mib),
            vector_add: pts(|b| 4.0 + 3.0 * b / 1.4e6, &mib),
            peer: pts(|b| 2.0 + b / 50e3, &mib),
            matmul: vec![
                (
                    DType::F16,
                    // 1024^3 at half the peak, 2048^3 at the peak of 300 TFLOP/s.
                    pts(
                        |n| 2.0 * n.powi(3) / 300e6 / if n < 2000.0 { 0.5 } else { 1.0 },
                        &[1024.0, 2048.0],
                    ),
                ),
                (DType::BF16, pts(|n| 2.0 * n.powi(3) / 250e6, &[2048.0])),
                (DType::F32, pts(|n| 2.0 * n.powi(3) / 80e6, &[2048.0])),
            ],
            collectives: [2.0, 4.0, 8.0]
                .map(|p| CollectiveSweep {
                    ranks: p as u32,
                    all_reduce: Vec::new(),
                    all_gather: gather(p),
                })
                .to_vec(),
            graph: pts(|n| 20.0 + 0.5 * n, &[1.0, 8.0]),
        }
    }

    /// The fit of [`measurements`], for the checks' tests.
    pub(crate) fn fit() -> Fit {
        Fit::from_measurements(&measurements()).unwrap()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn each_parameter_is_recovered_from_measurements_of_its_formula() {
        let fit = Fit::from_measurements(&measurements()).unwrap();
        assert!(close(fit.h2d.value, 25.0), "{}", fit.h2d.value);
        assert!(close(fit.d2h.value, 20.0));
        assert!(close(fit.hbm_effective.value, 1.4));
        assert!(
            close(fit.hbm_by_copy.value, 1.2),
            "{}",
            fit.hbm_by_copy.value
        );
        assert!(close(fit.cube_f16.value, 300.0));
        assert!(close(fit.cube_bf16.value, 250.0));
        assert!(close(fit.cube_f32.value, 80.0));
        let (curve, _) = &fit.cube_efficiency;
        assert!(
            close(curve[0][1], 0.5) && close(curve[1][1], 1.0),
            "{curve:?}"
        );
        assert!(close(curve[0][0], 2.0 * 1024f64.powi(3) / 300e6));
        assert!(close(fit.memory_total.value, 60.0));
        let (bw, latency) = fit.link.unwrap();
        assert!(close(bw.value, 50.0) && close(latency.value, 2.0));
        let (coll_bw, overhead) = fit.collective.unwrap();
        assert!(close(coll_bw.value, 18.0), "{}", coll_bw.value);
        assert!(close(overhead.value, 20.0), "{}", overhead.value);
        assert!(close(fit.min_kernel.value, 2.0));
        assert!(close(fit.host_call.value, 1.5), "{}", fit.host_call.value);
        let (launch, node) = fit.graph.unwrap();
        assert!(close(launch.value, 20.0) && close(node.value, 0.5));
        assert!(fit.h2d.how.contains("1, 4, 16 MiB"), "{}", fit.h2d.how);
        assert!(fit.cautions.is_empty(), "{:?}", fit.cautions);
    }

    #[test]
    fn launch_loops_no_longer_than_the_kernel_floor_are_cautioned() {
        let mut m = measurements();
        m.queued_kernel_us = 10.0;
        let fit = Fit::from_measurements(&m).unwrap();
        // The graphs too: 8 fills at 10 us outlast a launch of 24 us.
        assert_eq!(fit.cautions.len(), 2, "{:?}", fit.cautions);
        assert!(
            fit.cautions[0].starts_with("device.eager_launch: a launch took 10.000 us"),
            "{:?}",
            fit.cautions
        );
        // Graphs of 1 and 8 nodes take 20.5 and 24 us: 8 fills at 3 us each outlast them.
        m.queued_kernel_us = 3.0;
        let fit = Fit::from_measurements(&m).unwrap();
        assert_eq!(fit.cautions.len(), 1, "{:?}", fit.cautions);
        assert!(
            fit.cautions[0].starts_with("device.graph_launch and device.graph_node: a graph of 8"),
            "{:?}",
            fit.cautions
        );
    }

    #[test]
    fn missing_or_flat_sweeps_are_errors_naming_the_quantity() {
        let mut m = measurements();
        m.h2d.truncate(1);
        let err = Fit::from_measurements(&m).unwrap_err();
        assert_eq!(err.quantity, "host-to-device bandwidth");
        let mut m = measurements();
        m.d2h = pts(|_| 7.0, &[1.0, 2.0]);
        let err = Fit::from_measurements(&m).unwrap_err();
        assert!(err.to_string().contains("does not grow"), "{err}");
        let mut m = measurements();
        m.vector_add.clear();
        assert_eq!(
            Fit::from_measurements(&m).unwrap_err().quantity,
            "device memory bandwidth"
        );
        let mut m = measurements();
        m.matmul[2].1.clear();
        assert_eq!(
            Fit::from_measurements(&m).unwrap_err().quantity,
            "the f32 cube rate"
        );
    }

    #[test]
    fn one_device_fits_no_link_and_no_collective() {
        let mut m = measurements();
        m.peer.clear();
        m.collectives.clear();
        m.graph.clear();
        let fit = Fit::from_measurements(&m).unwrap();
        assert!(fit.link.is_none() && fit.collective.is_none() && fit.graph.is_none());
    }

    /// Device time of each built-in vector operator (add, scale, sum; f16 and f32; 4 B to
    /// 256 MiB) run back to back behind a long kernel on a timing-only device of `profile`.
    fn vector_times(profile: &braid::sim::DeviceProfile) -> Vec<f64> {
        use crate::calibrate::bench::per_op_behind;
        use braid::Kernel;
        let device = braid::sim_device(
            braid::sim::SimConfig::for_profile(profile.clone())
                .mode(braid::sim::SimMode::TimingOnly)
                .record_timeline(false),
        )
        .unwrap();
        let stream = device.create_stream(0).unwrap();
        let largest = 256u64 << 20;
        let (a, out) = (
            device.alloc(largest).unwrap(),
            device.alloc(largest).unwrap(),
        );
        let head = Kernel::Busy {
            duration_ns: 1_000_000_000,
        };
        let mut times = Vec::new();
        for dtype in [DType::F16, DType::F32] {
            for bytes in (2..=28).step_by(2).map(|k| 1u64 << k) {
                let (src, dst) = (a.range(0, bytes).unwrap(), out.range(0, bytes).unwrap());
                for kernel in [
                    Kernel::Add {
                        a: src,
                        b: src,
                        out: dst,
                    },
                    Kernel::Scale {
                        src,
                        dst,
                        factor: 2.0,
                    },
                    Kernel::ReduceSum {
                        src,
                        dst: out.range(0, dtype.size()).unwrap(),
                    },
                ] {
                    let kernel = kernel.typed(dtype);
                    let us = per_op_behind(
                        &stream,
                        2,
                        || stream.launch(&head).map(drop),
                        |_| stream.launch(kernel.clone()).map(drop),
                    )
                    .unwrap();
                    times.push(us);
                }
            }
        }
        times
    }

    /// Why `braid calibrate` measures no vector rate: on the shipped profiles no built-in
    /// vector operator's time depends on it at any size (each is bound by its memory traffic
    /// or by the kernel floor), while a rate far lower would show.
    #[test]
    fn vector_rates_change_no_operator_time_on_the_shipped_profiles() {
        for profile in [
            braid::sim::profile::Profile::atlas_800t_a2(),
            braid::sim::profile::Profile::generic_gpu(),
        ] {
            let shipped = profile.device.clone();
            let scaled = |factor: f64| {
                let mut p = shipped.clone();
                p.vector_flops_per_s = (p.vector_flops_per_s as f64 * factor) as u64;
                p.vector_f32_flops_per_s = (p.vector_f32_flops_per_s as f64 * factor) as u64;
                p
            };
            let times = vector_times(&shipped);
            assert_eq!(times, vector_times(&scaled(0.5)), "{}", profile.name);
            assert_eq!(times, vector_times(&scaled(2.0)), "{}", profile.name);
            assert_ne!(times, vector_times(&scaled(1e-3)), "{}", profile.name);
        }
    }
}

//! Graph memory known before capture and sleep mode, on the simulator: a dry run predicts
//! exactly what the captures reserve, for one graph and for a ladder sharing one pool, under
//! several allocator configurations; a closure that touches the real device is refused before
//! anything is enqueued, and everything still works afterwards. The sleep-mode scenario
//! releases the memory of its sleeping pools and replays its graph correctly after the wake.

use braid::allocator::{AllocatorConfig, CachingAllocator, DeviceBuffer};
use braid::graph_capture::{graph_pool_handle, CaptureSession, GraphError, RunContext};
use braid::graph_memory::{DryRun, DryRunError};
use braid::hal::Backend;
use braid::scenarios::devices::{self, Role};
use braid::scenarios::graph_memory::{self, LADDER};
use braid::scenarios::memory_reuse::Decoder;
use braid::scenarios::sleep_mode::{self, Shape};
use braid::sim::{SimBackend, SimConfig, SimMode, WorkspaceSizes};
use braid::{DType, Device, Kernel, Priority};

const MIB: u64 = 1 << 20;

/// A capture with frees inside it, a tagged side stream, small and large requests.
fn model<B: Backend>(
    ctx: &RunContext<'_, B>,
    batch: u64,
) -> braid::graph_capture::Result<Vec<DeviceBuffer<B>>> {
    let t = DType::F16;
    let act = batch * 1024 * t.size();
    let x = ctx.alloc(act)?;
    ctx.stream().launch(
        Kernel::Fill {
            dst: x.slice(),
            value: 1.0,
        }
        .typed(t),
    )?;
    let mut h = ctx.alloc(act)?;
    ctx.stream().launch(
        Kernel::Scale {
            src: x.slice(),
            dst: h.slice(),
            factor: 2.0,
        }
        .typed(t),
    )?;
    for _ in 0..3 {
        let next = ctx.alloc(act)?;
        ctx.stream().launch(
            Kernel::Add {
                a: h.slice(),
                b: x.slice(),
                out: next.slice(),
            }
            .typed(t),
        )?;
        h = next;
    }
    let side = {
        let _on_side = ctx.stream_switch("side", Priority::default())?;
        let buf = ctx.alloc(batch * 64)?;
        ctx.current_stream().launch(
            Kernel::Fill {
                dst: buf.slice(),
                value: 3.0,
            }
            .typed(t),
        )?;
        buf
    };
    let total = ctx.alloc(t.size())?;
    ctx.stream().launch(
        Kernel::ReduceSum {
            src: h.slice(),
            dst: total.slice(),
        }
        .typed(t),
    )?;
    Ok(vec![h, side, total])
}

fn sim_device() -> Device<SimBackend> {
    braid::sim_device(
        SimConfig::new()
            .capacity(8 << 30)
            .mode(SimMode::TimingOnly)
            .record_timeline(false),
    )
    .unwrap()
}

/// Captures `ladder` for real into one pool: the pool's bytes after each capture.
fn actual<B: Backend>(
    alloc: &CachingAllocator<B>,
    stream: &braid::Stream<B>,
    ladder: &[u64],
) -> Vec<u64> {
    let pool = graph_pool_handle(alloc);
    let mut kept = Vec::new();
    ladder
        .iter()
        .map(|&b| {
            kept.push(
                CaptureSession::new(alloc, stream)
                    .pool(&pool)
                    .run(|ctx| model(ctx, b))
                    .unwrap(),
            );
            pool.reserved_bytes()
        })
        .collect()
}

#[test]
fn the_dry_run_predicts_a_shared_pool_exactly_under_several_configurations() {
    let ladders: [&[u64]; 3] = [
        &[512, 256, 128, 64, 32, 16, 8, 4, 2, 1],
        &[1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
        &[3, 700, 5, 96, 1000, 1],
    ];
    for conf in [
        "",
        "max_split_size_mb:40",
        "roundup_power2_divisions:4",
        "split_large_remainders:true",
        "large_segment_size_mb:12",
        "expandable_segments:true",
    ] {
        for ladder in ladders {
            let device = sim_device();
            let config = AllocatorConfig::parse(conf).unwrap();
            let alloc = CachingAllocator::new(device.clone(), config).unwrap();
            let stream = device.create_stream(0).unwrap();
            let forecast = DryRun::like(&alloc, &stream)
                .unwrap()
                .predict_ladder(ladder, |ctx, &b| model(ctx, b))
                .unwrap();
            let measured = actual(&alloc, &stream, ladder);
            assert_eq!(forecast.after_each, measured, "{conf:?} {ladder:?}");
            assert_eq!(forecast.reserved_bytes, *measured.last().unwrap());
            // Nothing ran on the real device while predicting: the capture was its first work.
            assert_eq!(device.hal().sanitizer_report_count(), 0);
        }
    }
}

#[test]
fn one_graph_is_predicted_and_the_real_device_is_left_alone() {
    let device = sim_device();
    let alloc = CachingAllocator::new(device.clone(), AllocatorConfig::new()).unwrap();
    let stream = device.create_stream(0).unwrap();
    let before = (
        alloc.memory_reserved(),
        stream.position(),
        device.mem_info().unwrap(),
    );
    let forecast = DryRun::like(&alloc, &stream)
        .unwrap()
        .predict_pool_bytes(|ctx| model(ctx, 300))
        .unwrap();
    assert_eq!(
        (
            alloc.memory_reserved(),
            stream.position(),
            device.mem_info().unwrap()
        ),
        before
    );
    assert_eq!(forecast.after_each.len(), 1);
    assert!(forecast.allocated_bytes > 0 && forecast.segments > 0);
    assert_eq!(forecast.reserved_bytes, actual(&alloc, &stream, &[300])[0]);
}

#[test]
fn the_decoder_ladder_of_the_example_is_predicted_exactly() {
    let outcome = graph_memory::run(
        &devices::sim(Role::Timing).unwrap(),
        &AllocatorConfig::new(),
        Decoder::llama7b_width(),
        &LADDER,
    )
    .unwrap();
    assert!(outcome.matches(), "{outcome:?}");
    assert_eq!(outcome.rows.len(), LADDER.len());
    assert!(outcome.actual_bytes > 0);
}

/// One 20 MiB buffer fills a 20 MiB segment of the pool; a reduction of it into a buffer made
/// outside the capture: a kernel asking for workspace then needs a small segment of the pool.
fn reduce_capture<B: Backend>(
    ctx: &RunContext<'_, B>,
    total: &DeviceBuffer<B>,
) -> braid::graph_capture::Result<DeviceBuffer<B>> {
    let big = ctx.alloc(20 * MIB)?;
    ctx.stream().launch(&Kernel::ReduceSum {
        src: big.slice(),
        dst: total.slice(),
    })?;
    Ok(big)
}

#[test]
fn workspace_sizes_reach_the_prediction() {
    let predict = |dry: &DryRun| {
        dry.predict_ladder_with(
            |alloc, s| Ok(alloc.alloc(4, s)?),
            &[()],
            |ctx, total, ()| reduce_capture(ctx, total),
        )
        .unwrap()
        .reserved_bytes
    };
    let plain = DryRun::new(AllocatorConfig::new(), 1 << 30);
    assert_eq!(predict(&plain), 20 * MIB);
    let with_workspace = plain.workspace_sizes(WorkspaceSizes::new(|k| {
        Ok(if matches!(k.kernel, Kernel::ReduceSum { .. }) {
            1024
        } else {
            0
        })
    }));
    assert_eq!(predict(&with_workspace), 22 * MIB);
}

#[test]
fn a_closure_touching_the_real_device_is_refused_before_anything_is_enqueued() {
    let device = sim_device();
    let alloc = CachingAllocator::new(device.clone(), AllocatorConfig::new()).unwrap();
    let stream = device.create_stream(0).unwrap();
    let real_buf = alloc.alloc(MIB, &stream).unwrap();
    let dry = DryRun::like(&alloc, &stream).unwrap();
    let stats_before = alloc.memory_stats_map();
    let position = stream.position();

    // A launch on the real stream.
    let err = dry
        .predict_pool_bytes(|ctx| {
            let out = ctx.alloc(MIB)?;
            stream.launch(&Kernel::Fill {
                dst: real_buf.slice(),
                value: 1.0,
            })?;
            Ok(out)
        })
        .unwrap_err();
    match &err {
        DryRunError::TouchedDevice {
            call,
            device: touched,
            dry_run,
        } => {
            assert_eq!(*call, "Stream::launch");
            assert_eq!(*touched, device.id());
            assert_ne!(*dry_run, device.id());
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("ctx.stream()"), "{err}");

    // An allocation from the real allocator, its error swallowed by the closure.
    let err = dry
        .predict_pool_bytes(|ctx| {
            let _ignored = alloc.alloc(MIB, &stream);
            ctx.alloc(MIB)
        })
        .unwrap_err();
    assert!(
        matches!(
            err,
            DryRunError::TouchedDevice {
                call: "CachingAllocator::alloc",
                ..
            }
        ),
        "{err:?}"
    );

    // A graph of the real device launched from the dry run, and a setup touching it.
    let (real_graph, _out) = CaptureSession::new(&alloc, &stream)
        .run(|ctx| ctx.alloc(MIB))
        .unwrap();
    let after_capture = (alloc.memory_stats_map(), stream.position());
    let err = dry
        .predict_pool_bytes(|ctx| {
            real_graph.launch(&stream)?;
            ctx.alloc(MIB)
        })
        .unwrap_err();
    assert!(
        matches!(
            err,
            DryRunError::TouchedDevice {
                call: "Graph::launch",
                ..
            }
        ),
        "{err:?}"
    );
    let err = dry
        .predict_ladder_with(
            |_, _| Ok(device.alloc(MIB)?),
            &[1],
            |ctx, _, _| ctx.alloc(MIB),
        )
        .unwrap_err();
    assert!(
        matches!(
            err,
            DryRunError::TouchedDevice {
                call: "Device::alloc",
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!((alloc.memory_stats_map(), stream.position()), after_capture);
    assert_ne!(stats_before, after_capture.0); // the real capture did allocate

    // Everything still works: the real stream, allocator, graph, and another dry run.
    real_graph.launch(&stream).unwrap();
    stream
        .launch(&Kernel::Fill {
            dst: real_buf.slice(),
            value: 2.0,
        })
        .unwrap();
    stream.synchronize().unwrap();
    assert!(position.seq < stream.position().seq);
    alloc.check_invariants().unwrap();
    assert!(dry.predict_pool_bytes(|ctx| model(ctx, 8)).is_ok());
}

#[test]
fn a_failing_capture_is_named_by_its_place_in_the_ladder() {
    let dry = DryRun::new(AllocatorConfig::new(), 1 << 30);
    let err = dry
        .predict_ladder(&[4u64, 2, 1], |ctx, &b| {
            if b == 2 {
                return Err(GraphError::model("no batch 2"));
            }
            model(ctx, b)
        })
        .unwrap_err();
    assert!(
        matches!(err, DryRunError::Capture { index: 1, .. }),
        "{err:?}"
    );
    let err = dry
        .predict_ladder_with(
            |_, _| Err::<(), _>(GraphError::model("no weights")),
            &[1u64],
            |ctx, _, &b| model(ctx, b),
        )
        .unwrap_err();
    assert!(matches!(err, DryRunError::Setup(_)), "{err:?}");
}

#[test]
fn dry_runs_on_many_threads_leave_other_threads_free_to_use_other_devices() {
    let device = sim_device();
    let alloc = CachingAllocator::new(device.clone(), AllocatorConfig::new()).unwrap();
    let stream = device.create_stream(0).unwrap();
    let dry = DryRun::like(&alloc, &stream).unwrap();
    let ladder = [64u64, 16, 4];
    let expected = dry
        .predict_ladder(&ladder, |ctx, &b| model(ctx, b))
        .unwrap();
    let other = sim_device();
    let other_alloc = CachingAllocator::new(other.clone(), AllocatorConfig::new()).unwrap();
    let other_stream = other.create_stream(0).unwrap();
    std::thread::scope(|scope| {
        let planners: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| dry.predict_ladder(&ladder, |ctx, &b| model(ctx, b))))
            .collect();
        // Meanwhile this thread serves on another device: not fenced.
        for _ in 0..50 {
            let buf = other_alloc.alloc(MIB, &other_stream).unwrap();
            other_stream
                .launch(&Kernel::Fill {
                    dst: buf.slice(),
                    value: 1.0,
                })
                .unwrap();
        }
        for p in planners {
            assert_eq!(p.join().unwrap().unwrap(), expected);
        }
    });
    // Once the dry runs are over, the real device serves every thread again.
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let buf = alloc.alloc(MIB, &stream).unwrap();
            stream
                .launch(&Kernel::Fill {
                    dst: buf.slice(),
                    value: 1.0,
                })
                .unwrap();
        });
    });
}

/// A thread the dry run's closure spawns is fenced off the real device too: its allocation
/// and launch are refused (the dry run reports it even though the thread swallowed the
/// errors), nothing is allocated or enqueued on the real device, and after the dry run that
/// thread's work goes through.
#[test]
fn a_thread_spawned_inside_a_dry_run_cannot_touch_the_real_device() {
    let device = sim_device();
    let alloc = CachingAllocator::new(device.clone(), AllocatorConfig::new()).unwrap();
    let stream = device.create_stream(0).unwrap();
    let real_buf = alloc.alloc(MIB, &stream).unwrap();
    stream.synchronize().unwrap();
    let dry = DryRun::like(&alloc, &stream).unwrap();
    let before = (alloc.memory_stats_map(), stream.position());
    let mut refused = Vec::new();
    let err = dry
        .predict_pool_bytes(|ctx| {
            std::thread::scope(|scope| {
                scope.spawn(|| {
                    refused.push(
                        alloc
                            .alloc(MIB, &stream)
                            .map(|_| ())
                            .map_err(|e| e.to_string()),
                    );
                    refused.push(
                        stream
                            .launch(&Kernel::Fill {
                                dst: real_buf.slice(),
                                value: 1.0,
                            })
                            .map(|_| ())
                            .map_err(|e| e.to_string()),
                    );
                });
            });
            ctx.alloc(MIB)
        })
        .unwrap_err();
    match &err {
        DryRunError::TouchedDevice {
            call,
            device: touched,
            ..
        } => {
            assert_eq!(*call, "CachingAllocator::alloc");
            assert_eq!(*touched, device.id());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(refused.len(), 2);
    for r in &refused {
        assert!(r.as_ref().is_err_and(|e| e.contains("dry run")), "{r:?}");
    }
    assert_eq!((alloc.memory_stats_map(), stream.position()), before);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            stream
                .launch(&Kernel::Fill {
                    dst: real_buf.slice(),
                    value: 1.0,
                })
                .unwrap();
            drop(alloc.alloc(MIB, &stream).unwrap());
        });
    });
}

#[test]
fn the_sleep_mode_scenario_releases_memory_and_replays_correctly_after_the_wake() {
    let shape = Shape::default();
    let o = sleep_mode::run(&devices::sim(Role::Data).unwrap(), shape).unwrap();
    let weights = u64::from(shape.out_features) * u64::from(shape.in_features) * 2;
    assert!(o.correct && o.same_addresses, "{o:?}");
    assert_eq!(o.offloaded_bytes, weights);
    // Both sleeping pools' segments were released: the weights' and the KV cache's.
    assert!(
        o.reserved_awake - o.reserved_asleep >= weights + shape.kv_bytes,
        "{o:?}"
    );
    assert_eq!(
        o.device_used.0 - o.device_used.1,
        o.reserved_awake - o.reserved_asleep
    );
}

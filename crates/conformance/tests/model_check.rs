//! braid's locking under a model checker: `shuttle` runs small programs of host threads
//! driving simulated devices in every interleaving of their lock acquisitions that preempts a
//! running thread at most [`PREEMPTIONS`] times, and checks that none deadlocks and that the
//! program's result is exact in each. The locks explored are all of braid's
//! (`braid_stream_core::sync`): the front layer's, the caching allocator's, a communicator's
//! ledger and the simulator's engine lock and condition variable.
//!
//! Exhaustive exploration of every interleaving stopped being affordable once the allocator's
//! and the simulator's locks joined the front layer's (two threads of a dozen lock operations
//! each already have millions of interleavings), so the search is bounded by preemptions, as
//! CHESS does (`braid_stream_core::sync::explore`, which `braid-backend-acl`'s program runs
//! under too): every schedule that switches away from a thread that could go on at most
//! [`PREEMPTIONS`] (or [`PREEMPTIONS_LARGE`]) times is run, and switches at a blocked lock
//! are free. Most concurrency
//! bugs need one or two preemptions (Musuvathi and Qadeer, PLDI 2007); the bound is explicit
//! and the search within it is exhaustive and deterministic.
//!
//! Built only with `--features model-check`, which builds braid's locks from `shuttle`'s
//! primitives (they work only inside `shuttle`'s runs); `.ci/run` runs it as
//! `cargo test -p braid-conformance --features model-check --test model_check`.
#![cfg(feature = "model-check")]

use braid_allocator::{AllocatorConfig, CachingAllocator, CrossStreamMode, DeviceBuffer};
use braid_backend_sim::{NodeConfig, SimBackend, SimConfig, SimDevice, SimMode, SimNode};
use braid_collective::Communicator;
use braid_stream_core::sync::explore::{explore, explore_reaching};
use braid_stream_core::{
    CaptureMode, DType, Device, DevicePtr, Domain, EventFlags, Kernel, Stream,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// How many times a schedule may switch away from a thread that could have gone on: three
/// for the small programs, two for the larger ones (whose schedules with three preemptions
/// number in the hundreds of thousands to millions, minutes of CI each).
const PREEMPTIONS: usize = 3;
const PREEMPTIONS_LARGE: usize = 2;

fn device(mode: SimMode) -> Device<SimBackend> {
    let config = SimConfig::new().mode(mode);
    Device::new(SimDevice::new(config)).expect("simulated device")
}

/// Two threads that each take one lock twice, and the main thread that joins them.
fn two_threads_two_locks() {
    let lock = Arc::new(braid_stream_core::sync::Mutex::new(0u32));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let lock = lock.clone();
            shuttle::thread::spawn(move || {
                for _ in 0..2 {
                    *lock.lock() += 1;
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(*lock.lock(), 4);
}

#[test]
fn the_bounded_search_is_shuttles_exhaustive_search_when_the_bound_is_never_reached() {
    let dfs = Arc::new(AtomicUsize::new(0));
    let counter = dfs.clone();
    shuttle::check_dfs(
        move || {
            counter.fetch_add(1, Ordering::Relaxed);
            two_threads_two_locks();
        },
        None,
    );
    let dfs = dfs.load(Ordering::Relaxed);
    assert_eq!(explore(two_threads_two_locks, usize::MAX), dfs);
    // Fewer preemptions allowed, fewer schedules run.
    let (none, one) = (
        explore(two_threads_two_locks, 0),
        explore(two_threads_two_locks, 1),
    );
    assert!(none < one && one < dfs, "{none} < {one} < {dfs} schedules");
}

/// An event is recorded on stream 1, then a buffer is filled there; then thread A records the
/// event again (after the fill) while thread B makes stream 2 wait on it; then stream 2 reads
/// the buffer. Whether B's wait sees A's record or the first one depends on the interleaving;
/// in every one, the model says the fill is ordered before the read exactly when the
/// simulator's sanitizer (which follows what the backend received) saw no race.
static WAIT_SAW_RECORD: AtomicUsize = AtomicUsize::new(0);
static WAIT_MISSED_RECORD: AtomicUsize = AtomicUsize::new(0);

fn record_wait_race() {
    let device = device(SimMode::TimingOnly);
    let (s1, s2) = (
        device.create_stream(0).unwrap(),
        device.create_stream(0).unwrap(),
    );
    let buffer = device.alloc(256).unwrap();
    let slice = buffer.slice();
    let event = device.create_event(EventFlags::ORDERING).unwrap();
    event.record(&s1).unwrap();
    let fill = s1
        .launch(&Kernel::Fill {
            dst: slice,
            value: 1.0,
        })
        .unwrap();
    let recorder = {
        let event = event.clone();
        shuttle::thread::spawn(move || event.record(&s1).unwrap())
    };
    let waiter = {
        let s2 = s2.clone();
        shuttle::thread::spawn(move || s2.wait(&event).unwrap())
    };
    recorder.join().unwrap();
    waiter.join().unwrap();
    let ordered = device.is_ordered_before(fill, &s2);
    let read = Kernel::Scale {
        src: slice.sub(128, 128).unwrap(),
        dst: slice.sub(0, 128).unwrap(),
        factor: 2.0,
    };
    // Reads bytes the fill wrote and writes bytes it wrote: unordered, both race.
    s2.launch_labeled(&read, "read").unwrap();
    let races = device.hal().sanitizer_report_count();
    assert_eq!(
        ordered,
        races == 0,
        "the model says ordered = {ordered}, the sanitizer reported {races} race(s)"
    );
    let outcome = if ordered {
        &WAIT_SAW_RECORD
    } else {
        &WAIT_MISSED_RECORD
    };
    outcome.fetch_add(1, Ordering::Relaxed);
    drop(buffer);
}

#[test]
fn record_and_wait_of_one_event_from_two_threads_is_exact_in_every_interleaving() {
    // Both outcomes are reached: the wait sees the record, or it does not.
    explore_reaching(
        "record/wait",
        record_wait_race,
        PREEMPTIONS,
        &[
            ("ordered", &WAIT_SAW_RECORD),
            ("unordered", &WAIT_MISSED_RECORD),
        ],
    );
}

/// Thread A captures stream 1 (begin, end); thread B launches on stream 1 meanwhile. The
/// launch lands wholly before, inside or after the capture: the position the model gives it
/// is in the capture's domain exactly when the backend captured it into the graph.
static LAUNCH_CAPTURED: AtomicUsize = AtomicUsize::new(0);
static LAUNCH_EAGER: AtomicUsize = AtomicUsize::new(0);

fn launch_racing_a_capture() {
    let device = device(SimMode::TimingOnly);
    let s1 = device.create_stream(0).unwrap();
    let buffer = device.alloc(256).unwrap();
    let slice = buffer.slice();
    let capturer = {
        let s1 = s1.clone();
        shuttle::thread::spawn(move || {
            s1.begin_capture(CaptureMode::Relaxed).unwrap();
            s1.end_capture().unwrap()
        })
    };
    let launcher = shuttle::thread::spawn(move || {
        s1.launch(&Kernel::Fill {
            dst: slice,
            value: 1.0,
        })
        .unwrap()
    });
    let graph = capturer.join().unwrap();
    let position = launcher.join().unwrap();
    let captured = matches!(position.domain, Domain::Capture(_));
    assert_eq!(
        captured,
        graph.node_count() == 1,
        "model domain {:?}, graph with {} node(s)",
        position.domain,
        graph.node_count()
    );
    assert_eq!(device.hal().stats().ops_executed, u64::from(!captured));
    let outcome = if captured {
        &LAUNCH_CAPTURED
    } else {
        &LAUNCH_EAGER
    };
    outcome.fetch_add(1, Ordering::Relaxed);
    drop(graph);
    drop(buffer);
}

#[test]
fn a_launch_racing_a_capture_is_in_the_domain_the_backend_put_it_in() {
    explore_reaching(
        "launch/capture",
        launch_racing_a_capture,
        PREEMPTIONS,
        &[("captured", &LAUNCH_CAPTURED), ("eager", &LAUNCH_EAGER)],
    );
}

/// What the two cross-stream programs start from: a timing-only device, a caching allocator
/// in `mode`, two streams, and a buffer of stream 1 (at `freed`) that stream 2 will read.
struct CrossStream {
    device: Device<SimBackend>,
    alloc: CachingAllocator<SimBackend>,
    s1: Stream<SimBackend>,
    s2: Stream<SimBackend>,
    buffer: DeviceBuffer<SimBackend>,
    freed: DevicePtr,
}

impl CrossStream {
    fn new(mode: CrossStreamMode) -> Self {
        let device = device(SimMode::TimingOnly);
        let alloc =
            CachingAllocator::new(device.clone(), AllocatorConfig::new().cross_stream(mode))
                .unwrap();
        let (s1, s2) = (
            device.create_stream(0).unwrap(),
            device.create_stream(0).unwrap(),
        );
        let buffer = alloc.alloc(512, &s1).unwrap();
        let freed = buffer.ptr();
        CrossStream {
            device,
            alloc,
            s1,
            s2,
            buffer,
            freed,
        }
    }
}

/// How both cross-stream programs end, once their threads are joined: one more allocation on
/// stream 1 (it may take the block stream 2 read; counted in `reused` if it does) and a fill
/// of it; then no race reported, the allocator's invariants hold and every byte came back.
fn finish_cross_stream(
    device: &Device<SimBackend>,
    alloc: &CachingAllocator<SimBackend>,
    s1: &Stream<SimBackend>,
    freed: DevicePtr,
    reused: &AtomicUsize,
) {
    let last = alloc.alloc(512, s1).unwrap();
    if last.ptr() == freed {
        reused.fetch_add(1, Ordering::Relaxed);
    }
    s1.launch(&Kernel::Fill {
        dst: last.slice(),
        value: 4.0,
    })
    .unwrap();
    drop(last);
    let races = device.hal().sanitizer_report_count();
    assert_eq!(
        races, 0,
        "a freed block was reused before its use on stream 2"
    );
    alloc.check_invariants().unwrap();
    assert_eq!(alloc.memory_allocated(), 0);
}

/// One caching allocator shared by two threads. Thread A reads a buffer of stream 1 on
/// stream 2 (after waiting for stream 1), records the use (`record_stream`) and frees the
/// buffer; thread B meanwhile allocates, fills and frees buffers of the same size on stream 1,
/// which reuse the freed block only once stream 2's read is done. In every interleaving: no
/// deadlock, no race between the read and a later writer of the block (the sanitizer), the
/// allocator's invariants hold and every byte comes back.
static MANUAL_REUSED: AtomicUsize = AtomicUsize::new(0);

fn cross_stream_free_racing_allocations() {
    let CrossStream {
        device,
        alloc,
        s1,
        s2,
        buffer,
        freed,
    } = CrossStream::new(CrossStreamMode::Manual);
    s1.launch(&Kernel::Fill {
        dst: buffer.slice(),
        value: 1.0,
    })
    .unwrap();
    let reader = {
        let (s1, s2) = (s1.clone(), s2.clone());
        shuttle::thread::spawn(move || {
            s2.wait_stream(&s1).unwrap();
            let read = Kernel::Scale {
                src: buffer.slice().sub(256, 256).unwrap(),
                dst: buffer.slice().sub(0, 256).unwrap(),
                factor: 2.0,
            };
            s2.launch(&read).unwrap();
            buffer.record_stream(&s2).unwrap();
            drop(buffer);
        })
    };
    let writer = {
        let (alloc, s1) = (alloc.clone(), s1.clone());
        shuttle::thread::spawn(move || {
            for _ in 0..2 {
                let other = alloc.alloc(512, &s1).unwrap();
                if other.ptr() == freed {
                    MANUAL_REUSED.fetch_add(1, Ordering::Relaxed);
                }
                s1.launch(&Kernel::Fill {
                    dst: other.slice(),
                    value: 3.0,
                })
                .unwrap();
            }
        })
    };
    reader.join().unwrap();
    writer.join().unwrap();
    finish_cross_stream(&device, &alloc, &s1, freed, &MANUAL_REUSED);
}

#[test]
fn a_cross_stream_free_racing_allocations_is_exact_in_every_interleaving() {
    // The freed block does come back (once stream 2's read is known complete).
    explore_reaching(
        "allocator cross-stream free",
        cross_stream_free_racing_allocations,
        PREEMPTIONS_LARGE,
        &[("the freed block reused", &MANUAL_REUSED)],
    );
}

/// The same with the allocator's automatic mode: no `record_stream`; the front layer reports
/// stream 2's read to the allocator (its use observer takes the allocator's lock after every
/// front-layer lock is released), racing thread B's allocations, and the free that follows
/// the read on thread A waits for it.
static AUTOMATIC_REUSED: AtomicUsize = AtomicUsize::new(0);

fn automatic_cross_stream_free() {
    let CrossStream {
        device,
        alloc,
        s1,
        s2,
        buffer,
        freed,
    } = CrossStream::new(CrossStreamMode::Automatic);
    s2.wait_stream(&s1).unwrap();
    let reader = {
        let s2 = s2.clone();
        shuttle::thread::spawn(move || {
            let read = Kernel::Scale {
                src: buffer.slice().sub(256, 256).unwrap(),
                dst: buffer.slice().sub(0, 256).unwrap(),
                factor: 2.0,
            };
            s2.launch(&read).unwrap();
            drop(buffer);
        })
    };
    let writer = {
        let (alloc, s1) = (alloc.clone(), s1.clone());
        shuttle::thread::spawn(move || {
            let other = alloc.alloc(512, &s1).unwrap();
            if other.ptr() == freed {
                AUTOMATIC_REUSED.fetch_add(1, Ordering::Relaxed);
            }
            s1.launch(&Kernel::Fill {
                dst: other.slice(),
                value: 3.0,
            })
            .unwrap();
        })
    };
    reader.join().unwrap();
    writer.join().unwrap();
    finish_cross_stream(&device, &alloc, &s1, freed, &AUTOMATIC_REUSED);
}

#[test]
fn an_automatic_cross_stream_free_is_exact_in_every_interleaving() {
    explore_reaching(
        "allocator automatic mode",
        automatic_cross_stream_free,
        PREEMPTIONS,
        &[("the freed block reused", &AUTOMATIC_REUSED)],
    );
}

/// A graph of device B holds a block of A's caching allocator that its captured peer copy
/// reads (`graph_pins`). Thread B captures the copy on B's stream (A's allocator's capture
/// observer runs on that thread, takes A's allocator lock, then hands the pin to B's capture
/// under B's state lock), drops A's buffer, replays the graph, drops it and synchronizes B
/// (the pin's drop, under B's state lock, posts to A's board); thread A meanwhile allocates
/// and fills buffers of the same size on A's stream. In every interleaving: no deadlock, the
/// block is handed out again only once B's graph is being dropped, and every byte comes back.
static PEER_PIN_REUSED: AtomicUsize = AtomicUsize::new(0);

fn peer_graph_pin_racing_allocations() {
    use std::sync::atomic::AtomicBool;
    let node = SimNode::new(NodeConfig::new(2).device(SimConfig::new().mode(SimMode::TimingOnly)));
    let (a, b): (Device<SimBackend>, Device<SimBackend>) = (
        Device::new(node.device(0).unwrap()).unwrap(),
        Device::new(node.device(1).unwrap()).unwrap(),
    );
    b.enable_peer_access(&a).unwrap();
    let alloc = CachingAllocator::new(a.clone(), AllocatorConfig::new()).unwrap();
    let (sa, sb) = (a.create_stream(0).unwrap(), b.create_stream(0).unwrap());
    let buffer = alloc.alloc(512, &sa).unwrap();
    let freed = buffer.ptr();
    sb.wait(&sa.record_event().unwrap()).unwrap();
    let graph_dropping = Arc::new(AtomicBool::new(false));
    let capturer = {
        let (a, b, sb, dropping) = (a.clone(), b.clone(), sb.clone(), graph_dropping.clone());
        shuttle::thread::spawn(move || {
            let dst = b.alloc(512).unwrap();
            sb.begin_capture(CaptureMode::ThreadLocal).unwrap();
            sb.copy_peer(buffer.slice(), &a, dst.slice(), &b).unwrap();
            let graph = sb.end_capture().unwrap();
            drop(buffer);
            graph.launch(&sb).unwrap();
            dropping.store(true, Ordering::SeqCst);
            drop(graph);
            b.synchronize().unwrap();
        })
    };
    let user = {
        let (alloc, sa, dropping) = (alloc.clone(), sa.clone(), graph_dropping.clone());
        shuttle::thread::spawn(move || {
            for _ in 0..2 {
                let other = alloc.alloc(512, &sa).unwrap();
                if other.ptr() == freed {
                    assert!(
                        dropping.load(Ordering::SeqCst),
                        "the block B's live graph reads was handed out again"
                    );
                    PEER_PIN_REUSED.fetch_add(1, Ordering::Relaxed);
                }
                sa.launch(&Kernel::Fill {
                    dst: other.slice(),
                    value: 3.0,
                })
                .unwrap();
            }
        })
    };
    capturer.join().unwrap();
    user.join().unwrap();
    let last = alloc.alloc(512, &sa).unwrap();
    assert_eq!(
        last.ptr(),
        freed,
        "the block comes back once B's graph is gone"
    );
    drop(last);
    assert_eq!(alloc.pending_free_bytes(), 0);
    alloc.check_invariants().unwrap();
    assert_eq!(alloc.memory_allocated(), 0);
}

#[test]
fn a_peer_graphs_pin_racing_allocations_is_exact_in_every_interleaving() {
    explore_reaching(
        "graph pin across devices",
        peer_graph_pin_racing_allocations,
        PREEMPTIONS_LARGE,
        &[("the pinned block reused after the graph", &PEER_PIN_REUSED)],
    );
}

/// Two ranks of one simulated node, each driven by its own thread: each fills its buffer with
/// its rank + 1, all-reduces it (sum) and synchronizes its stream. A rank whose part arrives
/// first holds its stream back, and its synchronize waits on the engine's condition variable
/// (releasing the engine lock) until the other rank's part arrives; the communicator's
/// ledger is held across each submission. In every interleaving both ranks end with 1 + 2.
fn two_ranks_all_reduce() {
    let node = SimNode::new(NodeConfig::new(2).device(SimConfig::new().mode(SimMode::Data)));
    let devices: Vec<Device<SimBackend>> = node
        .devices()
        .into_iter()
        .map(|d| Device::new(d).unwrap())
        .collect();
    let comms = Communicator::init_all(&devices).unwrap();
    let ranks: Vec<_> = comms
        .into_iter()
        .zip(&devices)
        .enumerate()
        .map(|(rank, (comm, device))| {
            let device = device.clone();
            shuttle::thread::spawn(move || {
                let stream = device.create_stream(0).unwrap();
                let buffer = device.alloc(4 * 4).unwrap();
                stream
                    .launch(&Kernel::Fill {
                        dst: buffer.slice(),
                        value: rank as f32 + 1.0,
                    })
                    .unwrap();
                comm.all_reduce(
                    &stream,
                    buffer.slice(),
                    buffer.slice(),
                    DType::F32,
                    braid_stream_core::collective::ReduceOp::Sum,
                )
                .unwrap();
                stream.synchronize().unwrap();
                stream.copy_d2h(buffer.slice()).unwrap().wait_f32().unwrap()
            })
        })
        .collect();
    for rank in ranks {
        assert_eq!(rank.join().unwrap(), vec![3.0; 4]);
    }
}

#[test]
fn an_all_reduce_of_two_threads_is_exact_in_every_interleaving() {
    let runs = explore(two_ranks_all_reduce, PREEMPTIONS_LARGE);
    assert!(runs > 1, "{runs} interleavings explored");
    eprintln!("two-rank all-reduce: {runs} interleavings explored");
}

/// Two threads drive two devices of one simulated node through the hal alone (no front
/// layer), so the simulator's engine lock, shared by the node's devices, is the only lock
/// between them. Thread A fills its buffer with 1s, records an event and synchronizes; thread
/// B fills its own with 2s, synchronizes on A's event (recorded or not yet: both are valid
/// outcomes) and synchronizes its stream. In every interleaving each reads back its own
/// bytes, both streams are idle and the node ran both fills.
fn sim_submit_and_synchronize() {
    use braid_stream_core::hal::{Device as _, Event as _, Stream as _};
    let node = SimNode::new(NodeConfig::new(2).device(SimConfig::new().mode(SimMode::Data)));
    let event = Arc::new(
        node.device(0)
            .unwrap()
            .create_event(EventFlags::empty())
            .unwrap(),
    );
    let drive = |ordinal: u32, value: u8, record: bool| {
        let device = node.device(ordinal).unwrap();
        let event = Arc::clone(&event);
        shuttle::thread::spawn(move || {
            let stream = device.create_stream(0).unwrap();
            let buffer = device.alloc(16).unwrap();
            stream.memset(buffer, value, 16).unwrap();
            if record {
                stream.record(&event).unwrap();
            } else {
                event.synchronize().unwrap();
            }
            stream.synchronize().unwrap();
            assert!(
                stream.query().unwrap(),
                "the stream is idle after synchronize"
            );
            let mut back = [0u8; 16];
            // SAFETY: `back` is 16 writable bytes, the size of the copy.
            unsafe { stream.memcpy_d2h(back.as_mut_ptr(), buffer, 16) }.unwrap();
            stream.synchronize().unwrap();
            back
        })
    };
    let (a, b) = (drive(0, 1, true), drive(1, 2, false));
    assert_eq!(a.join().unwrap(), [1u8; 16]);
    assert_eq!(b.join().unwrap(), [2u8; 16]);
    assert!(event.query().unwrap(), "A's record is complete");
    let fills = node
        .timeline()
        .iter()
        .filter(|op| op.kind == "memset")
        .count();
    assert_eq!(fills, 2, "the node ran both fills");
}

#[test]
fn the_simulators_submissions_and_synchronizes_from_two_threads_are_exact_in_every_interleaving() {
    let runs = explore(sim_submit_and_synchronize, PREEMPTIONS);
    assert!(runs > 1, "{runs} interleavings explored");
    eprintln!("simulator submit and synchronize: {runs} interleavings explored");
}

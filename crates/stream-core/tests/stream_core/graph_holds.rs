//! Graph holds (`braid_stream_core::graph_hold`): what a capture and each task update hand a
//! graph for the memory its replays touch, asked before every launch, replaced by the next
//! update of a group and let go with the graph.

use braid_backend_sim::{SimBackend, SimConfig, SimDevice};
use braid_stream_core::{
    Access, CaptureMode, Device, DeviceSlice, GraphHold, Kernel, StreamError, StreamPosition,
    UseObserver,
};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

type Dev = Device<SimBackend>;

fn device() -> Dev {
    Device::new(SimDevice::new(SimConfig::new())).unwrap()
}

/// A hold that refuses launches while `refuse` is set and counts its live copies.
struct Gate {
    refuse: Arc<AtomicBool>,
    live: Arc<AtomicUsize>,
}

impl Gate {
    fn new(refuse: &Arc<AtomicBool>, live: &Arc<AtomicUsize>) -> Self {
        live.fetch_add(1, SeqCst);
        Gate {
            refuse: refuse.clone(),
            live: live.clone(),
        }
    }
}

impl GraphHold for Gate {
    fn check_launch(&self) -> braid_stream_core::Result<()> {
        if self.refuse.load(SeqCst) {
            Err(StreamError::GraphUsesDroppedBuffer { addr: 1, len: 2 })
        } else {
            Ok(())
        }
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.live.fetch_sub(1, SeqCst);
    }
}

/// A capture use observer that attaches a [`Gate`] to each capture it sees and gives one to
/// each update, remembering the ranges updates report.
struct Owner {
    device: Dev,
    refuse: Arc<AtomicBool>,
    live: Arc<AtomicUsize>,
    updates: Mutex<Vec<Vec<(DeviceSlice, Access)>>>,
}

impl UseObserver for Owner {
    fn note_use(&self, position: StreamPosition, _range: DeviceSlice, _access: Access) {
        assert!(self
            .device
            .attach_to_capture(position, Gate::new(&self.refuse, &self.live)));
    }

    fn note_graph_update(&self, ranges: &[(DeviceSlice, Access)]) -> Option<Arc<dyn GraphHold>> {
        self.updates.lock().unwrap().push(ranges.to_vec());
        Some(Arc::new(Gate::new(&self.refuse, &self.live)))
    }
}

#[test]
fn holds_refuse_launches_follow_updates_and_go_with_the_graph() {
    let dev = device();
    let owner = Arc::new(Owner {
        device: dev.clone(),
        refuse: Arc::new(AtomicBool::new(false)),
        live: Arc::new(AtomicUsize::new(0)),
        updates: Mutex::new(Vec::new()),
    });
    let registered: Arc<dyn UseObserver> = owner.clone();
    dev.add_capture_use_observer(&registered);
    let (s, u) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    let (a, b) = (dev.alloc(256).unwrap(), dev.alloc(256).unwrap());
    s.begin_capture(CaptureMode::Global).unwrap();
    s.begin_task_group().unwrap();
    s.launch(&Kernel::Fill {
        dst: a.slice(),
        value: 1.0,
    })
    .unwrap();
    let group = s.end_task_group().unwrap();
    let graph = s.end_capture().unwrap();
    assert_eq!(owner.live.load(SeqCst), 1, "the capture's hold");

    owner.refuse.store(true, SeqCst);
    let position = s.position();
    assert!(matches!(
        graph.launch(&s),
        Err(StreamError::GraphUsesDroppedBuffer { addr: 1, len: 2 })
    ));
    assert_eq!(s.position(), position, "a refused launch enqueues nothing");
    owner.refuse.store(false, SeqCst);
    graph.launch(&s).unwrap();
    s.synchronize().unwrap();

    // Each update reports the ranges its operators use and gives a hold; the group's next
    // update replaces it.
    for (i, dst) in [b.slice(), a.slice()].into_iter().enumerate() {
        graph
            .update(&group, &u, |u| {
                u.launch(&Kernel::Fill { dst, value: 2.0 }).map(|_| ())
            })
            .unwrap();
        assert_eq!(
            owner.updates.lock().unwrap()[i],
            vec![(dst, Access::Write)],
            "update {i}'s ranges"
        );
        assert_eq!(
            owner.live.load(SeqCst),
            2,
            "capture + the group's last update"
        );
    }
    // A refused (incomplete) update gives nothing and keeps the holds.
    graph.update(&group, &u, |_| Ok(())).unwrap_err();
    assert_eq!(owner.updates.lock().unwrap().len(), 2);
    assert_eq!(owner.live.load(SeqCst), 2);

    graph.launch(&s).unwrap();
    drop(graph);
    assert_eq!(
        owner.live.load(SeqCst),
        2,
        "kept until the host saw the last launch"
    );
    s.synchronize().unwrap();
    assert_eq!(owner.live.load(SeqCst), 0, "gone with the graph");
}

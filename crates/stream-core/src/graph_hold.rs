//! Holds: what a graph keeps for the memory its replays touch, and asks before each launch.
//!
//! A graph replays at the addresses its work names, long after the capture or update that
//! named them. An owner of memory (braid's caching allocator) keeps that memory for the graph
//! with a [`GraphHold`]: it hands one to a capture through [`Device::attach_to_capture`] (the
//! memory captured work uses), and one per task update through its capture use observer
//! ([`UseObserver::note_graph_update`], the memory an update's operators use). The graph
//! keeps the capture's holds for its life and each group's update holds until a later update
//! of that group replaces them; after the graph is dropped, its holds live until the host has
//! observed its last launches complete. Before every launch the graph asks each hold
//! ([`GraphHold::check_launch`]) whether the memory may be touched now (not asleep, not given
//! up by its owner); a refusal refuses the launch before anything is enqueued.
//!
//! [`Device::attach_to_capture`]: crate::Device::attach_to_capture
//! [`UseObserver::note_graph_update`]: crate::UseObserver::note_graph_update

use crate::error::Result;
use crate::hal::TaskGroupHandle;
use crate::sync::Mutex;
use std::sync::Arc;

/// Something a graph keeps while it lives for the memory its replays touch (a hold of the
/// caching allocator on its blocks), asked before every launch.
pub trait GraphHold: Send + Sync + 'static {
    /// Called before each launch of the graph that keeps the hold, with no lock of the front
    /// layer held; an error refuses the launch, and nothing is enqueued. The default allows
    /// every launch.
    fn check_launch(&self) -> Result<()> {
        Ok(())
    }
}

/// The holds of one graph: its capture's, and the last update's of each task group.
#[derive(Default)]
pub(crate) struct Holds {
    inner: Mutex<HoldLists>,
}

#[derive(Default)]
struct HoldLists {
    captured: Vec<Arc<dyn GraphHold>>,
    /// Per task group, the holds of its last applied update.
    updated: Vec<(TaskGroupHandle, Vec<Arc<dyn GraphHold>>)>,
}

impl Holds {
    pub(crate) fn new(captured: Vec<Arc<dyn GraphHold>>) -> Self {
        Holds {
            inner: Mutex::new(HoldLists {
                captured,
                updated: Vec::new(),
            }),
        }
    }

    /// Whether the graph holds nothing.
    pub(crate) fn is_empty(&self) -> bool {
        let lists = self.inner.lock();
        lists.captured.is_empty() && lists.updated.iter().all(|(_, h)| h.is_empty())
    }

    /// Every hold, for the checks of a launch (made without the lock).
    pub(crate) fn all(&self) -> Vec<Arc<dyn GraphHold>> {
        let lists = self.inner.lock();
        if lists.captured.is_empty() && lists.updated.is_empty() {
            return Vec::new();
        }
        lists
            .captured
            .iter()
            .chain(lists.updated.iter().flat_map(|(_, h)| h))
            .cloned()
            .collect()
    }

    /// Replaces the holds of `group`'s last update with `holds`; returns the old ones, to be
    /// dropped by the caller after the lock (a hold's drop may take other leaf locks).
    #[must_use]
    pub(crate) fn replace_update(
        &self,
        group: TaskGroupHandle,
        holds: Vec<Arc<dyn GraphHold>>,
    ) -> Vec<Arc<dyn GraphHold>> {
        let mut lists = self.inner.lock();
        match lists.updated.iter_mut().find(|(g, _)| *g == group) {
            Some((_, old)) => std::mem::replace(old, holds),
            None => {
                lists.updated.push((group, holds));
                Vec::new()
            }
        }
    }
}

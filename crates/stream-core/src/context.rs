//! The current-stream context: per thread and per device, a stack of scoped guards.

use crate::hal::Backend;
use crate::stream::StreamInner;
use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;

type AnyStream = Arc<dyn Any + Send + Sync>;

crate::sync::thread::thread_local! {
    /// Device uid → stack of current streams (innermost last).
    static CONTEXT: RefCell<HashMap<u64, Vec<AnyStream>>> = RefCell::new(HashMap::new());
}

/// Keeps a stream current on this thread until dropped; the previous stream comes back then,
/// also while unwinding. Not `Send`: the context is per thread.
#[must_use = "the stream is current only while the guard lives"]
pub struct StreamGuard {
    device_uid: u64,
    depth: usize,
    _not_send: PhantomData<*const ()>,
}

impl std::fmt::Debug for StreamGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamGuard")
            .field("depth", &self.depth)
            .finish()
    }
}

pub(crate) fn push<B: Backend>(device_uid: u64, stream: Arc<StreamInner<B>>) -> StreamGuard {
    let depth = CONTEXT.with(|c| {
        let mut map = c.borrow_mut();
        let stack = map.entry(device_uid).or_default();
        stack.push(stream as AnyStream);
        stack.len() - 1
    });
    StreamGuard {
        device_uid,
        depth,
        _not_send: PhantomData,
    }
}

pub(crate) fn current<B: Backend>(device_uid: u64) -> Option<Arc<StreamInner<B>>> {
    CONTEXT.with(|c| {
        let map = c.borrow();
        let top = map.get(&device_uid)?.last()?.clone();
        top.downcast::<StreamInner<B>>().ok()
    })
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        // `try_with`: the thread-local may already be gone when a guard is dropped during
        // thread teardown.
        let _ = CONTEXT.try_with(|c| {
            if let Ok(mut map) = c.try_borrow_mut() {
                if let Some(stack) = map.get_mut(&self.device_uid) {
                    // Dropping a guard restores the context it found, even if inner guards were
                    // leaked or dropped out of order.
                    stack.truncate(self.depth);
                    if stack.is_empty() {
                        map.remove(&self.device_uid);
                    }
                }
            }
        });
    }
}

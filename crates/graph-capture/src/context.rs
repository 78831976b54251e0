//! `RunContext<B>`: what a capture closure or a runner's model gets — its stream, its
//! allocator, and tagged side streams forked from it and joined back at the end, as TorchAir's
//! graph passes insert them.

use crate::error::Result;
use braid_allocator::{CachingAllocator, DeviceBuffer};
use braid_stream_core::hal::Backend;
use braid_stream_core::{Device, Event, Priority, Stream, StreamGuard, TaskGroup};
use std::cell::RefCell;

/// The context work is issued in: eagerly on a stream, or into a capture whose origin is that
/// stream. The same model code runs in both (warm-up, eager fallback, capture).
///
/// [`RunContext::stream_switch`] is TorchAir's `npu_stream_switch` with its closure passes:
/// the first switch to a tag forks the tagged stream from the context's start (a wait on an
/// event recorded at the start — inside a capture this makes the stream join it), and at the
/// end every tagged stream used is joined back (recorded there, waited on by the origin), so
/// a capture never ends with an unjoined tagged stream.
pub struct RunContext<'a, B: Backend> {
    allocator: &'a CachingAllocator<B>,
    stream: Stream<B>,
    capturing: bool,
    start: RefCell<Option<Event<B>>>,
    forked: RefCell<Vec<Stream<B>>>,
    /// Task groups marked with [`RunContext::begin_task_group`], in order.
    task_groups: RefCell<Vec<TaskGroup>>,
    /// Keeps the run's stream current on this thread while the context lives.
    _current: StreamGuard,
}

impl<'a, B: Backend> RunContext<'a, B> {
    /// A context on `stream`. Inside a capture the start event is recorded at once (it
    /// creates no graph node); eagerly on the first switch.
    pub(crate) fn new(
        allocator: &'a CachingAllocator<B>,
        stream: Stream<B>,
        capturing: bool,
    ) -> Result<Self> {
        let ctx = RunContext {
            allocator,
            _current: stream.device().use_stream(&stream)?,
            stream,
            capturing,
            start: RefCell::new(None),
            forked: RefCell::new(Vec::new()),
            task_groups: RefCell::new(Vec::new()),
        };
        if capturing {
            ctx.start_event()?;
        }
        Ok(ctx)
    }

    /// A context for eager work on `stream` (what a runner gives its model outside a
    /// capture); `stream` is this thread's current stream while the context lives. Tagged side
    /// streams fork from the first switch's position; call [`RunContext::finish`] to join them
    /// back.
    pub fn eager(allocator: &'a CachingAllocator<B>, stream: &Stream<B>) -> Result<Self> {
        Self::new(allocator, stream.clone(), false)
    }

    /// Joins the tagged streams used so far back into the run's stream (done automatically at
    /// the end of captures and runner calls).
    pub fn finish(&self) -> Result<()> {
        self.join()
    }

    fn start_event(&self) -> Result<Event<B>> {
        if let Some(e) = self.start.borrow().as_ref() {
            return Ok(e.clone());
        }
        let e = self.stream.record_event()?;
        *self.start.borrow_mut() = Some(e.clone());
        Ok(e)
    }

    /// The stream of the run: the capture's origin, or the stream of an eager run.
    pub fn stream(&self) -> &Stream<B> {
        &self.stream
    }

    /// Opens a task group on the current stream when the run captures (nothing in an eager
    /// run, so one model serves warm-up, capture and replay): the operators up to
    /// [`RunContext::end_task_group`] form a group a later call can update without
    /// recapturing ([`crate::GraphRunner::run_updating`], [`crate::CapturedGraph::update`]).
    pub fn begin_task_group(&self) -> Result<()> {
        if !self.capturing {
            return Ok(());
        }
        Ok(self.current_stream().begin_task_group()?)
    }

    /// Closes the task group open on the current stream; the runner keeps it with the graph
    /// ([`crate::GraphRunner::run_updating`]).
    pub fn end_task_group(&self) -> Result<()> {
        if !self.capturing {
            return Ok(());
        }
        let group = self.current_stream().end_task_group()?;
        self.task_groups.borrow_mut().push(group);
        Ok(())
    }

    /// The task groups marked so far, taken.
    pub(crate) fn take_task_groups(&self) -> Vec<TaskGroup> {
        std::mem::take(&mut self.task_groups.borrow_mut())
    }

    /// This thread's current stream (the run's stream, or a tagged stream inside a switch).
    pub fn current_stream(&self) -> Stream<B> {
        self.stream.device().current_stream()
    }

    /// The device.
    pub fn device(&self) -> &Device<B> {
        self.stream.device()
    }

    /// The allocator.
    pub fn allocator(&self) -> &CachingAllocator<B> {
        self.allocator
    }

    /// Whether the work is being captured (rather than run eagerly).
    pub fn is_capturing(&self) -> bool {
        self.capturing
    }

    /// Allocates `size` bytes on the current stream (into the capture's pool when capturing).
    pub fn alloc(&self, size: u64) -> Result<DeviceBuffer<B>> {
        Ok(self.allocator.alloc(size, &self.current_stream())?)
    }

    /// Makes the tagged stream `tag` current until the guard drops (TorchAir's
    /// `npu_stream_switch(tag, priority)`), forking it from the start of the run the first
    /// time.
    ///
    /// Inside a capture the tagged stream therefore starts from the beginning of the capture,
    /// not from where this is called (TorchAir's rule): its work is ordered after nothing the
    /// capture did before. To read what the capture computed earlier, record a tagged event
    /// there and wait on it after the switch; without it every replay may read stale data.
    pub fn stream_switch(&self, tag: &str, priority: Priority) -> Result<StreamGuard> {
        let side = self.device().tagged_stream(tag, priority)?;
        if side != self.stream && !self.forked.borrow().contains(&side) {
            side.wait(&self.start_event()?)?;
            self.forked.borrow_mut().push(side.clone());
        }
        Ok(self.device().use_stream(&side)?)
    }

    /// TorchAir's `npu_record_tagged_stream`: `buffer` is also used on the tagged stream `tag`.
    pub fn record_tagged_stream(&self, buffer: &DeviceBuffer<B>, tag: &str) -> Result<()> {
        Ok(self.allocator.record_tagged_stream(buffer, tag)?)
    }

    /// Joins every tagged stream of the run back into the run's stream: the ones forked by
    /// [`RunContext::stream_switch`] and, inside a capture, every tagged stream that joined it
    /// some other way (a tagged event wait).
    pub(crate) fn join(&self) -> Result<()> {
        let mut streams: Vec<Stream<B>> = self.forked.borrow().clone();
        if self.capturing {
            for id in self.stream.capture_members() {
                if let Some(s) = self.device().stream(id) {
                    if s != self.stream && s.tag().is_some() && !streams.contains(&s) {
                        streams.push(s);
                    }
                }
            }
        }
        for s in &streams {
            self.stream.wait_stream(s)?;
        }
        self.forked.borrow_mut().clear();
        Ok(())
    }
}

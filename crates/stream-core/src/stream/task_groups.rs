//! Task groups on a capturing stream and the update scope that re-issues one
//! ([`Stream::begin_task_group`], [`Stream::end_task_group`], `Graph::update`).

use super::Stream;
use crate::error::{Result, StreamError};
use crate::hal::{Backend, Stream as _};
use crate::task_group::{self, TaskGroup};

impl<B: Backend> Stream<B> {
    /// Opens a task group on this capturing stream: the operators (built-in kernels, user
    /// operators, collective parts) submitted to it until [`Stream::end_task_group`] form a
    /// group that [`Graph::update`](crate::Graph::update) can re-issue with new parameters
    /// without recapturing (ACL's `aclmdlRICaptureTaskGrpBegin`). Copies, memsets and host
    /// work are refused inside a group ([`StreamError::NotAnOperatorInTaskGroup`]).
    ///
    /// Refused with [`StreamError::TaskGroupOutsideCapture`] when the stream does not capture and
    /// [`StreamError::TaskGroupAlreadyOpen`] when a group is open on it.
    pub fn begin_task_group(&self) -> Result<()> {
        let _turn = self.inner.submission_turn();
        let capture = {
            let st = self.device.inner.lock();
            let Some(cap) = st.ordering.capture_of(self.id()) else {
                return Err(StreamError::TaskGroupOutsideCapture { stream: self.id() });
            };
            if st.task_recording.contains_key(&self.id()) {
                return Err(StreamError::TaskGroupAlreadyOpen { stream: self.id() });
            }
            cap.id
        };
        self.inner.hal.begin_task_group()?;
        self.device.inner.lock().task_recording.insert(
            self.id(),
            task_group::Recording::Group {
                capture,
                ops: Vec::new(),
            },
        );
        tracing::debug!(
            stream = self.id().0,
            capture = capture.0,
            "task group begun"
        );
        Ok(())
    }

    /// Closes the task group open on this stream and returns it (ACL's
    /// `aclmdlRICaptureTaskGrpEnd`): pass it to [`Graph::update`](crate::Graph::update) of
    /// the graph this capture makes. Refused with [`StreamError::NoOpenTaskGroup`] when none
    /// is open.
    pub fn end_task_group(&self) -> Result<TaskGroup> {
        let _turn = self.inner.submission_turn();
        let capture = match self.device.inner.lock().task_recording.get(&self.id()) {
            Some(task_group::Recording::Group { capture, .. }) => *capture,
            _ => return Err(StreamError::NoOpenTaskGroup { stream: self.id() }),
        };
        let handle = self.inner.hal.end_task_group();
        let ops = match self.device.inner.lock().task_recording.remove(&self.id()) {
            Some(task_group::Recording::Group { ops, .. }) => ops,
            _ => Vec::new(),
        };
        let handle = handle?;
        tracing::debug!(
            stream = self.id().0,
            capture = capture.0,
            ops = ops.len(),
            "task group ended"
        );
        Ok(TaskGroup {
            device: self.device.id(),
            capture,
            handle,
            ops: ops.into(),
        })
    }

    /// Runs `f` with this stream in an update scope of `group`: the operators `f` submits
    /// are checked against the group's before the backend gets them; the scope is closed
    /// whatever `f` returns, and also when it panics (the panic is caught and handed back
    /// in [`UpdateOutcome::panic`] for the caller to resume once it is done). The backend
    /// commits the update when the whole group was re-issued, matching, and discards it
    /// otherwise ([`UpdateOutcome`]).
    pub(crate) fn task_update_scope(
        &self,
        group: &TaskGroup,
        f: impl FnOnce(&Stream<B>) -> Result<()>,
    ) -> Result<UpdateOutcome> {
        {
            let _turn = self.inner.submission_turn();
            let st = self.device.inner.lock();
            if st.ordering.capture_of(self.id()).is_some() {
                return Err(StreamError::ForbiddenDuringCapture {
                    call: "Graph::update",
                    stream: self.id(),
                });
            }
            if st.task_recording.contains_key(&self.id()) {
                return Err(StreamError::TaskGroupAlreadyOpen { stream: self.id() });
            }
            drop(st);
            self.inner.hal.begin_task_update(group.handle)?;
            self.device.inner.lock().task_recording.insert(
                self.id(),
                task_group::Recording::Update {
                    expected: group.ops.clone(),
                    seen: 0,
                    failed: false,
                    uses: Vec::new(),
                },
            );
        }
        // Caught so that a panicking closure leaves no update open on the stream (its later
        // copies, memsets and updates would be refused); the caller resumes it.
        let (result, panic) =
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(self))) {
                Ok(result) => (result, None),
                Err(panic) => (
                    Err(StreamError::TaskUpdateMismatch {
                        index: 0,
                        difference: "the update's closure panicked".into(),
                    }),
                    Some(panic),
                ),
            };
        let _turn = self.inner.submission_turn();
        let (seen, uses) = match self.device.inner.lock().task_recording.remove(&self.id()) {
            Some(task_group::Recording::Update { seen, uses, .. }) => (seen, uses),
            _ => (0, Vec::new()),
        };
        // Every operator before the group's count was checked before the backend got it, so
        // a complete update matches and stands (also when `f` then failed, or issued one too
        // many, which was refused); an incomplete one is discarded: nothing changes.
        let commit = seen == group.ops.len();
        let ended = self.inner.hal.end_task_update(commit);
        if commit {
            ended?;
        }
        let report = result.and_then(|()| {
            if commit {
                Ok(())
            } else {
                Err(StreamError::TaskUpdateMismatch {
                    index: seen,
                    difference: format!(
                        "count: the group has {} operators, the update issued {seen}; nothing \
                         was changed",
                        group.ops.len()
                    ),
                })
            }
        });
        Ok(UpdateOutcome {
            committed: commit,
            report,
            uses,
            panic,
        })
    }
}

/// How an update scope ended ([`Stream::task_update_scope`]).
pub(crate) struct UpdateOutcome {
    /// Whether the backend committed the update (the whole group was re-issued, matching).
    pub(crate) committed: bool,
    /// The error to report, if any (a committed update may still report `f`'s error).
    pub(crate) report: Result<()>,
    /// The ranges the re-issued operators use, each with its device's uid.
    pub(crate) uses: Vec<task_group::UpdateUse>,
    /// The panic of the closure, caught to close the scope, for the caller to resume.
    pub(crate) panic: Option<Box<dyn std::any::Any + Send>>,
}

//! Task groups (`aclmdlRICaptureTaskGrpBegin`/`End`, `aclmdlRICaptureTaskUpdateBegin`/`End`)
//! with CANN's rules (see braid-acl-sys's `acl/TASK_GROUPS.md`): a group is marked on a
//! capturing stream, updated on a stream that does not capture, and an update whose tasks
//! differ in count or type from the group's changes nothing.

use super::{sim_fail, Registry};
use crate::codes::*;
use crate::errmsg::{fail, Fail};
use braid_stream_core::hal::Stream as _;

impl Registry {
    pub fn task_grp_begin(&mut self, stream: usize) -> Result<(), Fail> {
        const CALL: &str = "aclmdlRICaptureTaskGrpBegin";
        let s = self.stream(CALL, stream)?;
        if s.capture.is_none() {
            return Err(fail(
                ACL_ERROR_RT_STREAM_NOT_CAPTURED,
                format!("{CALL}: the stream is not capturing"),
            ));
        }
        s.sim.begin_task_group().map_err(|e| sim_fail(CALL, e))
    }

    pub fn task_grp_end(&mut self, stream: usize) -> Result<usize, Fail> {
        const CALL: &str = "aclmdlRICaptureTaskGrpEnd";
        let s = self.stream(CALL, stream)?;
        if s.capture.is_none() {
            return Err(fail(
                ACL_ERROR_RT_STREAM_NOT_CAPTURED,
                format!("{CALL}: the stream is not capturing"),
            ));
        }
        let group = s.sim.end_task_group().map_err(|e| sim_fail(CALL, e))?;
        let handle = self.handle();
        self.task_groups.insert(handle, (s.device, group));
        Ok(handle)
    }

    pub fn task_update_begin(&mut self, stream: usize, group: usize) -> Result<(), Fail> {
        const CALL: &str = "aclmdlRICaptureTaskUpdateBegin";
        let s = self.stream(CALL, stream)?;
        let &(device, sim_group) = self.task_groups.get(&group).ok_or_else(|| {
            fail(
                ACL_ERROR_RT_INVALID_HANDLE,
                format!("{CALL}: invalid task group handle {group:#x}"),
            )
        })?;
        if device != s.device {
            return Err(fail(
                ACL_ERROR_RT_PARAM_INVALID,
                format!(
                    "{CALL}: the task group belongs to device {device}, the stream to device {}",
                    s.device
                ),
            ));
        }
        if s.capture.is_some() {
            return Err(fail(
                ACL_ERROR_RT_PARAM_INVALID,
                format!(
                    "{CALL}: the stream is capturing; update on a stream that does not capture"
                ),
            ));
        }
        s.sim
            .begin_task_update(sim_group)
            .map_err(|e| sim_fail(CALL, e))
    }

    pub fn task_update_end(&mut self, stream: usize) -> Result<(), Fail> {
        const CALL: &str = "aclmdlRICaptureTaskUpdateEnd";
        let s = self.stream(CALL, stream)?;
        s.sim.end_task_update(true).map_err(|e| sim_fail(CALL, e))
    }
}

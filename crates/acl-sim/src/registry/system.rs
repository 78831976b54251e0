//! What clients ask of the runtime and the SoC rather than of a stream or a buffer: the SoC's
//! name (`BRAID_ACL_SIM_SOC`) and capabilities, the process's and each context's system
//! parameters (`aclrtSetSysParamOpt`, `aclrtCtxSetSysParamOpt` and their getters), the
//! floating-point overflow mode, operator timeouts, and `aclFinalize`, which writes the
//! sanitizer's reports and the timeline where the environment asks
//! ([`crate::outputs`]).
//!
//! Rules, from CANN's API reference:
//! - a system parameter is one of `ACL_OPT_DETERMINISTIC`, `ACL_OPT_ENABLE_DEBUG_KERNEL`,
//!   `ACL_OPT_STRONG_CONSISTENCY` (0 to 2), else `ACL_ERROR_INVALID_PARAM`; every one is 0
//!   until set. A context's value, once set, is what `aclrtCtxGetSysParamOpt` answers for
//!   it; before, the process's;
//! - the overflow mode is `ACL_RT_OVERFLOW_MODE_SATURATION` or `ACL_RT_OVERFLOW_MODE_INFNAN`;
//!   the 910B family starts in INF/NAN mode (it supports it: `aclGetCannAttribute
//!   (ACL_CANN_ATTR_INF_NAN)` is 1). The simulator computes IEEE arithmetic (infinities and
//!   NaNs) in both modes: saturation is kept and reported, not modelled;
//! - operator timeouts are taken and the V2 call reports the value applied; the simulator's
//!   operators end in virtual time, so none ever times out;
//! - `aclFinalize` after `aclFinalize` is `ACL_ERROR_REPEAT_FINALIZE`, before `aclInit`
//!   `ACL_ERROR_UNINITIALIZE`. The simulated devices live as long as the process, so calls
//!   after it (torch_npu frees memory and streams at exit after finalizing) still work.

use super::{Registry, CURRENT};
use crate::codes::*;
use crate::errmsg::{fail, Fail};
use crate::outputs::Outputs;
use braid_acl_sys::acl::{
    ACL_CANN_ATTR_BF16, ACL_CANN_ATTR_INF_NAN, ACL_CANN_ATTR_JIT_COMPILE,
    ACL_DEVICE_INFO_AI_CORE_NUM, ACL_DEVICE_INFO_L2_SIZE, ACL_DEVICE_INFO_VECTOR_CORE_NUM,
    ACL_OPT_STRONG_CONSISTENCY, ACL_RT_OVERFLOW_MODE_INFNAN, ACL_RT_OVERFLOW_MODE_SATURATION,
};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The process-wide state of the runtime that belongs to no device.
pub(crate) struct System {
    soc: &'static str,
    /// `aclrtSetSysParamOpt` values, by option.
    params: BTreeMap<i32, i64>,
    /// `aclrtFloatOverflowMode`.
    overflow_mode: i32,
    outputs: Outputs,
    finalized: bool,
}

impl System {
    pub fn new(soc: &'static str, race_report: Option<PathBuf>, timeline: Option<PathBuf>) -> Self {
        System {
            soc,
            params: BTreeMap::new(),
            overflow_mode: ACL_RT_OVERFLOW_MODE_INFNAN,
            outputs: Outputs::new(race_report, timeline),
            finalized: false,
        }
    }

    /// Whether the devices record a timeline (the environment asked for one).
    pub fn records_timeline(&self) -> bool {
        self.outputs.wants_timeline()
    }
}

/// Checks `opt` is an `aclSysParamOpt`.
fn sys_param(call: &str, opt: i32) -> Result<i32, Fail> {
    if (0..=ACL_OPT_STRONG_CONSISTENCY).contains(&opt) {
        Ok(opt)
    } else {
        Err(fail(
            ACL_ERROR_INVALID_PARAM,
            format!("{call}: {opt} is not an aclSysParamOpt (0 to {ACL_OPT_STRONG_CONSISTENCY})"),
        ))
    }
}

impl Registry {
    /// `aclrtGetSocName`.
    pub fn soc_name(&self) -> &'static str {
        self.system.soc
    }

    /// `aclrtGetDevice`: the calling thread's current device.
    pub fn get_device(&self) -> Result<i32, Fail> {
        Ok(self.current("aclrtGetDevice")? as i32)
    }

    /// `aclrtGetCurrentContext`: the context of the calling thread's current device.
    pub fn current_context(&self) -> Result<usize, Fail> {
        let device = self.current("aclrtGetCurrentContext")?;
        Ok(self.dev(device)?.context)
    }

    /// `aclrtSetCurrentContext`: makes `context`'s device current on this thread (no
    /// reference is taken, as CANN's context switch takes none).
    pub fn set_current_context(&self, context: usize) -> Result<(), Fail> {
        let device = self
            .devices
            .iter()
            .position(|d| {
                d.as_ref()
                    .is_some_and(|d| d.context == context && d.refcount > 0)
            })
            .ok_or_else(|| {
                fail(
                    ACL_ERROR_RT_INVALID_HANDLE,
                    format!(
                        "aclrtSetCurrentContext: {context:#x} is not the context of a set device"
                    ),
                )
            })?;
        CURRENT.with(|c| c.set(Some(device)));
        Ok(())
    }

    /// `aclGetDeviceCapability`: the numbers of the simulator's device profile.
    pub fn device_capability(&mut self, device_id: u32, info: i32) -> Result<i64, Fail> {
        const CALL: &str = "aclGetDeviceCapability";
        let index = self.index_in_node(
            i32::try_from(device_id).unwrap_or(i32::MAX),
            ACL_ERROR_RT_INVALID_DEVICEID,
            |count| format!("{CALL}: invalid device id {device_id}: {count} devices"),
        )?;
        let profile = self.ensure_device(CALL, index)?.sim.profile();
        match info {
            ACL_DEVICE_INFO_AI_CORE_NUM => Ok(i64::from(profile.cube_units)),
            ACL_DEVICE_INFO_VECTOR_CORE_NUM => Ok(i64::from(profile.vector_units)),
            ACL_DEVICE_INFO_L2_SIZE => Err(fail(
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                format!(
                    "{CALL}: the simulator's device profile ({}) does not model an L2 cache",
                    profile.name
                ),
            )),
            other => Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!("{CALL}: {other} is not an aclDeviceInfo"),
            )),
        }
    }

    /// `aclGetCannAttribute`: the 910B family computes with infinities and NaNs and in
    /// bfloat16; nothing is compiled just in time.
    pub fn cann_attribute(&self, attr: i32) -> Result<i32, Fail> {
        match attr {
            ACL_CANN_ATTR_INF_NAN | ACL_CANN_ATTR_BF16 => Ok(1),
            ACL_CANN_ATTR_JIT_COMPILE => Ok(0),
            other => Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!("aclGetCannAttribute: {other} is not an aclCannAttr"),
            )),
        }
    }

    /// `aclrtSetSysParamOpt`.
    pub fn set_sys_param(&mut self, opt: i32, value: i64) -> Result<(), Fail> {
        let opt = sys_param("aclrtSetSysParamOpt", opt)?;
        self.system.params.insert(opt, value);
        Ok(())
    }

    /// `aclrtGetSysParamOpt`: the process's value (0 until set).
    pub fn sys_param(&self, opt: i32) -> Result<i64, Fail> {
        let opt = sys_param("aclrtGetSysParamOpt", opt)?;
        Ok(self.system.params.get(&opt).copied().unwrap_or(0))
    }

    /// `aclrtCtxSetSysParamOpt`: for the current context.
    pub fn ctx_set_sys_param(&mut self, opt: i32, value: i64) -> Result<(), Fail> {
        const CALL: &str = "aclrtCtxSetSysParamOpt";
        let opt = sys_param(CALL, opt)?;
        let device = self.current(CALL)?;
        self.dev_mut(device)?.context_params.insert(opt, value);
        Ok(())
    }

    /// `aclrtCtxGetSysParamOpt`: the current context's value, or the process's.
    pub fn ctx_sys_param(&self, opt: i32) -> Result<i64, Fail> {
        const CALL: &str = "aclrtCtxGetSysParamOpt";
        let opt = sys_param(CALL, opt)?;
        let device = self.current(CALL)?;
        let own = self.dev(device)?.context_params.get(&opt).copied();
        Ok(own.unwrap_or_else(|| self.system.params.get(&opt).copied().unwrap_or(0)))
    }

    /// `aclrtSetDeviceSatMode`.
    pub fn set_overflow_mode(&mut self, mode: i32) -> Result<(), Fail> {
        if mode != ACL_RT_OVERFLOW_MODE_SATURATION && mode != ACL_RT_OVERFLOW_MODE_INFNAN {
            return Err(fail(
                ACL_ERROR_INVALID_PARAM,
                format!("aclrtSetDeviceSatMode: {mode} is not ACL_RT_OVERFLOW_MODE_SATURATION (0) or ACL_RT_OVERFLOW_MODE_INFNAN (1)"),
            ));
        }
        self.system.overflow_mode = mode;
        Ok(())
    }

    /// `aclrtGetDeviceSatMode`.
    pub fn overflow_mode(&self) -> i32 {
        self.system.overflow_mode
    }

    /// `aclFinalize`: writes the outputs the environment asked for.
    pub fn finalize(&mut self) -> Result<(), Fail> {
        if !self.initialized {
            return Err(fail(
                ACL_ERROR_UNINITIALIZE,
                "aclFinalize: aclInit has not been called",
            ));
        }
        if self.system.finalized {
            return Err(fail(
                ACL_ERROR_REPEAT_FINALIZE,
                "aclFinalize: repeated finalization",
            ));
        }
        self.system.finalized = true;
        self.write_outputs()
    }

    /// Writes the sanitizer's reports and the timeline where the environment asks, once.
    pub fn write_outputs(&mut self) -> Result<(), Fail> {
        let streams = self.stream_names();
        let nodes: Vec<_> = self.nodes.made().cloned().collect();
        self.system
            .outputs
            .write(&nodes, &streams)
            .map_err(|e| fail(ACL_ERROR_FAILURE, format!("braid-acl-sim: {e}")))
    }
}

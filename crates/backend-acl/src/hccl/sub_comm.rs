//! `HcclCreateSubCommConfig`: some ranks of a communicator form one of their own.

use super::comm::AclComm;
use braid_stream_core::hal::HalError;

impl AclComm {
    /// This rank's handle of sub-communicator `sub_id` of this communicator, made of its
    /// ranks `ranks` (sub-rank `i` is rank `ranks[i]`), as sub-rank `sub_rank`
    /// (`HcclCreateSubCommConfig`, with the default config of `HcclCommConfigInit`). What
    /// HCCL refuses is its typed error (`HCCL_E_PARA` for a bad list); a library without the
    /// symbol is [`HalError::Unsupported`].
    pub fn create_sub_comm(
        &self,
        ranks: &[u32],
        sub_id: u64,
        sub_rank: u32,
    ) -> Result<AclComm, HalError> {
        const CALL: &str = "HcclCreateSubCommConfig";
        self.device.shared.bind()?;
        let raw = match self
            .hccl
            .calls
            .create_sub_comm(self.raw, ranks, sub_id, sub_rank)
        {
            None => {
                return Err(HalError::Unsupported(
                    "sub-communicators: this libhccl.so has no HcclCreateSubCommConfig",
                ))
            }
            Some(made) => self.hccl.result(CALL, made)?,
        };
        Ok(AclComm {
            hccl: self.hccl.clone(),
            device: self.device.clone(),
            raw,
            rank: sub_rank,
            ranks: ranks.len() as u32,
        })
    }
}

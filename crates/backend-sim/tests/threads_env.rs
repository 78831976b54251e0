//! `BRAID_SIM_THREADS` is read when a device is made; a value that is not a thread count is
//! refused by name at the first kernel launch in data mode. (A binary of its own: it sets the
//! process's environment.)

use braid_backend_sim::{SimConfig, SimDevice, THREADS_ENV};
use braid_stream_core::hal::{Device as _, HalError, Stream as _};
use braid_stream_core::kernel::{Kernel, TypedKernel};
use braid_stream_core::types::DeviceSlice;

fn unit_config() -> SimConfig {
    SimConfig::new().capacity(1 << 20)
}

#[test]
fn the_variable_is_honoured_or_refused_by_name() {
    std::env::set_var(THREADS_ENV, "many");
    let dev = SimDevice::new(unit_config());
    std::env::set_var(THREADS_ENV, "1");
    let ok = SimDevice::new(unit_config());
    std::env::remove_var(THREADS_ENV);
    let fill = |dev: &SimDevice| {
        let s = dev.create_stream(0).unwrap();
        let x = dev.alloc(16).unwrap();
        let k = TypedKernel::from(&Kernel::Fill {
            dst: DeviceSlice::new(x, 16),
            value: 3.0,
        });
        s.launch(&k, "fill")?;
        let mut back = [0u8; 16];
        // SAFETY: `back` is not touched until the synchronize below observes the copy.
        unsafe { s.memcpy_d2h(back.as_mut_ptr(), x, 16)? };
        s.synchronize()?;
        Ok::<_, HalError>(
            back.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect::<Vec<f32>>(),
        )
    };
    let err = fill(&dev).unwrap_err();
    assert!(
        matches!(&err, HalError::InvalidArgument(m) if m.contains("BRAID_SIM_THREADS=\"many\"")),
        "{err}"
    );
    assert_eq!(fill(&ok).unwrap(), vec![3.0; 4]);
}

//! `BRAID_SIM_THREADS` is read when a device is made; a value that is not a thread count is
//! refused by name at the first kernel launch in data mode. (A binary of its own: it sets the
//! process's environment.)

mod common;

use braid_backend_sim::{SimDevice, THREADS_ENV};
use braid_stream_core::hal::{Device as _, HalError, Stream as _};
use braid_stream_core::kernel::{Kernel, TypedKernel};
use common::*;

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
            dst: slice(x, 4),
            value: 3.0,
        });
        s.launch(&k, "fill").map(|()| download(&s, x, 4))
    };
    let err = fill(&dev).unwrap_err();
    assert!(
        matches!(&err, HalError::InvalidArgument(m) if m.contains("BRAID_SIM_THREADS=\"many\"")),
        "{err}"
    );
    assert_eq!(fill(&ok).unwrap(), vec![3.0; 4]);
}

//! Host readbacks decode the data type the device wrote: `HostReadback::wait_as`.

use braid_backend_sim::{SimBackend, SimConfig, SimDevice};
use braid_stream_core::{DType, Device, Kernel};

#[test]
fn wait_as_decodes_each_data_type() {
    let dev: Device<SimBackend> = Device::new(SimDevice::new(SimConfig::new())).unwrap();
    let s = dev.create_stream(0).unwrap();
    for dtype in DType::FLOATS {
        let mem = dev.alloc(4 * dtype.size()).unwrap();
        // 0.1 is not exact in any of the types: each rounds it its own way.
        s.launch(
            Kernel::Fill {
                dst: mem.slice(),
                value: 0.1,
            }
            .typed(dtype),
        )
        .unwrap();
        let readback = s.copy_d2h(mem.slice()).unwrap();
        assert_eq!(
            readback.wait_as(dtype).unwrap(),
            vec![dtype.round(0.1); 4],
            "{dtype}"
        );
    }
    // Read as f32, four f16 elements are two f32s of other values: the type matters.
    let mem = dev.alloc(8).unwrap();
    s.launch(
        Kernel::Fill {
            dst: mem.slice(),
            value: 1.0,
        }
        .typed(DType::F16),
    )
    .unwrap();
    let readback = s.copy_d2h(mem.slice()).unwrap();
    assert_eq!(readback.wait_as(DType::F16).unwrap(), vec![1.0; 4]);
    let as_f32 = readback.wait_as(DType::F32).unwrap();
    assert_eq!(as_f32, readback.wait_f32().unwrap());
    assert_eq!(as_f32.len(), 2);
    assert_ne!(as_f32, vec![1.0; 2]);
}

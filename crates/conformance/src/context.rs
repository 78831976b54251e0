//! The current-stream context: scoped guards, nesting, unwinding, per-thread isolation.

use crate::support::{all_equal, alloc_f32, download, fill, still_works};
use crate::{CaseError, Harness};
use braid_stream_core::hal::Backend;
use braid_stream_core::Kernel;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

/// B20: the current stream is restored after leaving each `use_stream` scope, nested.
pub fn nested_guards_restore_on_drop<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let default = device.default_stream();
    let (s1, s2) = (device.create_stream(0)?, device.create_stream(0)?);
    ensure_eq!(
        device.current_stream(),
        default,
        "with no guard the current stream is the default"
    );
    {
        let _g1 = device.use_stream(&s1)?;
        ensure_eq!(device.current_stream(), s1, "inside the first guard");
        {
            let _g2 = device.use_stream(&s2)?;
            ensure_eq!(device.current_stream(), s2, "inside the nested guard");
            {
                let _g3 = device.use_stream(&s1)?;
                ensure_eq!(device.current_stream(), s1, "the same stream nested again");
            }
            ensure_eq!(device.current_stream(), s2, "after the innermost guard");
        }
        ensure_eq!(device.current_stream(), s1, "after the nested guard");
        let g4 = device.use_stream(&default)?;
        ensure_eq!(
            device.current_stream(),
            default,
            "the default stream can be made current"
        );
        drop(g4);
        ensure_eq!(device.current_stream(), s1, "after an explicit drop");
    }
    ensure_eq!(device.current_stream(), default, "after every guard");
    Ok(())
}

/// B20: guards restore the previous stream also while unwinding from a panic.
pub fn guards_restore_while_unwinding<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let default = device.default_stream();
    let (s1, s2) = (device.create_stream(0)?, device.create_stream(0)?);
    let outcome = catch_unwind(AssertUnwindSafe(|| -> Result<(), CaseError> {
        let _g = device.use_stream(&s1)?;
        ensure_eq!(device.current_stream(), s1, "inside the guard");
        // `resume_unwind` unwinds without running the panic hook (no noise in test output).
        resume_unwind(Box::new("unwinding through a stream guard"));
    }));
    match outcome {
        Err(_) => {}
        Ok(Err(e)) => return Err(e),
        Ok(Ok(())) => return Err(CaseError::new("the closure should have unwound")),
    }
    ensure_eq!(
        device.current_stream(),
        default,
        "after unwinding out of a guard"
    );

    let _outer = device.use_stream(&s1)?;
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let _inner = device.use_stream(&s2);
        let _innermost = device.use_stream(&s1);
        resume_unwind(Box::new("unwinding through nested guards"));
    }));
    ensure!(outcome.is_err(), "the nested closure should have unwound");
    ensure_eq!(
        device.current_stream(),
        s1,
        "the outer guard's stream after unwinding nested guards"
    );
    drop(_outer);
    still_works(&device)
}

/// B20 (threads): the current stream is per thread: another thread sees the default stream
/// while this one has a guard, and its own guards do not leak back.
pub fn current_stream_is_per_thread<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let default = device.default_stream();
    let (s1, s2) = (device.create_stream(0)?, device.create_stream(0)?);
    let _g = device.use_stream(&s1)?;
    let other = std::thread::scope(|scope| {
        scope
            .spawn(|| -> Result<(), CaseError> {
                ensure_eq!(
                    device.current_stream(),
                    default,
                    "another thread's current stream"
                );
                let _g2 = device.use_stream(&s2)?;
                ensure_eq!(device.current_stream(), s2, "the other thread's own guard");
                Ok(())
            })
            .join()
            .unwrap_or_else(|_| Err(CaseError::new("the other thread panicked")))
    });
    other?;
    ensure_eq!(
        device.current_stream(),
        s1,
        "this thread after the other one used a guard"
    );
    Ok(())
}

/// TorchAir `npu_stream_switch(tag, priority)`: `stream_switch` makes the tagged stream current
/// until the guard drops.
pub fn stream_switch_makes_tagged_stream_current<B: Backend>(
    h: &Harness<B>,
) -> Result<(), CaseError> {
    let device = h.device()?;
    let default = device.default_stream();
    {
        let _g = device.stream_switch("side", 0)?;
        let current = device.current_stream();
        ensure_eq!(current.tag(), Some("side"), "tag of the current stream");
        ensure!(
            !current.is_default(),
            "stream_switch must not give the default stream"
        );
        ensure_eq!(
            current,
            device.tagged_stream("side", 0)?,
            "current is the tagged stream"
        );
        {
            let _g2 = device.stream_switch("other", 0)?;
            ensure_eq!(
                device.current_stream().tag(),
                Some("other"),
                "nested stream_switch"
            );
        }
        ensure_eq!(
            device.current_stream().tag(),
            Some("side"),
            "after the nested switch"
        );
    }
    ensure_eq!(device.current_stream(), default, "after the switch scope");
    Ok(())
}

/// B20: work submitted to `current_stream()` inside a scope goes to the scoped stream (its
/// position advances; others do not) and computes correctly.
pub fn work_follows_the_current_stream<B: Backend>(h: &Harness<B>) -> Result<(), CaseError> {
    let device = h.device()?;
    let s1 = device.create_stream(0)?;
    let mem = alloc_f32(&device, 64)?;
    let default_before = device.default_stream().position();
    let pos = {
        let _g = device.use_stream(&s1)?;
        let current = device.current_stream();
        fill(&current, mem.slice(), 2.0)?;
        current.launch(&Kernel::Scale {
            src: mem.slice(),
            dst: mem.slice(),
            factor: 4.0,
        })?
    };
    ensure_eq!(pos.stream, s1.id(), "work inside the scope ran on");
    ensure_eq!(
        device.default_stream().position(),
        default_before,
        "default stream position"
    );
    all_equal(&download(&s1, mem.slice())?, 8.0, "data")?;
    Ok(())
}

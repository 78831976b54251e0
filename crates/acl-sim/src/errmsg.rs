//! `aclGetRecentErrMsg`: the text of the calling thread's last failure, fetched and cleared;
//! and, where `BRAID_ACL_SIM_ERROR_LOG` names a file, every refusal appended to it as one line
//! (`<code> <message>`, the message starting with the call), so a client's test harness can
//! say which call failed even when the client swallowed the text. The expected answers of a
//! polling call ([`Fail::polled`]) are not refusals and stay out of the log.

use braid_stream_core::sync::GlobalMutex;
use std::cell::RefCell;
use std::ffi::{c_char, CString};
use std::io::Write;
use std::sync::OnceLock;

thread_local! {
    /// The message of the last failed call on this thread, not yet fetched.
    static PENDING: RefCell<Option<String>> = const { RefCell::new(None) };
    /// The string the last `aclGetRecentErrMsg` returned (valid until the next call).
    static RETURNED: RefCell<Option<CString>> = const { RefCell::new(None) };
}

/// A failed call: its code and the text `aclGetRecentErrMsg` will return.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fail {
    pub code: i32,
    pub message: String,
    /// Whether it is a refusal, appended to the error log (not an expected answer of a
    /// polling call, [`Fail::polled`]).
    pub refusal: bool,
}

/// A failure with `code` and `message`.
pub(crate) fn fail(code: i32, message: impl Into<String>) -> Fail {
    Fail {
        code,
        message: message.into(),
        refusal: true,
    }
}

impl Fail {
    /// The same failure as an expected answer of a polling call (`aclrtProcessReport` polled
    /// with nothing to run): returned and kept for `aclGetRecentErrMsg`, but not appended to
    /// the error log, where a client polling in a loop would bury the real refusals (CANN
    /// logs these answers at info level only).
    pub(crate) fn polled(self) -> Self {
        Fail {
            refusal: false,
            ..self
        }
    }
}

/// Runs `f`, turning a panic inside it into `ACL_ERROR_INTERNAL_ERROR` with the panic's text:
/// a bug in the simulator must fail the one call, not abort the host process (a panic cannot
/// cross the C boundary, so it would end the process with no message the client could read).
pub(crate) fn guarded<R>(f: impl FnOnce() -> Result<R, Fail>) -> Result<R, Fail> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let text = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without text".to_string());
        tracing::error!(panic = %text, "braid-acl-sim: internal error");
        Err(fail(
            crate::codes::ACL_ERROR_INTERNAL_ERROR,
            format!("braid-acl-sim internal error (please report it): {text}"),
        ))
    })
}

/// Turns a result into a return code, keeping the message of a failure for this thread.
pub(crate) fn ret(r: Result<(), Fail>) -> i32 {
    match r {
        Ok(()) => crate::codes::ACL_SUCCESS,
        Err(f) => {
            tracing::debug!(code = f.code, message = %f.message, "acl-sim call failed");
            if f.refusal {
                log_failure(&f);
            }
            PENDING.with(|p| *p.borrow_mut() = Some(f.message));
            f.code
        }
    }
}

/// Moves the pending message into the returned slot and gives its pointer (null if none).
pub(crate) fn take_recent() -> *const c_char {
    let msg = PENDING.with(|p| p.borrow_mut().take());
    RETURNED.with(|r| {
        let mut r = r.borrow_mut();
        *r = msg.map(|m| CString::new(m.replace('\0', " ")).unwrap_or_default());
        r.as_ref().map_or(std::ptr::null(), |c| c.as_ptr())
    })
}

/// Appends `f` to the file `BRAID_ACL_SIM_ERROR_LOG` names, if any (opened once; a file that
/// cannot be opened is reported once through `tracing` and not retried).
fn log_failure(f: &Fail) {
    static LOG: OnceLock<Option<GlobalMutex<std::fs::File>>> = OnceLock::new();
    let log = LOG.get_or_init(|| {
        let path = std::env::var_os(crate::settings::ERROR_LOG_ENV).filter(|p| !p.is_empty())?;
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
        {
            Ok(file) => Some(GlobalMutex::new(file)),
            Err(e) => {
                tracing::warn!(path = ?path, error = %e, "braid-acl-sim cannot open its error log");
                None
            }
        }
    });
    if let Some(file) = log {
        let mut file = file.lock();
        // A failed write of a diagnostic has nowhere to go.
        let _ = writeln!(file, "{} {}", f.code, f.message.replace('\n', " "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_internal_error_with_its_text() {
        let r: Result<(), Fail> = guarded(|| panic!("index 9 out of range"));
        let f = r.unwrap_err();
        assert_eq!(f.code, crate::codes::ACL_ERROR_INTERNAL_ERROR);
        assert!(f.message.contains("index 9 out of range"), "{}", f.message);
        let formatted: Result<(), Fail> = guarded(|| panic!("rank {} of {}", 3, 4));
        assert!(formatted.unwrap_err().message.contains("rank 3 of 4"));
        assert_eq!(guarded(|| Ok(7)), Ok(7));
    }
}

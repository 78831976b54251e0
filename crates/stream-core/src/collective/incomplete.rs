//! A host wait on a collective that some ranks never issued: the typed error a backend that
//! holds a rank's stream back until every part is in (the simulator) gives a synchronize,
//! query or event wait that cannot complete.

use std::fmt;
use std::time::Duration;

/// A host wait (synchronize of a stream, an event or a device) on a collective whose parts
/// some ranks have not issued: it would wait forever. `missing` names those ranks.
///
/// A backend gives it at once when no other host thread can issue the missing parts (the
/// calling thread is the only one that ever drove those ranks and it is blocked), and after
/// its collective timeout otherwise (`waited` is then how long it waited): a rank that has
/// never issued a part may belong to a thread that has not reached its first call yet, which
/// no backend can tell from a rank nobody will drive.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Incomplete {
    /// What would wait and on what (the stream or event, the call, the communicator).
    pub what: String,
    /// The ranks whose parts are missing (empty when every rank issued the call but a
    /// rank's stream has not reached it yet).
    pub missing: Vec<u32>,
    /// How long the call waited for other threads' parts before failing, if it waited.
    pub waited: Option<Duration>,
    /// The backend's collective timeout (HCCL's `HCCL_EXEC_TIMEOUT`).
    pub timeout: Duration,
}

impl fmt::Display for Incomplete {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.what)?;
        match self.waited {
            Some(w) => write!(
                f,
                " (after waiting {w:?} for the other ranks: the collective timeout is {:?})",
                self.timeout
            ),
            None => write!(
                f,
                " (no other host thread has driven the missing rank(s): issue their parts \
                 before synchronizing)"
            ),
        }
    }
}

impl std::error::Error for Incomplete {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_says_whether_it_waited() {
        let mut e = Incomplete {
            what: "stream 0 of device 0 would wait forever".into(),
            missing: vec![2],
            waited: None,
            timeout: Duration::from_secs(5),
        };
        assert!(e.to_string().contains("issue their parts"), "{e}");
        e.waited = Some(Duration::from_secs(5));
        assert!(
            e.to_string().contains("the collective timeout is 5s"),
            "{e}"
        );
    }
}

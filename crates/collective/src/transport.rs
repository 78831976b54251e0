//! The seam through which a root info travels from rank 0 to the other ranks of a
//! multi-process communicator: [`RootInfoTransport`], and (feature `tcp`, on by default)
//! `TcpRootInfoTransport`, one implementation over a TCP listener.
//!
//! braid never carries collective traffic itself (that is HCCL's transport); it only needs the
//! 4,108 opaque bytes of `HcclGetRootInfo` to reach every rank before `HcclCommInitRootInfo`.
//! Programs that already have a store (a launcher's key-value store, MPI, a shared file system)
//! implement the trait over it; `TcpRootInfoTransport` is enough when rank 0's address is
//! known to the others. The trait itself needs no async runtime: without the `tcp` feature
//! this crate compiles neither tokio nor async-trait.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use braid_stream_core::collective::RootInfo;

#[cfg(feature = "tcp")]
mod tcp;
#[cfg(feature = "tcp")]
pub use tcp::TcpRootInfoTransport;

/// Why a root info could not be published or fetched.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The other side did not answer in time.
    #[error("timed out after {waited:?} at {addr}: {detail}")]
    Timeout {
        /// The address being served or fetched from.
        addr: SocketAddr,
        /// How long it waited.
        waited: Duration,
        /// What was still missing.
        detail: String,
    },
    /// A socket operation failed.
    #[error("{during} at {addr} failed: {source}")]
    Io {
        /// The address being served or fetched from.
        addr: SocketAddr,
        /// The operation (`binding`, `connecting`, ...).
        during: &'static str,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The peer answered with something other than a root info.
    #[error("{addr} did not send a root info: {reason}")]
    NotRootInfo {
        /// The peer's address.
        addr: SocketAddr,
        /// What was wrong (magic, length, truncation).
        reason: String,
    },
    /// Rank 0's publication does not serve the rank that fetched (rank 0 itself, or a rank
    /// past the ones it was bound for).
    #[error("{addr} does not serve rank {rank}: its publication serves ranks 1 to {ranks}")]
    RankNotServed {
        /// Rank 0's address.
        addr: SocketAddr,
        /// The rank that fetched.
        rank: u32,
        /// The highest rank rank 0 serves.
        ranks: u32,
    },
    /// A call made on the wrong side of the transport: `publish` on a fetching side, or
    /// `fetch` on the publishing side before anything was published.
    #[error("{0}")]
    WrongSide(String),
}

/// Carries a root info from rank 0 to the other ranks of a communicator. Object-safe: a
/// program can hold a `Box<dyn RootInfoTransport>` chosen at run time.
///
/// The methods are written as the `async-trait` crate writes an `async fn` (a boxed `Send`
/// future borrowing the arguments), so an implementation can use `#[async_trait]` on its
/// `impl` block, or return `Box::pin(async move { .. })` without it.
pub trait RootInfoTransport: Send + Sync {
    /// On rank 0: makes `info` available to the other ranks. Implementations say whether it
    /// returns at once or once the ranks have it; neither waits longer than `timeout`.
    fn publish<'life0, 'life1, 'async_trait>(
        &'life0 self,
        info: &'life1 RootInfo,
        timeout: Duration,
    ) -> Pin<Box<dyn Future<Output = Result<(), TransportError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait;

    /// On the other ranks: waits at most `timeout` for rank 0's root info.
    fn fetch<'life0, 'async_trait>(
        &'life0 self,
        timeout: Duration,
    ) -> Pin<Box<dyn Future<Output = Result<RootInfo, TransportError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait;
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_stream_core::collective::ROOT_INFO_BYTES;
    use std::sync::Mutex;

    /// A transport over a shared slot, written without `async-trait` (as a program without
    /// the `tcp` feature would write one over its own store).
    struct Slot(Mutex<Option<RootInfo>>);

    impl RootInfoTransport for Slot {
        fn publish<'life0, 'life1, 'async_trait>(
            &'life0 self,
            info: &'life1 RootInfo,
            _timeout: Duration,
        ) -> Pin<Box<dyn Future<Output = Result<(), TransportError>> + Send + 'async_trait>>
        where
            'life0: 'async_trait,
            'life1: 'async_trait,
            Self: 'async_trait,
        {
            Box::pin(async move {
                *self.0.lock().unwrap() = Some(info.clone());
                Ok(())
            })
        }

        fn fetch<'life0, 'async_trait>(
            &'life0 self,
            timeout: Duration,
        ) -> Pin<Box<dyn Future<Output = Result<RootInfo, TransportError>> + Send + 'async_trait>>
        where
            'life0: 'async_trait,
            Self: 'async_trait,
        {
            Box::pin(async move {
                self.0.lock().unwrap().clone().ok_or_else(|| {
                    TransportError::WrongSide(format!("nothing published within {timeout:?}"))
                })
            })
        }
    }

    #[test]
    fn a_transport_without_async_trait_works_as_a_boxed_trait_object() {
        let transport: Box<dyn RootInfoTransport> = Box::new(Slot(Mutex::new(None)));
        let wait = Duration::from_millis(10);
        let early = futures::executor::block_on(transport.fetch(wait)).unwrap_err();
        assert!(early.to_string().contains("nothing published"), "{early}");
        let info = RootInfo::from_bytes(&[3; ROOT_INFO_BYTES]).unwrap();
        futures::executor::block_on(transport.publish(&info, wait)).unwrap();
        assert_eq!(
            futures::executor::block_on(transport.fetch(wait)).unwrap(),
            info
        );
    }
}

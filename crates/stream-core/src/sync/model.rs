//! `parking_lot`'s lock API over `shuttle`'s primitives (the `model-check` feature): the same
//! calls compile in both builds, and a model checker sees every acquisition.

use shuttle::sync as shuttle_sync;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::PoisonError;
use std::time::Duration;

/// A mutual-exclusion lock the model checker sees (`parking_lot::Mutex` in a normal build).
#[derive(Default)]
pub struct Mutex<T: ?Sized>(shuttle_sync::Mutex<T>);

/// The guard of a [`Mutex`].
pub struct MutexGuard<'a, T: ?Sized>(
    // `Some` except inside `Condvar::wait`, which hands shuttle the guard by value.
    Option<shuttle_sync::MutexGuard<'a, T>>,
);

impl<T> Mutex<T> {
    /// A new unlocked mutex holding `value`.
    pub const fn new(value: T) -> Self {
        Mutex(shuttle_sync::Mutex::new(value))
    }

    /// The value, consuming the mutex.
    pub fn into_inner(self) -> T {
        self.0.into_inner().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Locks the mutex, blocking until it is free.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        MutexGuard(Some(self.0.lock().unwrap_or_else(PoisonError::into_inner)))
    }

    /// The value, through an exclusive borrow (no locking).
    pub fn get_mut(&mut self) -> &mut T {
        self.0.get_mut().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.0
            .as_deref()
            .expect("a mutex guard is held outside Condvar::wait")
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0
            .as_deref_mut()
            .expect("a mutex guard is held outside Condvar::wait")
    }
}

/// A reader-writer lock the model checker sees (`parking_lot::RwLock` in a normal build).
#[derive(Default)]
pub struct RwLock<T: ?Sized>(shuttle_sync::RwLock<T>);

/// The shared guard of a [`RwLock`].
pub type RwLockReadGuard<'a, T> = shuttle_sync::RwLockReadGuard<'a, T>;

/// The exclusive guard of a [`RwLock`].
pub type RwLockWriteGuard<'a, T> = shuttle_sync::RwLockWriteGuard<'a, T>;

impl<T> RwLock<T> {
    /// A new unlocked lock holding `value`.
    pub const fn new(value: T) -> Self {
        RwLock(shuttle_sync::RwLock::new(value))
    }

    /// The value, consuming the lock.
    pub fn into_inner(self) -> T {
        self.0.into_inner().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T: ?Sized> RwLock<T> {
    /// Takes the lock shared, blocking while it is held exclusively.
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the lock exclusively, blocking while it is held.
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        self.0.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The value, through an exclusive borrow (no locking).
    pub fn get_mut(&mut self) -> &mut T {
        self.0.get_mut().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A condition variable the model checker sees (`parking_lot::Condvar` in a normal build).
#[derive(Default)]
pub struct Condvar(shuttle_sync::Condvar);

/// Whether a [`Condvar::wait_for`] timed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitTimeoutResult(bool);

impl WaitTimeoutResult {
    /// Whether the wait timed out (never under the model checker: a wait that no
    /// notification ends is a deadlock it reports).
    pub fn timed_out(self) -> bool {
        self.0
    }
}

impl Condvar {
    /// A new condition variable.
    pub const fn new() -> Self {
        Condvar(shuttle_sync::Condvar::new())
    }

    /// Releases `guard`'s lock, waits for a notification, and takes the lock again.
    pub fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
        let held = guard
            .0
            .take()
            .expect("a mutex guard is held outside Condvar::wait");
        guard.0 = Some(self.0.wait(held).unwrap_or_else(PoisonError::into_inner));
    }

    /// [`Condvar::wait`] for at most `timeout` (the model checker explores the notified
    /// outcome only).
    pub fn wait_for<T>(
        &self,
        guard: &mut MutexGuard<'_, T>,
        timeout: Duration,
    ) -> WaitTimeoutResult {
        let held = guard
            .0
            .take()
            .expect("a mutex guard is held outside Condvar::wait");
        let (held, result) = self
            .0
            .wait_timeout(held, timeout)
            .unwrap_or_else(PoisonError::into_inner);
        guard.0 = Some(held);
        WaitTimeoutResult(result.timed_out())
    }

    /// Wakes one waiter.
    pub fn notify_one(&self) {
        self.0.notify_one();
    }

    /// Wakes every waiter.
    pub fn notify_all(&self) {
        self.0.notify_all();
    }
}

impl fmt::Debug for Condvar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Condvar")
    }
}

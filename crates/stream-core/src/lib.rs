//! braid's backend interface and front layer.
#![warn(missing_docs)]

pub mod clock;
pub mod error;
pub mod hal;
pub mod kernel;
pub mod ordering;
pub mod types;

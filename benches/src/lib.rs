//! criterion benches of braid; see `benches/`.

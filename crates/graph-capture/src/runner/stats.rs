//! Counters of a [`crate::GraphRunner`].

/// What a runner did, by call.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct RunnerStats {
    /// Calls.
    pub calls: u64,
    /// Calls run eagerly as warm-up of a key.
    pub warmups: u64,
    /// Graphs captured (first captures of keys; recaptures are counted apart).
    pub captures: u64,
    /// Calls served by replaying a captured graph (the capturing call not included).
    pub replays: u64,
    /// Recaptures because a mutated input (KV cache) moved.
    pub recaptures_mutated_input: u64,
    /// Recaptures because a parameter moved.
    pub recaptures_parameter: u64,
    /// Calls run eagerly because the capture limit was reached.
    pub eager_fallbacks: u64,
    /// Task groups updated instead of recapturing ([`crate::GraphRunner::run_updating`]).
    pub updates: u64,
}

impl RunnerStats {
    /// All recaptures.
    pub fn recaptures(&self) -> u64 {
        self.recaptures_mutated_input + self.recaptures_parameter
    }
}

//! The collective algorithms the cost model knows, and the links each uses.

/// A collective algorithm the simulator models (see the module documentation).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Algorithm {
    /// Ring: `p − 1` steps (twice for all-reduce), one link per rank per step.
    Ring,
    /// Recursive halving (reduce-scatter) then doubling (all-gather), power-of-two ranks.
    RecursiveHalvingDoubling,
    /// Every rank exchanges with all `p − 1` peers at once over its direct links.
    Mesh,
    /// Binomial tree from the root.
    BinomialTree,
    /// Scatter from the root, then a ring all-gather.
    ScatterAllGather,
    /// Pairwise exchange: in step `k` rank `i` sends to `i + k` and receives from `i − k`.
    Pairwise,
    /// Blocks relayed around the ring, each rank forwarding what is not yet delivered.
    RingRelay,
    /// One message between two ranks.
    Direct,
    /// HCCL's all-reduce across servers ([`TwoLevel`](super::TwoLevel)): intra-server
    /// reduce-scatter (mesh), inter-server all-reduce of each shard, intra-server all-gather
    /// (mesh).
    TwoLevel {
        /// Ranks in each server.
        per_server: u32,
    },
}

impl Algorithm {
    /// A short name for reports.
    pub const fn name(self) -> &'static str {
        match self {
            Algorithm::Ring => "ring",
            Algorithm::RecursiveHalvingDoubling => "recursive halving-doubling",
            Algorithm::Mesh => "mesh",
            Algorithm::BinomialTree => "binomial tree",
            Algorithm::ScatterAllGather => "scatter + all-gather",
            Algorithm::Pairwise => "pairwise",
            Algorithm::RingRelay => "ring relay",
            Algorithm::Direct => "direct",
            Algorithm::TwoLevel { .. } => "two-level (intra mesh, inter-server)",
        }
    }
}

impl Algorithm {
    /// The ordered pairs of ranks (sender, receiver) among `ranks` whose links the algorithm
    /// uses (`root` for the broadcast algorithms; `Direct` is a single pair the caller knows
    /// and gives no pairs here). The simulator occupies each pair's link for the whole
    /// collective.
    pub fn pairs(self, ranks: u32, root: u32) -> Vec<(u32, u32)> {
        let p = ranks;
        let ring = || (0..p).map(|r| (r, (r + 1) % p)).collect::<Vec<_>>();
        let tree = || {
            let mut out = Vec::new();
            let mut step = 1;
            while step < p {
                for r in 0..step.min(p) {
                    if r + step < p {
                        out.push(((r + root) % p, (r + step + root) % p));
                    }
                }
                step *= 2;
            }
            out
        };
        let mut pairs = match self {
            _ if p < 2 => Vec::new(),
            Algorithm::Ring | Algorithm::RingRelay => ring(),
            Algorithm::RecursiveHalvingDoubling => {
                let mut out = Vec::new();
                let mut bit = 1;
                while bit < p {
                    out.extend((0..p).map(|r| (r, r ^ bit)).filter(|&(_, q)| q < p));
                    bit *= 2;
                }
                out
            }
            Algorithm::Mesh | Algorithm::Pairwise => (0..p)
                .flat_map(|a| (0..p).filter(move |&b| b != a).map(move |b| (a, b)))
                .collect(),
            Algorithm::BinomialTree => tree(),
            Algorithm::ScatterAllGather => {
                let mut out = tree();
                out.extend(ring());
                out
            }
            Algorithm::Direct => Vec::new(),
            Algorithm::TwoLevel { per_server } => {
                let g = per_server.max(1);
                (0..p)
                    .flat_map(|a| {
                        (0..p)
                            .filter(move |&b| b != a && (a / g == b / g || a % g == b % g))
                            .map(move |b| (a, b))
                    })
                    .collect()
            }
        };
        pairs.sort_unstable();
        pairs.dedup();
        pairs
    }
}

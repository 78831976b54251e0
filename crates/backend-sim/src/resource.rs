//! Contended hardware resources: a pool of identical units with a capacity, and the usage
//! profile over virtual time of the work placed on it.
//!
//! An op demands some number of units for its duration; it starts at the earliest time at or
//! after it is ready at which that many units are free for the whole duration (first come,
//! first served, with backfilling into earlier gaps). With capacity one and demand one this is
//! the classic "one op at a time" resource.
//!
//! The usage profile is a step function kept as breakpoints `(time, units in use from this
//! time on)` in a treap (a randomized balanced search tree keyed by time). Each node also
//! carries the least and the greatest level of its subtree and a pending level increase for
//! its children, so that the device can run arbitrarily far ahead of the host without making
//! any call slower: finding a level at a time, the next breakpoint whose level is above (or
//! at most) a limit, inserting a breakpoint, raising the level over a time range and
//! forgetting the past all take O(log n) expected time in the number n of breakpoints.
//! Placing an op costs O(log n) per gap that it tries and that is too short for it; a busy run
//! is skipped in one step however many breakpoints it holds. The breakpoints kept are exactly
//! those of a plain sorted list with the same operations (the test-only `reference::Pool`,
//! which the property tests below compare against).

/// "No node".
const NIL: u32 = u32::MAX;

/// One breakpoint and the aggregates of its subtree. `level`, `min` and `max` are true values
/// once the pending increases (`add`) of all the node's ancestors are applied.
#[derive(Clone, Debug)]
struct Node {
    time: u64,
    level: u32,
    min: u32,
    max: u32,
    /// Increase not yet applied to the children.
    add: u32,
    left: u32,
    right: u32,
    prio: u32,
}

/// Usage of one resource over time: a step function of breakpoints. Before the first
/// breakpoint, and after the last one (whose level is always zero), nothing is in use.
#[derive(Clone, Debug)]
pub(crate) struct Pool {
    capacity: u32,
    nodes: Vec<Node>,
    /// Slots of `nodes` free for reuse.
    spare: Vec<u32>,
    root: u32,
    /// Scratch list of the nodes on a path, to update their aggregates bottom-up.
    path: Vec<u32>,
    /// Time of the last breakpoint (nothing is in use from it on), if any.
    last: Option<u64>,
    /// State of the priority generator (xorshift32; the shape of the tree never affects
    /// results).
    seed: u32,
}

impl Pool {
    /// A pool of `capacity` units (zero is treated as one).
    pub fn new(capacity: u32) -> Self {
        Pool {
            capacity: capacity.max(1),
            nodes: Vec::new(),
            spare: Vec::new(),
            root: NIL,
            path: Vec::new(),
            last: None,
            seed: 0x9E37_79B9,
        }
    }

    /// The number of units an op asking for `demand` actually gets: at least one, at most the
    /// capacity.
    pub fn clamp(&self, demand: u32) -> u32 {
        demand.clamp(1, self.capacity)
    }

    /// `v` raised by `add`, at most the capacity (levels saturate at the capacity, as in
    /// [`Pool::reserve`]).
    fn raise(&self, v: u32, add: u32) -> u32 {
        v.saturating_add(add).min(self.capacity)
    }

    fn node(&self, x: u32) -> &Node {
        &self.nodes[x as usize]
    }

    fn node_mut(&mut self, x: u32) -> &mut Node {
        &mut self.nodes[x as usize]
    }

    /// A detached node at `time` with `level`.
    fn new_node(&mut self, time: u64, level: u32) -> u32 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 17;
        self.seed ^= self.seed << 5;
        let node = Node {
            time,
            level,
            min: level,
            max: level,
            add: 0,
            left: NIL,
            right: NIL,
            prio: self.seed,
        };
        match self.spare.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    /// Raises every level in the subtree `x` by `v`.
    fn apply(&mut self, x: u32, v: u32) {
        let cap = self.capacity;
        let n = self.node_mut(x);
        n.level = n.level.saturating_add(v).min(cap);
        n.min = n.min.saturating_add(v).min(cap);
        n.max = n.max.saturating_add(v).min(cap);
        n.add = n.add.saturating_add(v);
    }

    /// Hands `x`'s pending increase to its children.
    fn push(&mut self, x: u32) {
        let n = self.node(x);
        let (v, l, r) = (n.add, n.left, n.right);
        if v != 0 {
            if l != NIL {
                self.apply(l, v);
            }
            if r != NIL {
                self.apply(r, v);
            }
            self.node_mut(x).add = 0;
        }
    }

    /// Recomputes `x`'s aggregates from its level and its children (whose increases are
    /// applied).
    fn pull(&mut self, x: u32) {
        let n = self.node(x);
        let (mut lo, mut hi) = (n.level, n.level);
        for c in [n.left, n.right] {
            if c != NIL {
                let c = self.node(c);
                lo = lo.min(c.min);
                hi = hi.max(c.max);
            }
        }
        let n = self.node_mut(x);
        n.min = lo;
        n.max = hi;
    }

    /// Sets the child of `parent` on side `right` (the root when `parent` is `NIL`) to `x`.
    fn link(&mut self, parent: u32, right: bool, x: u32) {
        if parent == NIL {
            self.root = x;
        } else if right {
            self.node_mut(parent).right = x;
        } else {
            self.node_mut(parent).left = x;
        }
    }

    /// Recomputes the aggregates of the nodes on `self.path`, deepest first, and empties it.
    fn pull_path(&mut self) {
        while let Some(x) = self.path.pop() {
            self.pull(x);
        }
    }

    /// Splits the tree `x` into the breakpoints before `t` and those at or after it.
    fn split(&mut self, mut x: u32, t: u64) -> (u32, u32) {
        // Heads of the two results, and the nodes whose right (left) child is the next node
        // of the left (right) result.
        let (mut left, mut right) = (NIL, NIL);
        let (mut left_tail, mut right_tail) = (NIL, NIL);
        while x != NIL {
            self.push(x);
            self.path.push(x);
            let n = self.node(x);
            if n.time < t {
                let next = n.right;
                if left_tail == NIL {
                    left = x;
                } else {
                    self.node_mut(left_tail).right = x;
                }
                left_tail = x;
                x = next;
            } else {
                let next = n.left;
                if right_tail == NIL {
                    right = x;
                } else {
                    self.node_mut(right_tail).left = x;
                }
                right_tail = x;
                x = next;
            }
        }
        if left_tail != NIL {
            self.node_mut(left_tail).right = NIL;
        }
        if right_tail != NIL {
            self.node_mut(right_tail).left = NIL;
        }
        self.pull_path();
        (left, right)
    }

    /// Joins two trees, every breakpoint of `a` being before every one of `b`.
    fn merge(&mut self, mut a: u32, mut b: u32) -> u32 {
        let saved = self.root;
        self.root = NIL;
        // Where the next node goes: the child of `parent` on side `right`.
        let (mut parent, mut right) = (NIL, false);
        while a != NIL && b != NIL {
            if self.node(a).prio > self.node(b).prio {
                self.push(a);
                self.link(parent, right, a);
                self.path.push(a);
                (parent, right) = (a, true);
                a = self.node(a).right;
            } else {
                self.push(b);
                self.link(parent, right, b);
                self.path.push(b);
                (parent, right) = (b, false);
                b = self.node(b).left;
            }
        }
        self.link(parent, right, if a != NIL { a } else { b });
        self.pull_path();
        std::mem::replace(&mut self.root, saved)
    }

    /// Sets the level of the last breakpoint (a tree with at least one) to `level`.
    fn set_last_level(&mut self, level: u32) {
        let mut x = self.root;
        loop {
            self.push(x);
            self.path.push(x);
            match self.node(x).right {
                NIL => break,
                r => x = r,
            }
        }
        self.node_mut(x).level = level;
        self.pull_path();
    }

    /// Puts the nodes of the tree `x` back for reuse.
    fn discard(&mut self, x: u32) {
        if x != NIL {
            let (l, r) = (self.node(x).left, self.node(x).right);
            self.discard(l);
            self.discard(r);
            self.spare.push(x);
        }
    }

    /// Forgets every breakpoint.
    fn clear(&mut self) {
        self.nodes.clear();
        self.spare.clear();
        self.root = NIL;
        self.last = None;
    }

    /// Units in use at time `t`, and whether a breakpoint is at `t`.
    fn level_at(&self, t: u64) -> (u32, bool) {
        let (mut x, mut acc, mut level, mut exact) = (self.root, 0u32, 0u32, false);
        while x != NIL {
            let n = self.node(x);
            if n.time <= t {
                level = self.raise(n.level, acc);
                exact = n.time == t;
                x = n.right;
            } else {
                x = n.left;
            }
            acc = acc.saturating_add(n.add);
        }
        (level, exact)
    }

    /// The time of the first breakpoint after `t` whose level is above `limit` (`busy`) or at
    /// most `limit` (not `busy`), in the subtree `x` whose ancestors add `acc`.
    fn next_after(&self, x: u32, acc: u32, t: u64, limit: u32, busy: bool) -> Option<u64> {
        if x == NIL {
            return None;
        }
        let n = self.node(x);
        let maybe = if busy {
            self.raise(n.max, acc) > limit
        } else {
            self.raise(n.min, acc) <= limit
        };
        if !maybe {
            return None;
        }
        let below = acc.saturating_add(n.add);
        if n.time <= t {
            return self.next_after(n.right, below, t, limit, busy);
        }
        if let Some(found) = self.next_after(n.left, below, t, limit, busy) {
            return Some(found);
        }
        if (self.raise(n.level, acc) > limit) == busy {
            return Some(n.time);
        }
        self.next_after(n.right, below, t, limit, busy)
    }

    /// The earliest time `>= ready` at which `demand` units (clamped) are free for `duration`
    /// ns. Zero-length work needs only a point in time at which the units are free.
    pub fn earliest(&self, ready: u64, duration: u64, demand: u32) -> u64 {
        if self.last.is_none_or(|last| ready >= last) {
            // At or after the last breakpoint nothing is in use.
            return ready;
        }
        let limit = self.capacity - self.clamp(demand);
        let mut t = ready;
        let (mut level, _) = self.level_at(t);
        loop {
            if level > limit {
                // Jump to the next breakpoint at which enough units are free; the last level
                // is zero, so one exists.
                match self.next_after(self.root, 0, t, limit, false) {
                    Some(s) => t = s,
                    None => return t,
                }
            }
            let end = t.saturating_add(duration);
            match self.next_after(self.root, 0, t, limit, true) {
                Some(s) if s < end => {
                    t = s;
                    level = limit + 1;
                }
                _ => return t,
            }
        }
    }

    /// Makes sure a breakpoint is at `t` (with the level in force there).
    fn breakpoint(&mut self, t: u64) {
        let (level, exact) = self.level_at(t);
        if exact {
            return;
        }
        let node = self.new_node(t, level);
        let (a, b) = self.split(self.root, t);
        let a = self.merge(a, node);
        self.root = self.merge(a, b);
        self.last = Some(self.last.map_or(t, |l| l.max(t)));
    }

    /// Time of the first breakpoint of the (non-empty) tree `x`.
    fn first_time(&self, mut x: u32) -> u64 {
        while self.node(x).left != NIL {
            x = self.node(x).left;
        }
        self.node(x).time
    }

    /// Level of the last breakpoint of the tree `x` (zero for an empty tree).
    fn last_level(&self, mut x: u32) -> u32 {
        let mut acc = 0u32;
        let mut level = 0;
        while x != NIL {
            let n = self.node(x);
            level = self.raise(n.level, acc);
            acc = acc.saturating_add(n.add);
            x = n.right;
        }
        level
    }

    /// Marks `demand` units (clamped) busy over `[start, start + duration)`. The caller found
    /// `start` with [`Pool::earliest`], so the capacity is never exceeded.
    pub fn reserve(&mut self, start: u64, duration: u64, demand: u32) {
        if duration == 0 {
            return;
        }
        let demand = self.clamp(demand);
        let end = start.saturating_add(duration);
        if end == start {
            // Saturated at the end of time: a breakpoint and nothing to raise.
            self.breakpoint(start);
            return;
        }
        match self.last {
            // At or after the last breakpoint (the common case when the device is ahead):
            // append.
            None => {
                let s = self.new_node(start, demand);
                let e = self.new_node(end, 0);
                self.root = self.merge(s, e);
            }
            Some(last) if start > last => {
                let s = self.new_node(start, demand);
                let e = self.new_node(end, 0);
                let root = self.merge(self.root, s);
                self.root = self.merge(root, e);
            }
            Some(last) if start == last => {
                self.set_last_level(demand);
                let e = self.new_node(end, 0);
                self.root = self.merge(self.root, e);
            }
            Some(_) => {
                let (a, rest) = self.split(self.root, start);
                let (mut b, mut c) = self.split(rest, end);
                let at_start = self.last_level(a);
                if c == NIL || self.first_time(c) != end {
                    let at_end = if b == NIL {
                        at_start
                    } else {
                        self.last_level(b)
                    };
                    let e = self.new_node(end, at_end);
                    c = self.merge(e, c);
                }
                if b == NIL || self.first_time(b) != start {
                    let s = self.new_node(start, at_start);
                    b = self.merge(s, b);
                }
                self.apply(b, demand);
                let bc = self.merge(b, c);
                self.root = self.merge(a, bc);
            }
        }
        self.last = Some(self.last.map_or(end, |l| l.max(end)));
    }

    /// Places work: [`Pool::earliest`] then [`Pool::reserve`]; returns the start time.
    #[cfg(test)]
    pub fn place(&mut self, ready: u64, duration: u64, demand: u32) -> u64 {
        let t = self.earliest(ready, duration, demand);
        self.reserve(t, duration, demand);
        t
    }

    /// Forgets usage before `now`: no later op can start before `now`. Keeps the breakpoint
    /// in force at `now` and every later one.
    #[inline]
    pub fn prune(&mut self, now: u64) {
        // Inlined for this check: every host call prunes, and an idle pool has nothing.
        if self.last.is_some() {
            self.prune_used(now);
        }
    }

    /// [`Pool::prune`] of a pool that was used.
    fn prune_used(&mut self, now: u64) {
        match self.last {
            None => return,
            Some(last) if last <= now => {
                // All in the past: only the last breakpoint, at level zero, would be kept,
                // and a lone zero breakpoint is forgotten.
                self.clear();
                return;
            }
            Some(_) => {}
        }
        // The first breakpoint and the one after it: only when both are at or before `now`
        // is there anything to forget.
        let (mut first, mut parent) = (self.root, NIL);
        while self.node(first).left != NIL {
            parent = first;
            first = self.node(first).left;
        }
        let mut second = self.node(first).right;
        if second == NIL {
            second = parent;
        } else {
            while self.node(second).left != NIL {
                second = self.node(second).left;
            }
        }
        if second != NIL && self.node(second).time <= now {
            let (before, after) = match now.checked_add(1) {
                Some(t) => self.split(self.root, t),
                None => (self.root, NIL),
            };
            // `before` holds at least two breakpoints: keep its last one.
            let mut keep = before;
            while self.node(keep).right != NIL {
                keep = self.node(keep).right;
            }
            let (drop, kept) = self.split(before, self.node(keep).time);
            self.discard(drop);
            self.root = self.merge(kept, after);
        }
        let root = self.node(self.root);
        if root.left == NIL && root.right == NIL && root.level == 0 {
            self.clear();
        }
    }

    /// Number of remembered breakpoints.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.nodes.len() - self.spare.len()
    }

    /// The breakpoints in time order, with their levels.
    #[cfg(test)]
    pub fn steps(&self) -> Vec<(u64, u32)> {
        fn walk(p: &Pool, x: u32, acc: u32, out: &mut Vec<(u64, u32)>) {
            if x == NIL {
                return;
            }
            let n = p.node(x);
            let below = acc.saturating_add(n.add);
            walk(p, n.left, below, out);
            out.push((n.time, p.raise(n.level, acc)));
            walk(p, n.right, below, out);
        }
        let mut out = Vec::with_capacity(self.len());
        walk(self, self.root, 0, &mut out);
        out
    }
}

/// The plain sorted-list pool that [`Pool`] replaced, kept to check it against.
#[cfg(test)]
pub(crate) mod reference {
    /// Usage of one resource over time: a step function kept as sorted breakpoints
    /// `(time, units in use from this time on)`. Before the first breakpoint, and after the last
    /// one (whose level is always zero), nothing is in use.
    #[derive(Clone, Debug)]
    pub(crate) struct Pool {
        capacity: u32,
        steps: Vec<(u64, u32)>,
    }

    impl Pool {
        /// A pool of `capacity` units (zero is treated as one).
        pub fn new(capacity: u32) -> Self {
            Pool {
                capacity: capacity.max(1),
                steps: Vec::new(),
            }
        }

        /// The number of units an op asking for `demand` actually gets: at least one, at most the
        /// capacity.
        pub fn clamp(&self, demand: u32) -> u32 {
            demand.clamp(1, self.capacity)
        }

        /// Units in use at time `t`, and the index of the first breakpoint after `t`.
        fn level_at(&self, t: u64) -> (u32, usize) {
            let i = self.steps.partition_point(|&(s, _)| s <= t);
            let level = if i == 0 { 0 } else { self.steps[i - 1].1 };
            (level, i)
        }

        /// The earliest time `>= ready` at which `demand` units (clamped) are free for `duration`
        /// ns. Zero-length work needs only a point in time at which the units are free.
        pub fn earliest(&self, ready: u64, duration: u64, demand: u32) -> u64 {
            let limit = self.capacity - self.clamp(demand);
            let mut t = ready;
            'search: loop {
                let (level, mut i) = self.level_at(t);
                if level > limit {
                    // Jump to the next breakpoint at which enough units are free; the last level
                    // is zero, so one exists.
                    while i < self.steps.len() && self.steps[i].1 > limit {
                        i += 1;
                    }
                    match self.steps.get(i) {
                        Some(&(s, _)) => t = s,
                        None => return t,
                    }
                    continue;
                }
                let end = t.saturating_add(duration);
                while i < self.steps.len() && self.steps[i].0 < end {
                    if self.steps[i].1 > limit {
                        t = self.steps[i].0;
                        continue 'search;
                    }
                    i += 1;
                }
                return t;
            }
        }

        /// Index of the breakpoint at `t`, inserting one (with the level in force there) if needed.
        fn breakpoint(&mut self, t: u64) -> usize {
            let (level, i) = self.level_at(t);
            if i > 0 && self.steps[i - 1].0 == t {
                return i - 1;
            }
            self.steps.insert(i, (t, level));
            i
        }

        /// Marks `demand` units (clamped) busy over `[start, start + duration)`. The caller found
        /// `start` with [`Pool::earliest`], so the capacity is never exceeded.
        pub fn reserve(&mut self, start: u64, duration: u64, demand: u32) {
            if duration == 0 {
                return;
            }
            let demand = self.clamp(demand);
            let end = start.saturating_add(duration);
            let first = self.breakpoint(start);
            let last = self.breakpoint(end);
            for step in &mut self.steps[first..last] {
                step.1 = step.1.saturating_add(demand).min(self.capacity);
            }
        }

        /// Places work: [`Pool::earliest`] then [`Pool::reserve`]; returns the start time.
        pub fn place(&mut self, ready: u64, duration: u64, demand: u32) -> u64 {
            let t = self.earliest(ready, duration, demand);
            self.reserve(t, duration, demand);
            t
        }

        /// Forgets usage before `now`: no later op can start before `now`.
        pub fn prune(&mut self, now: u64) {
            let i = self.steps.partition_point(|&(s, _)| s <= now);
            if i >= 2 {
                self.steps.drain(..i - 1);
            }
            if self.steps.len() == 1 && self.steps[0].1 == 0 {
                self.steps.clear();
            }
        }

        /// Number of remembered breakpoints.
        pub fn len(&self) -> usize {
            self.steps.len()
        }
    }

    impl Pool {
        /// The breakpoints in time order, with their levels.
        pub fn steps(&self) -> Vec<(u64, u32)> {
            self.steps.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_one_places_in_the_first_gap_that_fits() {
        let mut r = Pool::new(1);
        assert_eq!(r.place(0, 10, 1), 0);
        assert_eq!(r.place(0, 10, 1), 10);
        assert_eq!(r.place(30, 10, 1), 30);
        // gap [20, 30) fits 10 but not 11
        assert_eq!(r.place(5, 10, 1), 20);
        assert_eq!(r.place(0, 11, 1), 40);
        // zero-length work needs no free time, only a point at which the unit is free
        assert_eq!(r.place(0, 0, 1), 51);
        assert_eq!(r.place(45, 0, 1), 51);
        r.prune(40);
        assert_eq!(r.len(), 2);
        assert_eq!(r.place(45, 1, 1), 51);
        assert_eq!(r.place(u64::MAX - 1, 5, 1), u64::MAX - 1);
    }

    #[test]
    fn units_are_shared_up_to_the_capacity() {
        let mut r = Pool::new(4);
        assert_eq!(r.place(0, 100, 2), 0);
        assert_eq!(r.place(0, 100, 2), 0, "two halves share");
        assert_eq!(r.place(0, 100, 1), 100, "full until 100");
        assert_eq!(r.place(0, 50, 3), 100, "one unit busy until 200: three fit");
        assert_eq!(r.place(0, 10, 9), 200, "demand is clamped to the capacity");
        assert_eq!(
            r.place(150, 10, 1),
            150,
            "level 1 + 3 = 4 in [100,150) but free after"
        );
        r.prune(1_000);
        assert_eq!(r.len(), 0);
    }

    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Step {
        Place {
            ready: u64,
            duration: u64,
            demand: u32,
        },
        Prune(u64),
    }

    /// Times drawn from a small range, so that ops collide, and now and then from the ends of
    /// the range of `u64`.
    fn time() -> impl Strategy<Value = u64> {
        prop_oneof![
            8 => 0u64..2_000,
            1 => (u64::MAX - 100)..=u64::MAX,
        ]
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            6 => (time(), prop_oneof![0u64..300, Just(u64::MAX)], 0u32..10)
                .prop_map(|(ready, duration, demand)| Step::Place { ready, duration, demand }),
            1 => time().prop_map(Step::Prune),
        ]
    }

    /// Runs `steps` on the treap and on the sorted list; every answer and the breakpoints
    /// after every step agree.
    fn agree(capacity: u32, steps: &[Step]) -> Result<(), TestCaseError> {
        let mut new = Pool::new(capacity);
        let mut old = reference::Pool::new(capacity);
        for (i, s) in steps.iter().enumerate() {
            match *s {
                Step::Place {
                    ready,
                    duration,
                    demand,
                } => {
                    prop_assert_eq!(
                        new.earliest(ready, duration, demand),
                        old.earliest(ready, duration, demand),
                        "step {}: {:?}",
                        i,
                        s
                    );
                    prop_assert_eq!(
                        new.place(ready, duration, demand),
                        old.place(ready, duration, demand)
                    );
                }
                Step::Prune(now) => {
                    new.prune(now);
                    old.prune(now);
                }
            }
            prop_assert_eq!(new.steps(), old.steps(), "step {}: {:?}", i, s);
            prop_assert_eq!(new.len(), old.len());
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Placement (FCFS with backfilling) and pruning give exactly the old results.
        #[test]
        fn treap_matches_the_sorted_list(
            capacity in prop_oneof![Just(1u32), 1u32..6, Just(24)],
            steps in proptest::collection::vec(step(), 1..200),
        ) {
            agree(capacity, &steps)?;
        }

        /// The same with the host clock only moving forward and work ready after it, as the
        /// engine drives it.
        #[test]
        fn treap_matches_the_sorted_list_in_engine_order(
            capacity in 1u32..5,
            steps in proptest::collection::vec((0u64..50, 0u64..400, 1u32..6, 1u64..200, any::<bool>()), 1..300),
        ) {
            let mut now = 0u64;
            let mut program = Vec::new();
            for (advance, ahead, demand, duration, prune) in steps {
                now += advance;
                if prune {
                    program.push(Step::Prune(now));
                }
                program.push(Step::Place { ready: now + ahead, duration, demand });
            }
            agree(capacity, &program)?;
        }
    }

    #[test]
    fn a_long_backlog_keeps_few_nodes_per_op_and_skips_busy_runs() {
        // 100,000 ops queued ahead of the host on a full pool: placing one more at the front
        // skips the busy run in one step.
        let mut r = Pool::new(2);
        for i in 0..100_000u64 {
            assert_eq!(r.place(0, 10, 2), i * 10);
        }
        assert_eq!(r.place(5, 10, 1), 1_000_000);
        r.prune(500_000);
        assert_eq!(r.len(), 50_002);
        assert_eq!(r.place(500_000, 10, 2), 1_000_010);
    }
}

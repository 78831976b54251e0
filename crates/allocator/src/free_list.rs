//! Free lists: per (pool, stream, size class), cached blocks sorted by (size, address), for
//! best-fit search. Sorted vectors keep their capacity, so caching and reusing a block does not
//! allocate on the host once warmed up.

use crate::block::BlockId;
use crate::size::SizeClass;
use crate::snapshot::PoolId;
use braid_stream_core::StreamId;

/// A free block's key in a free list.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) struct FreeKey {
    pub size: u64,
    pub addr: u64,
    pub id: BlockId,
}

/// Free blocks of one (pool, stream, class), sorted by (size, addr).
#[derive(Debug, Default)]
pub(crate) struct FreeList {
    keys: Vec<FreeKey>,
}

impl FreeList {
    #[inline]
    pub(crate) fn insert(&mut self, key: FreeKey) {
        let at = self.keys.partition_point(|k| k < &key);
        // Appending (the common case of a list with one size) needs no shift.
        if at == self.keys.len() {
            self.keys.push(key);
        } else {
            self.keys.insert(at, key);
        }
    }

    #[inline]
    pub(crate) fn remove(&mut self, key: FreeKey) -> bool {
        match self.keys.binary_search(&key) {
            Ok(i) => {
                self.keys.remove(i);
                true
            }
            Err(_) => false,
        }
    }

    /// Index of `key`, if listed.
    #[inline]
    pub(crate) fn position(&self, key: FreeKey) -> Option<usize> {
        // Free blocks of one list never share an address: (size, addr) finds the entry.
        let i = self.partition_point(|k| (k.size, k.addr) < (key.size, key.addr));
        (self.keys.get(i) == Some(&key)).then_some(i)
    }

    /// `partition_point` of the keys, by a scan when the list is short (the usual case for
    /// one stream's list, and cheaper there than a binary search).
    #[inline(always)]
    fn partition_point(&self, below: impl Fn(&FreeKey) -> bool) -> usize {
        const SCAN: usize = 4;
        if self.keys.len() <= SCAN {
            return self
                .keys
                .iter()
                .position(|k| !below(k))
                .unwrap_or(self.keys.len());
        }
        self.keys.partition_point(below)
    }

    /// Replaces the key at `i` by `key`, which sorts at or before it (a split remainder taking
    /// its parent's place): the keys in between move up by one, so when none sorts between
    /// them the entry is overwritten in place.
    #[inline(always)]
    pub(crate) fn replace_with_smaller(&mut self, i: usize, key: FreeKey) {
        debug_assert!(key <= self.keys[i]);
        // Usually nothing sorts between the key and its neighbour below.
        if i == 0 || self.keys[i - 1] < key {
            self.keys[i] = key;
        } else {
            self.shift_up_into(i, key);
        }
    }

    #[inline(never)]
    fn shift_up_into(&mut self, i: usize, key: FreeKey) {
        let pos = self.keys[..i].partition_point(|k| k < &key);
        self.keys.copy_within(pos..i, pos + 1);
        self.keys[pos] = key;
    }

    /// Replaces the key at `i` by `key`, which sorts at or after it (a block merged with its
    /// free neighbour taking the neighbour's place): the keys in between move down by one, so
    /// when none sorts between them the entry is overwritten in place.
    #[inline(always)]
    pub(crate) fn replace_with_larger(&mut self, i: usize, key: FreeKey) {
        debug_assert!(key >= self.keys[i]);
        if self.keys.get(i + 1).is_none_or(|next| &key <= next) {
            self.keys[i] = key;
        } else {
            self.shift_down_into(i, key);
        }
    }

    #[inline(never)]
    fn shift_down_into(&mut self, i: usize, key: FreeKey) {
        let pos = i + self.keys[i + 1..].partition_point(|k| k < &key);
        self.keys.copy_within(i + 1..=pos, i);
        self.keys[pos] = key;
    }

    /// Index of the first block of at least `size` bytes.
    #[inline]
    pub(crate) fn lower_bound(&self, size: u64) -> usize {
        self.partition_point(|k| k.size < size)
    }

    #[inline]
    pub(crate) fn get(&self, i: usize) -> Option<FreeKey> {
        self.keys.get(i).copied()
    }

    #[inline]
    pub(crate) fn take(&mut self, i: usize) -> FreeKey {
        // Taking the last (largest) entry needs no shift.
        if i + 1 == self.keys.len() {
            if let Some(key) = self.keys.pop() {
                return key;
            }
        }
        self.keys.remove(i)
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    #[inline]
    pub(crate) fn keys(&self) -> &[FreeKey] {
        &self.keys
    }
}

/// The free lists of one pool, per stream and class, with a GC clock per class.
#[derive(Debug, Default)]
pub(crate) struct PoolFreeLists {
    per_stream: Vec<[FreeList; 2]>,
    /// `get_free_block` calls per class (PyTorch's GC clock).
    pub gc_clock: [u64; 2],
}

#[inline]
pub(crate) fn class_index(class: SizeClass) -> usize {
    match class {
        SizeClass::Small => 0,
        SizeClass::Large => 1,
    }
}

impl PoolFreeLists {
    #[inline(always)]
    pub(crate) fn list_mut(&mut self, stream: StreamId, small: bool) -> &mut FreeList {
        let class = usize::from(!small);
        let i = stream.index();
        // One bounds check on the hot path; the first use of a stream grows the table.
        if i < self.per_stream.len() {
            return &mut self.per_stream[i][class];
        }
        self.grow(i, class)
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, i: usize, class: usize) -> &mut FreeList {
        self.per_stream.resize_with(i + 1, Default::default);
        &mut self.per_stream[i][class]
    }

    /// All lists of a class, with their stream.
    pub(crate) fn lists(&self, small: bool) -> impl Iterator<Item = (StreamId, &FreeList)> {
        self.per_stream
            .iter()
            .enumerate()
            .map(move |(i, l)| (StreamId(i as u32), &l[usize::from(!small)]))
    }
}

/// Free lists of all pools: the default pool and the private pools.
#[derive(Debug, Default)]
pub(crate) struct FreeLists {
    /// The default pool's lists, apart: the hot path reaches them without a lookup.
    default: PoolFreeLists,
    /// Private pools' lists.
    pools: Vec<(PoolId, PoolFreeLists)>,
}

impl FreeLists {
    #[inline(always)]
    pub(crate) fn of_pool_mut(&mut self, pool: PoolId) -> &mut PoolFreeLists {
        if pool == PoolId::DEFAULT {
            return &mut self.default;
        }
        self.of_private_pool_mut(pool)
    }

    #[inline(never)]
    fn of_private_pool_mut(&mut self, pool: PoolId) -> &mut PoolFreeLists {
        if let Some(i) = self.pools.iter().position(|(id, _)| *id == pool) {
            return &mut self.pools[i].1;
        }
        self.pools.push((pool, PoolFreeLists::default()));
        let last = self.pools.len() - 1;
        &mut self.pools[last].1
    }

    /// Forgets the (empty) free lists of a pool that is gone.
    pub(crate) fn remove_pool(&mut self, pool: PoolId) {
        if pool != PoolId::DEFAULT {
            self.pools.retain(|(id, _)| *id != pool);
        }
    }

    #[inline]
    pub(crate) fn of_pool(&self, pool: PoolId) -> Option<&PoolFreeLists> {
        if pool == PoolId::DEFAULT {
            return Some(&self.default);
        }
        self.pools
            .iter()
            .find(|(id, _)| *id == pool)
            .map(|(_, p)| p)
    }
}

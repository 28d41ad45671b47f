//! `OffsetMap`: the cleaner's dedupe buffer (Kafka's `SkimpyOffsetMap`).
//!
//! A fixed-capacity open-addressing hash table from the 128-bit hash of a record key to
//! the latest offset seen for that key. Keys themselves are never stored, so memory per
//! key is constant whatever the key size:
//!
//! ```text
//! slot (24 bytes)
//!  0    key hash   16 bytes   XXH3-128 of the key; all zero = empty slot
//! 16    offset     int64      big-endian, the largest offset put for this hash
//! ```
//!
//! The slots live in one contiguous `Vec<u8>` of `capacity * 24` bytes, sized from a
//! memory budget (`log.cleaner.dedupe.buffer.size` semantics: `capacity = budget / 24`).
//! Probing is linear from the home slot `hash[0..8] * capacity >> 64`.
//!
//! Invariants:
//! - An all-zero hash marks an empty slot. A key whose real hash is all zero is stored
//!   under a remapped hash (its last byte set to 1), consistently for `put` and `get`.
//! - The map is "full" (`is_full`) at 90% of the slots (`LOAD_FACTOR`). `put` accepts new
//!   keys beyond that, up to `capacity - 1`, so at least one slot always stays empty and
//!   every probe sequence ends; callers decide at batch boundaries whether to go on.
//! - As in Kafka, two keys with the same 128-bit hash are the same key to this map; with
//!   a 128-bit hash that is astronomically unlikely.

use crate::error::{Error, Result};

/// Bytes of a key hash.
pub const HASH_SIZE: usize = 16;
/// Bytes of one slot: hash + offset.
pub const BYTES_PER_ENTRY: usize = HASH_SIZE + 8;
/// Fraction of the slots that may be used before `is_full` says so (Kafka's
/// `log.cleaner.io.buffer.load.factor` default).
pub const LOAD_FACTOR: f64 = 0.9;
/// The fewest slots a map can have: one for an entry and one that stays empty.
pub const MIN_SLOTS: usize = 2;

pub struct OffsetMap {
    slots: Vec<u8>,
    capacity: usize,
    max_entries: usize,
    entries: usize,
    latest_offset: i64,
}

impl OffsetMap {
    /// A map using at most `bytes` of slot memory (`log.cleaner.dedupe.buffer.size`).
    pub fn with_memory(bytes: usize) -> Result<OffsetMap> {
        let capacity = bytes / BYTES_PER_ENTRY;
        if capacity < MIN_SLOTS {
            return Err(Error::config(
                "log.cleaner.dedupe.buffer.size",
                bytes,
                format!("must hold at least {MIN_SLOTS} entries of {BYTES_PER_ENTRY} bytes"),
            ));
        }
        let max_entries = ((capacity as f64 * LOAD_FACTOR) as usize).clamp(1, capacity - 1);
        Ok(OffsetMap { slots: vec![0u8; capacity * BYTES_PER_ENTRY], capacity, max_entries, entries: 0, latest_offset: -1 })
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Number of distinct keys (hashes) stored.
    pub fn len(&self) -> usize {
        self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Entries at which the map counts as full: 90% of the slots.
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// Whether the load factor has been reached; the cleaner stops mapping at the next
    /// batch boundary.
    pub fn is_full(&self) -> bool {
        self.entries >= self.max_entries
    }

    /// Entries that can still be added before `is_full`.
    pub fn free_entries(&self) -> usize {
        self.max_entries.saturating_sub(self.entries)
    }

    /// Slot memory per key: always 24.
    pub fn bytes_per_entry(&self) -> usize {
        BYTES_PER_ENTRY
    }

    /// Bytes of slot memory held (`capacity * 24`).
    pub fn memory_bytes(&self) -> usize {
        self.slots.len()
    }

    /// The largest offset ever put since creation or the last `clear`; -1 when none.
    pub fn latest_offset(&self) -> i64 {
        self.latest_offset
    }

    /// Empties the map, keeping its memory.
    pub fn clear(&mut self) {
        self.slots.fill(0);
        self.entries = 0;
        self.latest_offset = -1;
    }

    /// Records `offset` for `key`, keeping the larger of it and any offset already stored.
    ///
    /// # Panics
    /// When a new key would take the last empty slot (`len() == capacity() - 1`); callers
    /// check `is_full`/`free_entries` first, as the cleaner does.
    pub fn put(&mut self, key: &[u8], offset: i64) {
        let _ = self.put_hash(&key_hash(key), offset);
    }

    /// `put` with the key's `key_hash` already computed. Returns the offset the hash held
    /// before (None when it was new).
    pub fn put_hash(&mut self, hash: &[u8; HASH_SIZE], offset: i64) -> Option<i64> {
        let hash = *hash;
        let slot = self.find(&hash);
        let at = slot * BYTES_PER_ENTRY;
        self.latest_offset = self.latest_offset.max(offset);
        if is_empty_slot(&self.slots[at..at + HASH_SIZE]) {
            assert!(self.entries + 1 < self.capacity, "offset map of {} slots has no free slot left", self.capacity);
            self.slots[at..at + HASH_SIZE].copy_from_slice(&hash);
            self.slots[at + HASH_SIZE..at + BYTES_PER_ENTRY].copy_from_slice(&offset.to_be_bytes());
            self.entries += 1;
            return None;
        }
        let previous = self.slot_offset(at);
        if offset > previous {
            self.slots[at + HASH_SIZE..at + BYTES_PER_ENTRY].copy_from_slice(&offset.to_be_bytes());
        }
        Some(previous)
    }

    /// The latest offset stored for `key`.
    pub fn get(&self, key: &[u8]) -> Option<i64> {
        self.get_hash(&key_hash(key))
    }

    /// `get` with the key's `key_hash` already computed.
    pub fn get_hash(&self, hash: &[u8; HASH_SIZE]) -> Option<i64> {
        let hash = *hash;
        let at = self.find(&hash) * BYTES_PER_ENTRY;
        (!is_empty_slot(&self.slots[at..at + HASH_SIZE])).then(|| self.slot_offset(at))
    }

    /// Hints the CPU to load the first slot `hash` probes: callers hash a batch's keys,
    /// prefetch them all, then look them up, so the cache misses overlap.
    #[inline]
    pub fn prefetch(&self, hash: &[u8; HASH_SIZE]) {
        #[cfg(target_arch = "x86_64")]
        {
            let at = self.home_slot(hash) * BYTES_PER_ENTRY;
            // SAFETY: `at` is inside `slots`; a prefetch reads nothing and cannot fault.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(self.slots.as_ptr().add(at) as *const i8);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = hash;
    }

    /// `hash[0..8]` scaled onto [0, capacity) by a multiply and a shift (Lemire's
    /// fastrange), which costs a fraction of a 64-bit division.
    fn home_slot(&self, hash: &[u8; HASH_SIZE]) -> usize {
        ((u64::from_le_bytes(hash[..8].try_into().unwrap()) as u128 * self.capacity as u128) >> 64) as usize
    }

    fn slot_offset(&self, at: usize) -> i64 {
        i64::from_be_bytes(self.slots[at + HASH_SIZE..at + BYTES_PER_ENTRY].try_into().unwrap())
    }

    /// The slot holding `hash`, or the empty slot where it would go. Terminates because
    /// at least one slot is always empty.
    fn find(&self, hash: &[u8; HASH_SIZE]) -> usize {
        let mut slot = self.home_slot(hash);
        loop {
            let at = slot * BYTES_PER_ENTRY;
            let stored = &self.slots[at..at + HASH_SIZE];
            if stored == hash || is_empty_slot(stored) {
                return slot;
            }
            slot += 1;
            if slot == self.capacity {
                slot = 0;
            }
        }
    }
}

fn is_empty_slot(hash: &[u8]) -> bool {
    hash.iter().all(|&b| b == 0)
}

/// The 16-byte hash under which `key` is stored: XXH3-128 (big-endian), with the
/// reserved all-zero value remapped.
pub fn key_hash(key: &[u8]) -> [u8; HASH_SIZE] {
    let mut h = xxhash_rust::xxh3::xxh3_128(key).to_be_bytes();
    if is_empty_slot(&h) {
        h[HASH_SIZE - 1] = 1;
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;


    #[test]
    fn distinct_keys_get_distinct_hashes() {
        let data: Vec<u8> = (0..40u8).collect();
        let hashes: std::collections::HashSet<_> = (0..=40).map(|n| key_hash(&data[..n])).collect();
        assert_eq!(hashes.len(), 41);
        assert!(hashes.iter().all(|h| !is_empty_slot(h)));
    }

    #[test]
    fn all_zero_hash_is_remapped() {
        let h = key_hash(b"");
        assert_ne!(h, [0u8; 16]);
        let mut m = OffsetMap::with_memory(24 * 10).unwrap();
        assert_eq!(m.get(b""), None);
        m.put(b"", 7);
        assert_eq!(m.get(b""), Some(7));
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn matches_hashmap_for_random_keys() {
        let mut rng = fastrand::Rng::with_seed(42);
        let mut m = OffsetMap::with_memory(24 * 4096).unwrap();
        let mut model: HashMap<Vec<u8>, i64> = HashMap::new();
        let mut offset = 0i64;
        while model.len() < m.max_entries() {
            let len = rng.u64(..24) as usize;
            let key: Vec<u8> = (0..len).map(|_| rng.u64(..4) as u8).collect();
            // Offsets mostly ascend, sometimes an older one arrives: the larger must win.
            let off = if rng.u64(..10) == 0 { offset / 2 } else { offset };
            offset += 1;
            m.put(&key, off);
            let e = model.entry(key).or_insert(off);
            *e = (*e).max(off);
        }
        assert_eq!(m.len(), model.len());
        for (k, v) in &model {
            assert_eq!(m.get(k), Some(*v), "{k:?}");
        }
        for _ in 0..2000 {
            let key: Vec<u8> = (0..30).map(|_| rng.u64(..) as u8).collect();
            assert_eq!(m.get(&key), model.get(&key).copied());
        }
        assert_eq!(m.latest_offset(), offset - 1);
        assert!(m.is_full());
    }

    #[test]
    fn full_detection_at_load_factor() {
        let mut m = OffsetMap::with_memory(24 * 100).unwrap();
        assert_eq!(m.capacity(), 100);
        assert_eq!(m.max_entries(), 90);
        for i in 0..89 {
            m.put(format!("k{i}").as_bytes(), i);
            assert!(!m.is_full());
        }
        assert_eq!(m.free_entries(), 1);
        // Updating an existing key does not add an entry.
        m.put(b"k0", 1000);
        assert!(!m.is_full());
        m.put(b"k89", 89);
        assert!(m.is_full());
        assert_eq!(m.free_entries(), 0);
        // Beyond the load factor the map still takes keys up to capacity - 1.
        for i in 90..99 {
            m.put(format!("k{i}").as_bytes(), i);
        }
        assert_eq!(m.len(), 99);
        for i in 1..99 {
            assert_eq!(m.get(format!("k{i}").as_bytes()), Some(i));
        }
        assert_eq!(m.get(b"missing"), None);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| m.put(b"one too many", 1)));
        assert!(r.is_err());
        m.clear();
        assert_eq!((m.len(), m.latest_offset(), m.get(b"k5")), (0, -1, None));
    }

    #[test]
    fn memory_accounting() {
        let m = OffsetMap::with_memory(1 << 20).unwrap();
        assert_eq!(m.bytes_per_entry(), 24);
        assert_eq!(m.capacity(), (1 << 20) / 24);
        assert_eq!(m.memory_bytes(), m.capacity() * 24);
        assert!(m.memory_bytes() <= 1 << 20);
        assert_eq!(m.max_entries(), (m.capacity() as f64 * 0.9) as usize);
        assert!(OffsetMap::with_memory(47).is_err());
        let tiny = OffsetMap::with_memory(48).unwrap();
        assert_eq!((tiny.capacity(), tiny.max_entries()), (2, 1));
    }

    #[test]
    fn collisions_probe_linearly() {
        // With few slots most keys collide on their start slot; all must stay distinct.
        let mut m = OffsetMap::with_memory(24 * 8).unwrap();
        for i in 0..7 {
            m.put(&[i as u8], i * 10);
        }
        for i in 0..7 {
            assert_eq!(m.get(&[i as u8]), Some(i * 10));
        }
        for i in 0..7 {
            m.put(&[i as u8], i * 10 - 1); // older offsets are ignored
            m.put(&[i as u8], i * 10 + 1);
        }
        for i in 0..7 {
            assert_eq!(m.get(&[i as u8]), Some(i * 10 + 1));
        }
        assert_eq!(m.len(), 7);
        // A lookup of an absent key walks to the single empty slot and stops.
        assert_eq!(m.get(b"absent"), None);
    }
}

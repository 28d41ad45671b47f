//! The `.index` file: a sparse map from offset to byte position in the segment's `.log`.
//!
//! Entry (8 bytes, big-endian): relative offset u32 (offset - segment base offset),
//! position u32. As in Kafka, one entry is added per `index.interval.bytes` of log: it
//! holds the *last* offset of a batch and the position where that batch starts. A lookup
//! for offset o returns the entry with the largest offset <= o; the batch holding o starts
//! at or after that position, and a forward scan over batch headers finds it.
//! Invariant: relative offsets and positions both strictly increase.

use std::path::Path;

use crate::error::{Error, Result};
use crate::index_file::IndexFile;

pub const ENTRY_SIZE: usize = 8;

pub struct OffsetIndex {
    file: IndexFile,
    base_offset: i64,
}

fn rel(e: &[u8]) -> u32 {
    u32::from_be_bytes(e[0..4].try_into().unwrap())
}
fn pos(e: &[u8]) -> u32 {
    u32::from_be_bytes(e[4..8].try_into().unwrap())
}

/// The shared mechanics (entries, flush, trim, path) are the `IndexFile`'s.
impl std::ops::Deref for OffsetIndex {
    type Target = IndexFile;
    fn deref(&self) -> &IndexFile {
        &self.file
    }
}

impl std::ops::DerefMut for OffsetIndex {
    fn deref_mut(&mut self) -> &mut IndexFile {
        &mut self.file
    }
}

impl OffsetIndex {
    pub fn open(path: &Path, base_offset: i64, max_index_size: usize, active: bool) -> Result<Self> {
        Ok(OffsetIndex { file: IndexFile::open(path, ENTRY_SIZE, max_index_size, active)?, base_offset })
    }


    /// (offset, position) of entry i.
    pub fn entry(&self, i: usize) -> (i64, u32) {
        let e = self.file.entry(i);
        (self.base_offset + rel(e) as i64, pos(e))
    }

    pub fn last_entry(&self) -> Option<(i64, u32)> {
        (self.entries() > 0).then(|| self.entry(self.entries() - 1))
    }

    /// The entry with the largest offset <= `offset`, or (base offset, 0).
    pub fn lookup(&self, offset: i64) -> (i64, u32) {
        let target = offset - self.base_offset;
        if target < 0 {
            return (self.base_offset, 0);
        }
        let target = target.min(u32::MAX as i64) as u32;
        match self.file.floor(target, rel) {
            Some(i) => self.entry(i),
            None => (self.base_offset, 0),
        }
    }

    /// Entry number of the last entry with position <= `max_position` and offset
    /// < `max_offset` (both orders agree, so this is a binary search).
    pub fn last_entry_within(&self, max_position: u64, max_offset: i64) -> Option<usize> {
        let by_pos = self.file.floor(max_position.min(u32::MAX as u64) as u32, pos);
        let rel_bound = (max_offset - 1 - self.base_offset).clamp(-1, u32::MAX as i64);
        let by_off = if rel_bound < 0 { None } else { self.file.floor(rel_bound as u32, rel) };
        match (by_pos, by_off) {
            (Some(a), Some(b)) => Some(a.min(b)),
            _ => None,
        }
    }

    /// Adds an entry when both the offset and the position advance past the last one.
    /// Returns false when it was not added: the index is full, or the entry's page
    /// cannot get storage (a full disk; `IndexFile::push`).
    pub fn append(&mut self, offset: i64, position: u32) -> bool {
        if self.file.is_full() {
            return false;
        }
        if let Some((o, p)) = self.last_entry() {
            if offset <= o || position <= p {
                return true; // not an advance: nothing to index
            }
        }
        let mut e = [0u8; ENTRY_SIZE];
        e[0..4].copy_from_slice(&((offset - self.base_offset) as u32).to_be_bytes());
        e[4..8].copy_from_slice(&position.to_be_bytes());
        self.file.push(&e)
    }

    /// Drops entries for offsets >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) {
        let target = (offset - self.base_offset).clamp(0, u32::MAX as i64) as u32;
        let n = self.file.ceiling(target, rel);
        self.file.truncate_entries(n);
    }

    /// Checks the entries against the segment: strictly increasing, offsets below
    /// `next_offset`, positions below `log_size`.
    pub fn sanity_check(&self, next_offset: i64, log_size: u64) -> Result<()> {
        let mut prev: Option<(i64, u32)> = None;
        for i in 0..self.entries() {
            let (o, p) = self.entry(i);
            let bad = |reason: String| Error::CorruptIndex { path: self.path().to_path_buf(), reason };
            if o >= next_offset || p as u64 >= log_size {
                return Err(bad(format!("entry {i} ({o}, {p}) lies beyond the segment")));
            }
            if let Some((po, pp)) = prev {
                if o <= po || p <= pp {
                    return Err(bad(format!("entry {i} ({o}, {p}) does not follow ({po}, {pp})")));
                }
            }
            prev = Some((o, p));
        }
        Ok(())
    }
}

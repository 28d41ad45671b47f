//! The `.timeindex` file: a sparse map from timestamp to offset.
//!
//! Entry (12 bytes, big-endian): timestamp i64, relative offset u32. An entry (t, o)
//! says that the largest timestamp in the segment up to and including the batch that
//! ends at offset o is t. Entries are added beside offset index entries, and only when
//! the segment's max timestamp grew, so timestamps and offsets both strictly increase.
//! When a segment stops being active (a roll; a close when the file exists) a last
//! entry records its max timestamp, which is what retention by time and timestamp
//! lookups read.

use std::path::Path;

use crate::error::{Error, Result};
use crate::index_file::IndexFile;

pub const ENTRY_SIZE: usize = 12;

pub struct TimeIndex {
    file: IndexFile,
    base_offset: i64,
}

fn ts(e: &[u8]) -> i64 {
    i64::from_be_bytes(e[0..8].try_into().unwrap())
}
fn rel(e: &[u8]) -> u32 {
    u32::from_be_bytes(e[8..12].try_into().unwrap())
}

/// The shared mechanics (entries, flush, trim, path) are the `IndexFile`'s.
impl std::ops::Deref for TimeIndex {
    type Target = IndexFile;
    fn deref(&self) -> &IndexFile {
        &self.file
    }
}

impl std::ops::DerefMut for TimeIndex {
    fn deref_mut(&mut self) -> &mut IndexFile {
        &mut self.file
    }
}

impl TimeIndex {
    pub fn open(path: &Path, base_offset: i64, max_index_size: usize, active: bool) -> Result<Self> {
        Ok(TimeIndex { file: IndexFile::open(path, ENTRY_SIZE, max_index_size, active)?, base_offset })
    }


    /// (timestamp, offset) of entry i.
    pub fn entry(&self, i: usize) -> (i64, i64) {
        let e = self.file.entry(i);
        (ts(e), self.base_offset + rel(e) as i64)
    }

    pub fn last_entry(&self) -> Option<(i64, i64)> {
        (self.entries() > 0).then(|| self.entry(self.entries() - 1))
    }

    /// The entry with the largest timestamp <= `timestamp`, or (-1, base offset).
    pub fn lookup(&self, timestamp: i64) -> (i64, i64) {
        match self.file.floor(timestamp, ts) {
            Some(i) => self.entry(i),
            None => (-1, self.base_offset),
        }
    }

    /// True when (timestamp, offset) advances past the last entry, so `maybe_append`
    /// would add it.
    pub fn advances(&self, timestamp: i64, offset: i64) -> bool {
        self.last_entry().is_none_or(|(t, o)| timestamp > t && offset > o)
    }

    /// Adds (timestamp, offset) when both advance past the last entry. Returns false
    /// when it was not added although it advances: the index is full, or the entry's
    /// page cannot get storage (a full disk; `IndexFile::push`).
    pub fn maybe_append(&mut self, timestamp: i64, offset: i64) -> bool {
        if !self.advances(timestamp, offset) {
            return true;
        }
        if self.file.is_full() {
            return false;
        }
        let mut e = [0u8; ENTRY_SIZE];
        e[0..8].copy_from_slice(&timestamp.to_be_bytes());
        e[8..12].copy_from_slice(&((offset - self.base_offset) as u32).to_be_bytes());
        self.file.push(&e)
    }

    /// Drops entries for offsets >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) {
        let target = (offset - self.base_offset).clamp(0, u32::MAX as i64) as u32;
        // Offsets increase with the entry number, so a binary search on them works.
        let n = self.file.ceiling(target, rel);
        self.file.truncate_entries(n);
    }

    pub fn sanity_check(&self, next_offset: i64) -> Result<()> {
        let mut prev: Option<(i64, i64)> = None;
        for i in 0..self.entries() {
            let (t, o) = self.entry(i);
            let bad = |reason: String| Error::CorruptIndex { path: self.path().to_path_buf(), reason };
            if o >= next_offset {
                return Err(bad(format!("entry {i} ({t}, {o}) lies beyond the segment")));
            }
            if let Some((pt, po)) = prev {
                if t <= pt || o <= po {
                    return Err(bad(format!("entry {i} ({t}, {o}) does not follow ({pt}, {po})")));
                }
            }
            prev = Some((t, o));
        }
        Ok(())
    }
}

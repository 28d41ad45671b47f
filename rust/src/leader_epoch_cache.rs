//! Leader epochs and the offset at which each began (`leader-epoch-checkpoint`).
//!
//! Invariant: entries are sorted and strictly increasing in both epoch and start offset.
//! Every change is written to the checkpoint file before the call returns; `assign`
//! changes the entries in memory only once the file is written, so a failed write
//! leaves the cache as it was.

use std::path::{Path, PathBuf};

use crate::checkpoint;
use crate::error::Result;

pub const FILE_NAME: &str = "leader-epoch-checkpoint";

#[derive(Clone)]
pub struct LeaderEpochCache {
    path: PathBuf,
    entries: Vec<(i32, i64)>,
}

impl LeaderEpochCache {
    /// Loads the checkpoint in `dir`; a damaged file is treated as empty (it is only a
    /// cache of facts the replication protocol can re-learn).
    pub fn load(dir: &Path) -> Self {
        let path = dir.join(FILE_NAME);
        let mut entries: Vec<(i32, i64)> = checkpoint::read(&path)
            .ok()
            .flatten()
            .unwrap_or_default()
            .iter()
            .filter_map(|f| Some((f.first()?.parse().ok()?, f.get(1)?.parse().ok()?)))
            .collect();
        entries.sort();
        entries.dedup_by(|b, a| b.0 <= a.0 || b.1 <= a.1);
        LeaderEpochCache { path, entries }
    }

    pub fn entries(&self) -> &[(i32, i64)] {
        &self.entries
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.0)
    }

    /// Writes the entries to the checkpoint file.
    pub fn save(&self) -> Result<()> {
        checkpoint::write(&self.path, &self.entries.iter().map(|(e, o)| format!("{e} {o}")).collect::<Vec<_>>())
    }

    /// Records that `epoch` starts at `start_offset`. Entries that would break
    /// monotonicity (an epoch >= `epoch` or a start offset >= `start_offset`) are dropped.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> Result<()> {
        let mut next = self.clone();
        if next.stage(epoch, start_offset) {
            next.save()?;
            *self = next;
        }
        Ok(())
    }

    /// True when `assign(epoch, start_offset)` would change the entries: not when the
    /// latest epoch is `epoch` and already starts at or before `start_offset`.
    pub fn changed_by(&self, epoch: i32, start_offset: i64) -> bool {
        epoch >= 0 && self.entries.last().is_none_or(|&(e, o)| e != epoch || start_offset < o)
    }

    /// `assign` in memory only, for the caller to `save` (several assignments written
    /// once); true when the entries changed.
    pub fn stage(&mut self, epoch: i32, start_offset: i64) -> bool {
        if !self.changed_by(epoch, start_offset) {
            return false;
        }
        self.entries.retain(|&(e, o)| e < epoch && o < start_offset);
        self.entries.push((epoch, start_offset));
        true
    }

    /// (epoch, end offset) for OffsetsForLeaderEpoch: the end of `epoch` is the start of
    /// the next higher epoch, or the log end for the latest one. (-1, -1) when unknown.
    pub fn end_offset_for(&self, epoch: i32, log_end_offset: i64) -> (i32, i64) {
        const UNDEFINED: (i32, i64) = (-1, -1);
        let Some(&(latest, _)) = self.entries.last() else { return UNDEFINED };
        if epoch < 0 {
            return UNDEFINED;
        }
        if epoch == latest {
            return (latest, log_end_offset);
        }
        let Some(&(_, higher_start)) = self.entries.iter().find(|(e, _)| *e > epoch) else { return UNDEFINED };
        match self.entries.iter().rev().find(|(e, _)| *e <= epoch) {
            Some(&(floor, _)) => (floor, higher_start),
            None => (epoch, higher_start),
        }
    }

    /// Drops entries starting at or after `end_offset` (log truncated to it).
    pub fn truncate_from_end(&mut self, end_offset: i64) -> Result<()> {
        let before = self.entries.len();
        self.entries.retain(|&(_, o)| o < end_offset);
        if self.entries.len() != before {
            self.save()?;
        }
        Ok(())
    }

    /// The log now starts at `start_offset`: entries wholly before it go, and the one
    /// covering it is moved to start there.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> Result<()> {
        let Some(i) = self.entries.iter().rposition(|&(_, o)| o <= start_offset) else { return Ok(()) };
        if i == 0 && self.entries[0].1 == start_offset {
            return Ok(());
        }
        let epoch = self.entries[i].0;
        self.entries.drain(..=i);
        self.entries.insert(0, (epoch, start_offset));
        self.save()
    }

    pub fn clear(&mut self) -> Result<()> {
        if !self.entries.is_empty() {
            self.entries.clear();
            self.save()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assign_lookup_truncate_and_persist() {
        let d = tempfile::tempdir().unwrap();
        let mut c = LeaderEpochCache::load(d.path());
        c.assign(0, 0).unwrap();
        c.assign(0, 5).unwrap();
        c.assign(2, 10).unwrap();
        c.assign(5, 30).unwrap();
        assert_eq!(c.entries(), &[(0, 0), (2, 10), (5, 30)]);
        assert_eq!(c.end_offset_for(5, 42), (5, 42));
        assert_eq!(c.end_offset_for(0, 42), (0, 10));
        assert_eq!(c.end_offset_for(1, 42), (0, 10));
        assert_eq!(c.end_offset_for(3, 42), (2, 30));
        assert_eq!(c.end_offset_for(9, 42), (-1, -1));
        assert_eq!(LeaderEpochCache::load(d.path()).entries(), c.entries());
        c.truncate_from_end(30).unwrap();
        assert_eq!(c.entries(), &[(0, 0), (2, 10)]);
        c.truncate_from_start(12).unwrap();
        assert_eq!(c.entries(), &[(2, 12)]);
        c.assign(1, 50).unwrap(); // an older epoch replaces everything after it
        assert_eq!(c.entries(), &[(1, 50)]);
    }
}

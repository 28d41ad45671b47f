//! Retention and truncation: the log start offset moving up (`delete_records`,
//! `enforce_retention`) and the log end moving down (`truncate_to`,
//! `truncate_fully_and_start_at`).
//!
//! Files: segments removed from the start are renamed `<file>.deleted` and unlinked
//! `file.delete.delay.ms` later (`segment_deletion.rs`); segments removed by a
//! truncation are deleted at once. `log-start-offset-checkpoint`,
//! `recovery-point-offset-checkpoint`, `leader-epoch-checkpoint` and the cleaner's
//! checkpoint follow the new bounds.
//!
//! Invariants:
//! - `log_start_offset <= next_offset` throughout; the active segment is never deleted
//!   by retention, and no segment is deleted by time or size at or above `max_offset`.
//! - Retention deletes oldest first and stops at the first segment to keep.
//! - `truncate_to` holds `segment_shrink` for writing (taken before `inner`), so no
//!   memory-mapped read of the cleaner sees a file shrink under it; after a truncation
//!   the recovery point does not exceed the new log end.

use super::{now_ms, Log, LogInner, LOG_START_OFFSET_FILE, RECOVERY_POINT_FILE};
use crate::error::Result;
use crate::segment::LogSegment;
use crate::segment_deletion::unlink_all;

impl Log {
    /// Removes every batch whose last offset >= `offset` (a follower truncating to the
    /// leader's epoch boundary), and every leader-epoch entry starting at or past the new
    /// log end. Below the log start it truncates everything.
    pub fn truncate_to(&self, offset: i64) -> Result<()> {
        let _shrink = self.segment_shrink.write();
        let mut guard = self.inner.write();
        let inner = &mut *guard;
        inner.check_open(&self.dir)?;
        if offset >= inner.next_offset {
            // Nothing to cut, but an epoch assigned at the log end (a leader that wrote
            // nothing in it) goes, as Kafka's truncateFromEnd(logEndOffset) does.
            let end = inner.next_offset;
            return inner.epochs.truncate_from_end(end);
        }
        let first_base = *inner.segments.keys().next().unwrap();
        if offset < inner.log_start_offset || offset <= first_base {
            drop(guard);
            return self.truncate_fully_and_start_at(offset);
        }
        let doomed: Vec<i64> = inner.segments.range(offset..).map(|(b, _)| *b).collect();
        for base in doomed {
            inner.segments.remove(&base).unwrap().delete()?;
        }
        let config = inner.config.clone();
        let seg = inner.active_mut();
        let removed_base = seg.truncate_to(offset, &config)?;
        seg.on_become_active(&config)?;
        inner.next_offset = removed_base.unwrap_or(offset).min(offset);
        inner.recovery_point = inner.recovery_point.min(inner.next_offset);
        inner.epochs.truncate_from_end(inner.next_offset)?;
        self.truncate_cleaner_checkpoint(inner.next_offset)?;
        self.write_offset_checkpoint(RECOVERY_POINT_FILE, inner.recovery_point)
    }

    /// Deletes every segment and starts an empty log at `offset`.
    pub fn truncate_fully_and_start_at(&self, offset: i64) -> Result<()> {
        let mut guard = self.inner.write();
        let inner = &mut *guard;
        inner.check_open(&self.dir)?;
        let offset = offset.max(0);
        for (_, seg) in std::mem::take(&mut inner.segments) {
            seg.delete()?;
        }
        inner.segments.insert(offset, LogSegment::open(&self.dir, offset, &inner.config, true, now_ms())?);
        inner.next_offset = offset;
        inner.log_start_offset = offset;
        inner.recovery_point = offset;
        inner.epochs.clear()?;
        self.truncate_cleaner_checkpoint(offset)?;
        self.write_offset_checkpoint(RECOVERY_POINT_FILE, offset)?;
        self.write_offset_checkpoint(LOG_START_OFFSET_FILE, offset)
    }

    /// Deletes non-active segments wholly below the log start offset, then records it.
    /// As in Kafka's `deleteSegmentFiles`, their files are renamed `.deleted` and
    /// unlinked after `file.delete.delay.ms` (at once when it is 0).
    fn delete_below_start(&self, inner: &mut LogInner) -> Result<usize> {
        let bases: Vec<i64> = inner.segments.keys().copied().collect();
        let mut deleted = 0;
        for pair in bases.windows(2) {
            if pair[1] > inner.log_start_offset {
                break;
            }
            let paths = inner.segments.remove(&pair[0]).unwrap().into_deleted()?;
            unlink_all(&self.deletions.delete_after(paths, inner.config.file_delete_delay_ms))?;
            deleted += 1;
        }
        inner.epochs.truncate_from_start(inner.log_start_offset)?;
        if deleted > 0 {
            self.write_offset_checkpoint(LOG_START_OFFSET_FILE, inner.log_start_offset)?;
        }
        Ok(deleted)
    }

    /// Advances the log start offset to `before_offset` (DeleteRecords).
    pub fn delete_records(&self, before_offset: i64) -> Result<i64> {
        let mut guard = self.inner.write();
        let inner = &mut *guard;
        inner.check_open(&self.dir)?;
        if before_offset < 0 || before_offset > inner.next_offset {
            return Err(inner.out_of_range(before_offset));
        }
        if before_offset > inner.log_start_offset {
            inner.log_start_offset = before_offset;
            self.delete_below_start(inner)?;
            self.write_offset_checkpoint(LOG_START_OFFSET_FILE, inner.log_start_offset)?;
        }
        Ok(inner.log_start_offset)
    }

    /// Deletes whole non-active segments past `retention.ms` or beyond `retention.bytes`,
    /// oldest first, stopping at the first one to keep; none at or above `max_offset`.
    pub fn enforce_retention(&self, now: Option<i64>, max_offset: Option<i64>) -> Result<usize> {
        let now = now.unwrap_or_else(now_ms);
        let mut guard = self.inner.write();
        let inner = &mut *guard;
        inner.check_open(&self.dir)?;
        let bound = max_offset.unwrap_or(i64::MAX);
        let (retention_ms, retention_bytes) = (inner.config.retention_ms, inner.config.retention_bytes);
        // Segments wholly below the log start offset go first (Kafka's
        // deleteLogStartOffsetBreachedSegments), e.g. after DeleteRecords on a segment
        // that was still active then.
        let below_start = self.delete_below_start(inner)?;
        let mut excess = if retention_bytes >= 0 { inner.size() as i64 - retention_bytes } else { -1 };
        let bases: Vec<i64> = inner.segments.keys().copied().collect();
        let mut new_start = None;
        for pair in bases.windows(2) {
            if pair[1] > bound {
                break;
            }
            let seg = &inner.segments[&pair[0]];
            let by_time = retention_ms >= 0 && now - seg.largest_timestamp() > retention_ms;
            let by_size = retention_bytes >= 0 && excess - seg.size() as i64 >= 0;
            if !(by_time || by_size) {
                break;
            }
            excess -= seg.size() as i64;
            new_start = Some(pair[1]);
        }
        let Some(start) = new_start else { return Ok(below_start) };
        inner.log_start_offset = inner.log_start_offset.max(start);
        Ok(below_start + self.delete_below_start(inner)?)
    }
}

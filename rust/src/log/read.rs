//! The read path: `read` and `read_slice` (the whole batches a Fetch returns, located
//! through the segments' offset indexes) and `offset_for_timestamp` (ListOffsets,
//! through the time indexes).
//!
//! Files: the segments' `.log`, `.index` and `.timeindex`, read only.
//!
//! Invariants:
//! - A read returns whole batches only, from the one holding `offset`: at most
//!   `max_bytes` (the first batch whole when `min_one`), every batch below `max_offset`
//!   and the log end. An offset outside [log start, log end] is out of range.
//! - An offset past a segment's batches (a compaction gap, or a segment the cleaner
//!   emptied) is read from the next segment.


use super::Log;
use crate::error::Result;
use crate::file_slice::FileSlice;

impl Log {
    /// Locates the whole batches a read returns.
    fn locate(&self, offset: i64, max_bytes: usize, max_offset: Option<i64>, min_one: bool) -> Result<Option<FileSlice>> {
        let inner = self.inner.read();
        inner.check_open(&self.dir)?;
        if offset < inner.log_start_offset || offset > inner.next_offset {
            return Err(inner.out_of_range(offset));
        }
        let bound = max_offset.unwrap_or(i64::MAX).min(inner.next_offset);
        if offset >= bound {
            return Ok(None);
        }
        let from = inner.segments.range(..=offset).next_back().map_or(i64::MIN, |(b, _)| *b);
        for seg in inner.segments.range(from..).map(|(_, s)| s) {
            if let Some((pos, len, first, last)) = seg.read_range(offset, max_bytes, bound, min_one)? {
                return Ok(Some(FileSlice {
                    file: seg.file()?,
                    path: seg.log_path().to_path_buf(),
                    position: pos,
                    length: len,
                    base_offset: first.base_offset,
                    last_offset: last,
                }));
            }
            if seg.size() > 0 && seg.next_offset() > offset {
                break; // the batch holding `offset` exists but does not fit the limits
            }
            // Otherwise `offset` lies past this segment's batches (a compaction gap, or a
            // segment the cleaner emptied): the next segment holds the next batch.
        }
        Ok(None)
    }

    /// Whole batches from the one holding `offset`; see `read_slice`.
    pub fn read(&self, offset: i64, max_bytes: usize, max_offset: Option<i64>, min_one: bool) -> Result<Vec<u8>> {
        match self.locate(offset, max_bytes, max_offset, min_one)? {
            None => Ok(Vec::new()),
            Some(slice) => slice.read(),
        }
    }

    /// The byte range of whole batches from the one holding `offset`: at most
    /// `max_bytes` (the first batch whole when `min_one`), below `max_offset`.
    pub fn read_slice(&self, offset: i64, max_bytes: usize, max_offset: Option<i64>, min_one: bool) -> Result<Option<FileSlice>> {
        self.locate(offset, max_bytes, max_offset, min_one)
    }

    /// (offset, timestamp) of the first record with timestamp >= `ts`.
    pub fn offset_for_timestamp(&self, ts: i64) -> Result<Option<(i64, i64)>> {
        let inner = self.inner.read();
        inner.check_open(&self.dir)?;
        for seg in inner.segments.values() {
            if seg.next_offset() <= inner.log_start_offset || seg.max_timestamp() < ts {
                continue;
            }
            if let Some(found) = seg.find_offset_by_timestamp(ts, inner.log_start_offset)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }
}

//! What crash recovery cut from a log (`RecoveryCut`), for the broker to report per
//! partition: the bytes, and the batches, records and offsets their headers claim.
//!
//! Recovery keeps a segment's whole valid batches up to the first one that is torn,
//! fails its CRC, or does not continue the offsets (see `LogSegment::recover`); the
//! bytes after it are cut. The cut bytes are surveyed by walking their batch headers in
//! order while each is plausible (magic 2, a length that fits the file): a torn tail is
//! typically one whole header and part of its records, while a damaged region may have
//! no readable header at all. The counts are what the headers say, not validated data.

use std::fs::File;

use crate::records::record_batch::{self, LOG_OVERHEAD};
use crate::segment::read_header;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryCut {
    /// Bytes removed from segment files (cut tails and whole segments after a cut).
    pub bytes: u64,
    /// Batches whose headers could be read in the removed bytes, and their records.
    pub batches: u64,
    pub records: u64,
    /// The least base offset and the greatest last offset those headers claim.
    pub offsets: Option<(i64, i64)>,
    /// Segments removed whole (they lay after a cut one).
    pub segments_deleted: u64,
}

impl RecoveryCut {
    pub fn is_empty(&self) -> bool {
        self.bytes == 0 && self.segments_deleted == 0
    }

    /// Adds another cut (of a later segment) to this one.
    pub fn add(&mut self, other: &RecoveryCut) {
        self.bytes += other.bytes;
        self.batches += other.batches;
        self.records += other.records;
        self.segments_deleted += other.segments_deleted;
        self.offsets = match (self.offsets, other.offsets) {
            (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
            (x, None) => x,
            (None, y) => y,
        };
    }

    /// Walks the batch headers of `file` from `from` to `to` (see the module comment).
    pub fn survey(file: &File, from: u64, to: u64) -> RecoveryCut {
        let mut cut = RecoveryCut { bytes: to.saturating_sub(from), ..RecoveryCut::default() };
        let mut pos = from;
        while pos + (LOG_OVERHEAD as u64) < to {
            let Ok(Some(h)) = read_header(file, pos) else { break };
            if record_batch::check_header(&h, pos).is_err() || h.size() < LOG_OVERHEAD {
                break;
            }
            cut.batches += 1;
            cut.records += h.records_count.max(0) as u64;
            let (first, last) = (h.base_offset, h.last_offset());
            cut.offsets = Some(match cut.offsets {
                Some((a, b)) => (a.min(first), b.max(last)),
                None => (first, last),
            });
            pos += h.size() as u64;
        }
        cut
    }

    /// One line for the broker's log, e.g. `cut 3 batches, 150 records, 4521 bytes (their
    /// headers claim offsets 11662..11811)`.
    pub fn describe(&self) -> String {
        let mut s = format!("cut {} bytes: {} batches, {} records", self.bytes, self.batches, self.records);
        if let Some((a, b)) = self.offsets {
            s.push_str(&format!(" (their headers claim offsets {a}..{b})"));
        } else if self.bytes > 0 {
            s.push_str(" (no whole batch header in them)");
        }
        if self.segments_deleted > 0 {
            s.push_str(&format!(", {} segments after the cut deleted", self.segments_deleted));
        }
        s
    }
}

//! `LiveRecords`: per dirty segment, how many of its records the offset map still holds as
//! the latest for their key, counted while the map is built, so that a segment whose
//! records all lost to later ones can be dropped without being read again.
//!
//! Counting: when the map takes offset `o` for a key hash it did not hold, the segment of
//! `o` gains a live record; when it moves a hash from `p` to a larger `o`, the segment of
//! `p` loses one and the segment of `o` gains one. The count is by hash, exactly as the
//! rewrite decides (`SegmentCleaner::keep` drops a record below the map's end when the map
//! holds a larger offset for its hash), so hash collisions count the same way in both.
//!
//! A segment is `all_superseded` when it was mapped whole in this pass, holds at least one
//! batch, has no live record, and each of its batches is one the rewrite would drop once
//! all its records go and whose dropping changes no state for the batches after it:
//! - a data batch (no control batch: markers follow their own rules);
//! - not transactional (aborted data and `CleanedTransactions` state);
//! - with at least one record (an empty batch is copied as it is);
//! - not its producer's last data batch (that one is kept, emptied);
//! - not uncompressed with LogAppendTime (the rewrite decodes those in full, the map pass
//!   skims them: only batches both passes check the same way are skipped).
//!
//! Null keys are never mapped and tombstones count like any value, so neither needs a
//! rule: the rewrite drops the first always, and the second whenever it is not the latest.
//! The rewrite of such a segment writes nothing; its counters (`segment_stats`) are the
//! ones the rewrite would report.

use crate::records::record_batch::BatchHeader;
use crate::transactions::LogTransactions;

#[derive(Clone, Debug, Default)]
pub struct LiveRecords {
    /// Base offsets of the segments counted, ascending; the last is the one being mapped.
    bases: Vec<i64>,
    segments: Vec<SegmentCount>,
}

#[derive(Clone, Copy, Debug, Default)]
struct SegmentCount {
    live: u64,
    batches: u64,
    records: u64,
    /// Every batch so far is one the rewrite drops whole once its records all go.
    droppable: bool,
}

impl LiveRecords {
    /// The map pass starts on the segment at `base` (above every segment counted so far).
    pub fn start_segment(&mut self, base: i64) {
        debug_assert!(self.bases.last().is_none_or(|&b| b < base));
        self.bases.push(base);
        self.segments.push(SegmentCount { droppable: true, ..Default::default() });
    }

    fn current(&mut self) -> &mut SegmentCount {
        self.segments.last_mut().expect("start_segment before the first batch")
    }

    /// A batch the map pass skips (control, aborted).
    pub fn on_unmapped_batch(&mut self) {
        let c = self.current();
        c.batches += 1;
        c.droppable = false;
    }

    /// A data batch whose records are about to be mapped.
    pub fn on_mapped_batch(&mut self, h: &BatchHeader, txns: &LogTransactions) {
        let c = self.current();
        c.batches += 1;
        c.records += h.records_count.max(0) as u64;
        let droppable = !h.is_transactional()
            && h.records_count > 0
            && !txns.is_last_batch_of_producer(h)
            && (h.codec_id() != 0 || !h.is_log_append_time());
        c.droppable &= droppable;
    }

    /// The map took `offset` (in the current segment) for a hash that held `previous`.
    #[inline]
    pub fn on_put(&mut self, previous: Option<i64>, offset: i64) {
        match previous {
            None => {}
            Some(p) if p < offset => {
                let i = match self.bases.last() {
                    Some(&b) if p >= b => self.bases.len() - 1,
                    _ => self.bases.partition_point(|&b| b <= p) - 1,
                };
                self.segments[i].live -= 1;
            }
            Some(_) => return,
        }
        self.current().live += 1;
    }

    /// (batches, records) of the segment at `base` when it may be dropped unread; see the
    /// module comment. Only for a segment the pass mapped whole.
    pub fn all_superseded(&self, base: i64) -> Option<(u64, u64)> {
        let i = self.bases.binary_search(&base).ok()?;
        let c = &self.segments[i];
        (c.droppable && c.live == 0 && c.batches > 0).then_some((c.batches, c.records))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::record::NewRecord;
    use crate::records::record_batch::{encode, BatchOptions};

    fn header(base: i64, producer_id: i64) -> BatchHeader {
        let r = NewRecord { offset: base, timestamp: 1, key: Some(b"k".to_vec()), value: Some(b"v".to_vec()), headers: vec![] };
        BatchHeader::parse(&encode(&[r], &BatchOptions { base_offset: base, producer_id, producer_epoch: 0, base_sequence: 0, ..Default::default() }))
    }

    #[test]
    fn a_segment_goes_when_every_record_moved_on() {
        let txns = LogTransactions::default();
        let mut live = LiveRecords::default();
        // Segment 0: offsets 0, 1 (keys a, b). Segment 10: offset 10 (a), 11 (a again).
        live.start_segment(0);
        live.on_mapped_batch(&header(0, -1), &txns);
        live.on_put(None, 0);
        live.on_mapped_batch(&header(1, -1), &txns);
        live.on_put(None, 1);
        live.start_segment(10);
        live.on_mapped_batch(&header(10, -1), &txns);
        live.on_put(Some(0), 10);
        live.on_put(Some(10), 11);
        assert_eq!(live.all_superseded(0), None, "b at 1 is still the latest");
        assert_eq!(live.all_superseded(10), None);
        live.on_put(Some(1), 12);
        assert_eq!(live.all_superseded(0), Some((2, 2)));
        // An older offset for a hash changes nothing; unknown bases are never dropped.
        live.on_put(Some(12), 5);
        assert_eq!(live.all_superseded(0), Some((2, 2)));
        assert_eq!(live.all_superseded(7), None);
    }

    #[test]
    fn batches_the_rewrite_keeps_or_that_carry_state_keep_their_segment() {
        let mut txns = LogTransactions::default();
        txns.observe(&header(0, 7), None); // producer 7's last data batch
        let mut live = LiveRecords::default();
        live.start_segment(0);
        live.on_mapped_batch(&header(0, 7), &txns);
        assert_eq!(live.all_superseded(0), None);
        live.start_segment(1);
        live.on_unmapped_batch(); // a control or aborted batch
        assert_eq!(live.all_superseded(1), None);
        live.start_segment(2); // no batch at all
        assert_eq!(live.all_superseded(2), None);
    }
}

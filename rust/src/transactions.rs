//! What the cleaner needs to know about transactions and producers, from batch headers.
//!
//! `LogTransactions` is built by one pass over the batch headers of the whole log, in
//! offset order (`observe`). For each producer id it records:
//! - its transactions: a transactional data batch of producer P opens P's transaction
//!   (unless one is open); P's next control batch ends it, as ABORT (type 0) or COMMIT
//!   (type 1). A transaction without a marker yet is open: the first offset of the
//!   earliest open transaction is the log's first unstable offset, which the cleaner
//!   never reaches (as Kafka cleans only below the last stable offset).
//! - the base offset of its last data batch: a batch the cleaner empties is kept as an
//!   empty batch only when it is that last batch, so the producer's last sequence
//!   survives (Kafka keeps a batch holding the producer's last sequence the same way).
//!
//! `CleanedTransactions` is Kafka's `CleanedTransactionMetadata`, fed the batches of one
//! cleaning pass in offset order from the log start:
//! - a data batch of an aborted transaction is discarded;
//! - an ABORT marker may go once no batch of its transaction was seen in the pass (the
//!   data went in an earlier pass), a COMMIT marker once no batch of its transaction was
//!   seen; a marker that may go first gets a delete horizon and goes when it passes.
//!   Because a pass starts at the log start, a marker never goes while data of its
//!   transaction remains, so the header scan above stays exact after cleaning.

use std::collections::{HashMap, HashSet};

use crate::error::Result;
use crate::records::record_batch::{control_type, BatchHeader, DecodedBatch};

/// One transaction of a producer: data from `first_offset`, ended by the control batch
/// at `marker_offset` (None while open).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transaction {
    pub first_offset: i64,
    pub marker_offset: Option<i64>,
    pub aborted: bool,
}

pub const ABORT: i16 = 0;
pub const COMMIT: i16 = 1;

#[derive(Clone, Debug, Default)]
pub struct LogTransactions {
    by_producer: HashMap<i64, Vec<Transaction>>,
    last_data_batch: HashMap<i64, i64>,
}

impl LogTransactions {
    /// Takes the next batch header of the log (offset order). `control_type` is the
    /// type of a control batch's record (None for data batches and empty control batches).
    pub fn observe(&mut self, h: &BatchHeader, control_type: Option<i16>) {
        if h.producer_id < 0 {
            return;
        }
        let txns = self.by_producer.entry(h.producer_id).or_default();
        let open = txns.last_mut().filter(|t| t.marker_offset.is_none());
        if h.is_control() {
            if let (Some(t), Some(ty)) = (open, control_type) {
                t.marker_offset = Some(h.base_offset);
                t.aborted = ty == ABORT;
            }
            return;
        }
        self.last_data_batch.insert(h.producer_id, h.base_offset);
        if h.is_transactional() && open.is_none() {
            txns.push(Transaction { first_offset: h.base_offset, marker_offset: None, aborted: false });
        }
    }

    /// `observe` for a whole batch: parses its header and, for a control batch, the type
    /// of its marker record (CRC verified).
    pub fn observe_batch(&mut self, batch: &[u8], position: u64) -> Result<()> {
        let h = BatchHeader::parse(batch);
        let ty = if h.is_control() { control_batch_type(batch, position)? } else { None };
        self.observe(&h, ty);
        Ok(())
    }

    /// The first offset of the earliest transaction without a marker.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.by_producer.values().flat_map(|v| v.iter()).filter(|t| t.marker_offset.is_none()).map(|t| t.first_offset).min()
    }

    /// The transaction holding the transactional data batch `h`, if any.
    fn transaction_of(&self, h: &BatchHeader) -> Option<&Transaction> {
        let txns = self.by_producer.get(&h.producer_id)?;
        let i = txns.partition_point(|t| t.first_offset <= h.base_offset);
        txns[..i].last().filter(|t| t.marker_offset.is_none_or(|m| h.base_offset < m))
    }

    /// True for a transactional data batch whose transaction was aborted.
    pub fn is_aborted(&self, h: &BatchHeader) -> bool {
        h.is_transactional() && !h.is_control() && self.transaction_of(h).is_some_and(|t| t.aborted)
    }

    /// True when `h` is its producer's last data batch in the log.
    pub fn is_last_batch_of_producer(&self, h: &BatchHeader) -> bool {
        h.producer_id >= 0 && self.last_data_batch.get(&h.producer_id) == Some(&h.base_offset)
    }

    /// Number of transactions seen, for tests and counters.
    pub fn count(&self) -> usize {
        self.by_producer.values().map(Vec::len).sum()
    }
}

/// The control type (0 abort, 1 commit) of a control batch, None when it has no record.
pub fn control_batch_type(batch: &[u8], position: u64) -> Result<Option<i16>> {
    let decoded = DecodedBatch::new(batch, position, true)?;
    Ok(decoded.records()?.first().and_then(|r| control_type(r.key)))
}

/// Kafka's `CleanedTransactionMetadata` for one pass; see the module comment.
#[derive(Debug, Default)]
pub struct CleanedTransactions {
    /// Producers whose aborted transaction had a batch in this pass.
    aborted_seen: HashSet<i64>,
    /// Producers whose committed (or not aborted) transaction had a batch in this pass.
    committed_seen: HashSet<i64>,
}

impl CleanedTransactions {
    /// A data batch of the pass; true when it must be discarded (aborted transaction).
    pub fn on_batch_read(&mut self, txns: &LogTransactions, h: &BatchHeader) -> bool {
        if !h.is_transactional() {
            return false;
        }
        if txns.is_aborted(h) {
            self.aborted_seen.insert(h.producer_id);
            true
        } else {
            self.committed_seen.insert(h.producer_id);
            false
        }
    }

    /// A control batch of the pass; true when the marker may go (after its horizon).
    pub fn on_control_batch_read(&mut self, h: &BatchHeader, control_type: Option<i16>) -> bool {
        let saw_aborted = self.aborted_seen.remove(&h.producer_id);
        let saw_committed = self.committed_seen.remove(&h.producer_id);
        match control_type {
            Some(ABORT) => !saw_aborted,
            Some(COMMIT) => !saw_committed,
            Some(_) => false,
            None => true, // an empty control batch: already cleaned
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::record_batch::{encode, encode_control, BatchOptions};
    use crate::records::record::NewRecord;

    fn data(base: i64, pid: i64, txn: bool) -> BatchHeader {
        let r = NewRecord { offset: base, timestamp: 1, key: Some(b"k".to_vec()), value: None, headers: vec![] };
        BatchHeader::parse(&encode(&[r], &BatchOptions { base_offset: base, producer_id: pid, producer_epoch: 0, base_sequence: 0, transactional: txn, ..Default::default() }))
    }

    fn marker(base: i64, pid: i64) -> BatchHeader {
        BatchHeader::parse(&encode_control(0, 0, 1, &BatchOptions { base_offset: base, producer_id: pid, producer_epoch: 0, ..Default::default() }))
    }

    #[test]
    fn transactions_from_headers() {
        let mut t = LogTransactions::default();
        t.observe(&data(0, 1, true), None);
        t.observe(&data(1, 2, true), None);
        t.observe(&data(2, 1, true), None);
        t.observe(&marker(3, 1), Some(ABORT));
        t.observe(&data(4, 1, true), None);
        t.observe(&data(5, 3, false), None);
        t.observe(&marker(6, 2), Some(COMMIT));
        t.observe(&marker(7, 1), Some(COMMIT));
        assert_eq!(t.count(), 3);
        assert!(t.is_aborted(&data(0, 1, true)) && t.is_aborted(&data(2, 1, true)));
        assert!(!t.is_aborted(&data(4, 1, true)) && !t.is_aborted(&data(1, 2, true)));
        assert!(!t.is_aborted(&data(5, 3, false)));
        assert_eq!(t.first_unstable_offset(), None);
        assert!(t.is_last_batch_of_producer(&data(4, 1, true)) && !t.is_last_batch_of_producer(&data(2, 1, true)));
        t.observe(&data(8, 2, true), None);
        t.observe(&data(9, 1, true), None);
        assert_eq!(t.first_unstable_offset(), Some(8));

        // One pass: aborted data goes, the abort marker stays (its data was seen), the
        // commit marker of producer 2 stays (its data was seen).
        let mut c = CleanedTransactions::default();
        assert!(c.on_batch_read(&t, &data(0, 1, true)));
        assert!(!c.on_batch_read(&t, &data(1, 2, true)));
        assert!(!c.on_control_batch_read(&marker(3, 1), Some(ABORT)));
        assert!(!c.on_control_batch_read(&marker(6, 2), Some(COMMIT)));
        // Next pass, with the data gone: both markers may go.
        let mut c = CleanedTransactions::default();
        assert!(c.on_control_batch_read(&marker(3, 1), Some(ABORT)));
        assert!(c.on_control_batch_read(&marker(6, 2), Some(COMMIT)));
        assert!(c.on_control_batch_read(&marker(7, 1), None));
    }

    #[test]
    fn observe_batch_reads_the_marker_type() {
        let batch = |base: i64, pid: i64| {
            let r = NewRecord { offset: base, timestamp: 1, key: None, value: Some(b"x".to_vec()), headers: vec![] };
            encode(&[r], &BatchOptions { base_offset: base, producer_id: pid, transactional: true, ..Default::default() })
        };
        let control = |ty: i16, base: i64, pid: i64| encode_control(ty, 0, 1, &BatchOptions { base_offset: base, producer_id: pid, ..Default::default() });
        let mut t = LogTransactions::default();
        for (b, pos) in [(batch(0, 7), 0), (control(ABORT, 1, 7), 100), (batch(2, 7), 200), (control(COMMIT, 3, 7), 300), (batch(4, 8), 400)] {
            t.observe_batch(&b, pos).unwrap();
        }
        assert!(t.is_aborted(&BatchHeader::parse(&batch(0, 7))));
        assert!(!t.is_aborted(&BatchHeader::parse(&batch(2, 7))));
        assert!(!t.is_aborted(&BatchHeader::parse(&batch(4, 8))), "an open transaction is not aborted");
        assert_eq!(t.first_unstable_offset(), Some(4));
    }
}

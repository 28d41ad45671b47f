//! Transaction markers found by scanning a log, to tell aborted transactional records
//! from committed ones without a `.txnindex` (the broker writes none yet).
//!
//! Semantics: a transactional data batch of producer P at offset o belongs to an aborted
//! transaction iff the first control batch of P at an offset > o carries an ABORT marker
//! (control record key: version int16, type int16 with 0 = abort, 1 = commit). A
//! transactional batch with no later marker in the scanned log is an open transaction:
//! it is not aborted (read_uncommitted, as Spark's Kafka source reads by default).

use std::collections::HashMap;

use crate::error::Result;
use crate::record_batch::{control_type, BatchHeader, DecodedBatch};

const ABORT: i16 = 0;

#[derive(Default, Debug)]
pub struct TxnMarkers {
    /// producer id -> (marker offset, aborted), offsets ascending.
    by_producer: HashMap<i64, Vec<(i64, bool)>>,
}

impl TxnMarkers {
    pub fn new() -> Self {
        TxnMarkers::default()
    }

    /// Notes the marker of a control batch (ignores every other batch). Batches must be
    /// fed in offset order.
    pub fn observe(&mut self, batch: &[u8], position: u64) -> Result<()> {
        let h = BatchHeader::parse(batch);
        if !h.is_control() {
            return Ok(());
        }
        let decoded = DecodedBatch::new(batch, position, true)?;
        let records = decoded.records()?;
        if let Some(t) = records.first().and_then(|r| control_type(r.key)) {
            self.by_producer.entry(h.producer_id).or_default().push((h.base_offset, t == ABORT));
        }
        Ok(())
    }

    /// Whether the transactional data batch with this header was aborted.
    pub fn is_aborted(&self, h: &BatchHeader) -> bool {
        if !h.is_transactional() || h.is_control() {
            return false;
        }
        let Some(markers) = self.by_producer.get(&h.producer_id) else { return false };
        let i = markers.partition_point(|(o, _)| *o <= h.last_offset());
        markers.get(i).is_some_and(|(_, aborted)| *aborted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::NewRecord;
    use crate::record_batch::{encode, encode_control, BatchOptions};

    #[test]
    fn next_marker_decides() {
        let data = |base: i64, pid: i64| {
            let r = NewRecord { offset: base, timestamp: 1, key: None, value: Some(b"x".to_vec()), headers: vec![] };
            encode(&[r], &BatchOptions { base_offset: base, producer_id: pid, transactional: true, ..Default::default() })
        };
        let mut m = TxnMarkers::new();
        let b0 = data(0, 7);
        let b1 = data(2, 7);
        let b2 = data(4, 8);
        m.observe(&encode_control(0, 0, 1, &BatchOptions { base_offset: 1, producer_id: 7, ..Default::default() }), 0).unwrap();
        m.observe(&encode_control(1, 0, 1, &BatchOptions { base_offset: 3, producer_id: 7, ..Default::default() }), 0).unwrap();
        assert!(m.is_aborted(&BatchHeader::parse(&b0)));
        assert!(!m.is_aborted(&BatchHeader::parse(&b1)));
        assert!(!m.is_aborted(&BatchHeader::parse(&b2)));
    }
}

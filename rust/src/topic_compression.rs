//! A topic's `compression.type`, applied to what producers send.
//!
//! `producer` (the default) keeps every batch in the codec its producer chose. A codec
//! name (`gzip`, `snappy`, `lz4`, `zstd`) or `uncompressed` makes the broker re-encode
//! each data batch sent in another codec before it is appended, as Kafka's
//! LogValidator does: the records (keys, values, headers, timestamps, offset deltas)
//! and the batch's producer id, epoch, base sequence and transactional flag stay; only
//! the codec, and so the batch length and CRC, change. Control batches are the
//! broker's own and are never re-encoded.

use crate::compression::Compression;
use crate::error::{Error, Result};
use crate::log_config::LogConfig;
use crate::records::record_batch::{self, encode, BatchIter, BatchOptions, DecodedBatch};

/// The codec batches must be stored in, or None for `producer`.
pub fn target(config: &LogConfig) -> Option<Compression> {
    config.producer_rules.compression
}

/// `data` (whole producer batches) with every data batch not already in `target`
/// re-encoded in it, or None when every batch already is. A batch is validated whole
/// (CRC and records) before it is decoded, so a corrupt one is an error, not a guess.
pub fn convert(data: &[u8], target: Compression) -> Result<Option<Vec<u8>>> {
    let needs = |h: &record_batch::BatchHeader| !h.is_control() && h.compression().ok() != Some(target);
    let mut any = false;
    for item in BatchIter::new(data, 0) {
        let (_, h, _) = item?;
        any |= needs(&h);
    }
    if !any {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(data.len());
    for item in BatchIter::new(data, 0) {
        let (pos, h, bytes) = item?;
        if !needs(&h) {
            out.extend_from_slice(bytes);
            continue;
        }
        record_batch::validate(bytes, pos as u64, true)?;
        let decoded = DecodedBatch::new(bytes, pos as u64, true)?;
        let records: Vec<_> = decoded.records()?.iter().map(|r| r.to_owned_record()).collect();
        if records.len() != h.records_count as usize {
            return Err(Error::corrupt(pos as u64, format!("{} records in a batch that counts {}", records.len(), h.records_count)));
        }
        let opts = BatchOptions {
            base_offset: h.base_offset,
            compression: target,
            partition_leader_epoch: h.partition_leader_epoch,
            producer_id: h.producer_id,
            producer_epoch: h.producer_epoch,
            base_sequence: h.base_sequence,
            transactional: h.is_transactional(),
            last_offset_delta: Some(h.last_offset_delta),
            ..Default::default()
        };
        out.extend_from_slice(&encode(&records, &opts));
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::record::NewRecord;
    use crate::records::record_batch::encode_control;

    fn batch(codec: Compression, n: i64) -> Vec<u8> {
        let records: Vec<NewRecord> = (0..n)
            .map(|i| NewRecord {
                offset: i,
                timestamp: 1_000 + 7 * i,
                key: (i % 3 != 0).then(|| vec![b'k'; i as usize]),
                value: Some(format!("value {i}").into_bytes()),
                headers: vec![(b"h".to_vec(), Some(vec![i as u8]))],
            })
            .collect();
        let opts = BatchOptions { compression: codec, producer_id: 42, producer_epoch: 3, base_sequence: 17, ..Default::default() };
        encode(&records, &opts)
    }

    fn owned(data: &[u8]) -> Vec<(record_batch::BatchHeader, Vec<NewRecord>)> {
        BatchIter::new(data, 0)
            .map(|item| {
                let (pos, h, bytes) = item.unwrap();
                let d = DecodedBatch::new(bytes, pos as u64, true).unwrap();
                (h, d.records().unwrap().iter().map(|r| r.to_owned_record()).collect())
            })
            .collect()
    }

    #[test]
    fn the_target_follows_compression_type() {
        let cfg = |v: &str| LogConfig::from_pairs([("compression.type", v)]).unwrap();
        assert_eq!(target(&LogConfig::default()), None);
        assert_eq!(target(&cfg("producer")), None);
        assert_eq!(target(&cfg("uncompressed")), Some(Compression::None));
        assert_eq!(target(&cfg("zstd")), Some(Compression::Zstd));
    }

    #[test]
    fn batches_in_another_codec_are_re_encoded_keeping_records_and_producer_fields() {
        for (from, to) in [(Compression::None, Compression::Zstd), (Compression::Gzip, Compression::None), (Compression::Snappy, Compression::Lz4)] {
            let mut data = batch(from, 5);
            data.extend(batch(to, 2)); // already in the target: copied as it is
            let converted = convert(&data, to).unwrap().expect("converted");
            let (before, after) = (owned(&data), owned(&converted));
            assert_eq!(after.len(), 2);
            for ((hb, rb), (ha, ra)) in before.iter().zip(&after) {
                assert_eq!(rb, ra);
                assert_eq!(ha.compression().unwrap(), to);
                assert_eq!((ha.producer_id, ha.producer_epoch, ha.base_sequence), (hb.producer_id, hb.producer_epoch, hb.base_sequence));
                assert_eq!((ha.last_offset_delta, ha.records_count, ha.max_timestamp), (hb.last_offset_delta, hb.records_count, hb.max_timestamp));
            }
            record_batch::validate(&converted[..after[0].0.size()], 0, true).unwrap();
            assert_eq!(convert(&converted, to).unwrap(), None);
        }
    }

    #[test]
    fn control_batches_stay_and_corrupt_batches_are_refused() {
        let control = encode_control(1, 0, 1000, &BatchOptions { producer_id: 1, transactional: true, ..Default::default() });
        assert_eq!(convert(&control, Compression::Zstd).unwrap(), None);
        let mut bad = batch(Compression::None, 3);
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(matches!(convert(&bad, Compression::Zstd), Err(Error::CorruptRecord { .. })));
    }
}

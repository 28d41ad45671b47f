//! Decodes RecordBatch v2 bytes straight into Arrow columns with the schema of Spark's
//! Kafka source.
//!
//! ```text
//! column         Arrow type                         from
//! key            binary (null = null key)            record key
//! value          binary (null = tombstone)           record value
//! topic          utf8                                the reader's topic
//! partition      int32                               the reader's partition
//! offset         int64                               baseOffset + offsetDelta
//! timestamp      timestamp[us, tz=UTC]               record timestamp (ms) * 1000
//! timestampType  int32                               0 CreateTime, 1 LogAppendTime
//! headers        list<element: struct<key: utf8, value: binary>>   only with include_headers
//! ```
//!
//! Invariants: only whole batches are decoded, each with its CRC-32C verified (a torn
//! or damaged batch is an error, never half-decoded rows); control batches never yield
//! rows; a record yields a row only when it passes the `RecordFilter`. Decompression and
//! record parsing are `record_batch::DecodedBatch`'s; this module only builds columns.

use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, Int32Builder, Int64Builder, ListBuilder, StringBuilder, StructBuilder, TimestampMicrosecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};

use crate::error::{Error, Result};
use crate::records::record_batch::{BatchHeader, BatchIter, DecodedBatch};
use crate::transactions::LogTransactions;

pub const TIMESTAMP_TYPE_CREATE_TIME: i32 = 0;
pub const TIMESTAMP_TYPE_LOG_APPEND_TIME: i32 = 1;

fn header_fields() -> Fields {
    Fields::from(vec![Field::new("key", DataType::Utf8, true), Field::new("value", DataType::Binary, true)])
}

fn header_element() -> Arc<Field> {
    Arc::new(Field::new("element", DataType::Struct(header_fields()), true))
}

/// The Arrow schema of Spark's Kafka source (every column nullable, as Spark declares it).
pub fn kafka_schema(include_headers: bool) -> SchemaRef {
    let mut fields = vec![
        Field::new("key", DataType::Binary, true),
        Field::new("value", DataType::Binary, true),
        Field::new("topic", DataType::Utf8, true),
        Field::new("partition", DataType::Int32, true),
        Field::new("offset", DataType::Int64, true),
        Field::new("timestamp", DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), true),
        Field::new("timestampType", DataType::Int32, true),
    ];
    if include_headers {
        fields.push(Field::new("headers", DataType::List(header_element()), true));
    }
    Arc::new(Schema::new(fields))
}

/// Which records become rows: offsets in `[start_offset, end_offset)` and timestamps
/// (ms) in `[min_timestamp, max_timestamp]`, both bounds inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordFilter {
    pub start_offset: i64,
    pub end_offset: i64,
    pub min_timestamp: i64,
    pub max_timestamp: i64,
}

impl Default for RecordFilter {
    fn default() -> Self {
        RecordFilter { start_offset: 0, end_offset: i64::MAX, min_timestamp: i64::MIN, max_timestamp: i64::MAX }
    }
}

impl RecordFilter {
    /// Whether any record of a batch with this header can pass, from the header alone.
    /// A batch's records all lie in [baseOffset, lastOffset] and have timestamps
    /// <= maxTimestamp (for LogAppendTime every record has exactly maxTimestamp).
    pub fn may_match(&self, h: &BatchHeader) -> bool {
        h.last_offset() >= self.start_offset
            && h.base_offset < self.end_offset
            && h.max_timestamp >= self.min_timestamp
            && (!h.is_log_append_time() || h.max_timestamp <= self.max_timestamp)
    }

    fn matches(&self, offset: i64, timestamp: i64) -> bool {
        offset >= self.start_offset && offset < self.end_offset && timestamp >= self.min_timestamp && timestamp <= self.max_timestamp
    }
}

/// Column builders for one output batch of one topic-partition.
pub struct ArrowDecoder {
    topic: String,
    partition: i32,
    include_headers: bool,
    schema: SchemaRef,
    key: BinaryBuilder,
    value: BinaryBuilder,
    topic_col: StringBuilder,
    partition_col: Int32Builder,
    offset: Int64Builder,
    timestamp: TimestampMicrosecondBuilder,
    timestamp_type: Int32Builder,
    headers: ListBuilder<StructBuilder>,
    rows: usize,
}

/// What one `append_batch` call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Appended {
    pub rows: usize,
    /// The offset after the batch (lastOffset + 1): where the next read starts.
    pub next_offset: i64,
}

impl ArrowDecoder {
    pub fn new(topic: &str, partition: i32, include_headers: bool) -> Self {
        let mut d = ArrowDecoder {
            topic: topic.to_string(),
            partition,
            include_headers,
            schema: kafka_schema(include_headers),
            key: BinaryBuilder::new(),
            value: BinaryBuilder::new(),
            topic_col: StringBuilder::new(),
            partition_col: Int32Builder::new(),
            offset: Int64Builder::new(),
            timestamp: TimestampMicrosecondBuilder::new(),
            timestamp_type: Int32Builder::new(),
            headers: Self::headers_builder(0),
            rows: 0,
        };
        d.reserve(1024, 64 * 1024);
        d
    }

    fn headers_builder(capacity: usize) -> ListBuilder<StructBuilder> {
        let s = StructBuilder::new(header_fields(), vec![Box::new(StringBuilder::new()), Box::new(BinaryBuilder::new())]);
        ListBuilder::with_capacity(s, capacity).with_field(header_element())
    }

    /// Fresh builders sized for `rows` rows and `bytes` bytes of keys plus values.
    fn reserve(&mut self, rows: usize, bytes: usize) {
        self.key = BinaryBuilder::with_capacity(rows, bytes / 8);
        self.value = BinaryBuilder::with_capacity(rows, bytes);
        self.topic_col = StringBuilder::with_capacity(rows, rows * self.topic.len());
        self.partition_col = Int32Builder::with_capacity(rows);
        self.offset = Int64Builder::with_capacity(rows);
        self.timestamp = TimestampMicrosecondBuilder::with_capacity(rows).with_timezone("UTC");
        self.timestamp_type = Int32Builder::with_capacity(rows);
        if self.include_headers {
            self.headers = Self::headers_builder(rows);
        }
    }

    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// Rows built since the last `finish`.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Decodes one whole batch (`batch.len() == header.size()`, `position` its place in
    /// the segment for error messages) and appends the records that pass `filter`.
    /// Control batches and batches marked `skip` (aborted transactions) yield no rows.
    pub fn append_batch(&mut self, batch: &[u8], position: u64, filter: &RecordFilter, skip: bool) -> Result<Appended> {
        let h = BatchHeader::parse(batch);
        let next_offset = h.next_offset();
        if skip || h.is_control() || !filter.may_match(&h) {
            return Ok(Appended { rows: 0, next_offset });
        }
        let decoded = DecodedBatch::new(batch, position, true)?;
        let ts_type = if h.is_log_append_time() { TIMESTAMP_TYPE_LOG_APPEND_TIME } else { TIMESTAMP_TYPE_CREATE_TIME };
        let mut rows = 0;
        for r in decoded.records()? {
            if !filter.matches(r.offset, r.timestamp) {
                continue;
            }
            match r.key {
                Some(k) => self.key.append_value(k),
                None => self.key.append_null(),
            }
            match r.value {
                Some(v) => self.value.append_value(v),
                None => self.value.append_null(),
            }
            self.topic_col.append_value(&self.topic);
            self.partition_col.append_value(self.partition);
            self.offset.append_value(r.offset);
            self.timestamp.append_value(r.timestamp.saturating_mul(1000));
            self.timestamp_type.append_value(ts_type);
            if self.include_headers {
                let s = self.headers.values();
                for (hk, hv) in &r.headers {
                    let key = std::str::from_utf8(hk)
                        .map_err(|_| Error::corrupt(position, format!("header key of record {} is not UTF-8", r.offset)))?;
                    s.field_builder::<StringBuilder>(0).expect("header key builder").append_value(key);
                    match hv {
                        Some(v) => s.field_builder::<BinaryBuilder>(1).expect("header value builder").append_value(v),
                        None => s.field_builder::<BinaryBuilder>(1).expect("header value builder").append_null(),
                    }
                    s.append(true);
                }
                self.headers.append(true);
            }
            rows += 1;
        }
        self.rows += rows;
        Ok(Appended { rows, next_offset })
    }

    /// The rows built so far as one Arrow record batch; the builders start over, sized
    /// like the batch just finished.
    pub fn finish(&mut self) -> RecordBatch {
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(self.key.finish()),
            Arc::new(self.value.finish()),
            Arc::new(self.topic_col.finish()),
            Arc::new(self.partition_col.finish()),
            Arc::new(self.offset.finish()),
            Arc::new(self.timestamp.finish()),
            Arc::new(self.timestamp_type.finish()),
        ];
        if self.include_headers {
            columns.push(Arc::new(self.headers.finish()));
        }
        let value_bytes = columns[1].get_buffer_memory_size();
        let rows = self.rows;
        self.rows = 0;
        self.reserve(rows.max(1024), value_bytes.max(64 * 1024));
        RecordBatch::try_new(self.schema.clone(), columns).expect("builders match the Kafka schema")
    }
}

/// Decodes the whole batches of `buf` (as a Fetch returns them) into one Arrow batch;
/// returns it with the offset after the last whole batch (`filter.start_offset` when
/// there is none). The markers within `buf` decide which transactions were aborted.
pub fn decode_buffer(buf: &[u8], topic: &str, partition: i32, include_headers: bool, filter: &RecordFilter) -> Result<(RecordBatch, i64)> {
    let mut txns = LogTransactions::default();
    for item in BatchIter::new(buf, 0) {
        let (pos, _, b) = item?;
        txns.observe_batch(b, pos as u64)?;
    }
    let mut decoder = ArrowDecoder::new(topic, partition, include_headers);
    let mut next = filter.start_offset;
    for item in BatchIter::new(buf, 0) {
        let (pos, h, b) = item?;
        let a = decoder.append_batch(b, pos as u64, filter, txns.is_aborted(&h))?;
        next = next.max(a.next_offset);
    }
    Ok((decoder.finish(), next))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compression::{Compression, ALL};
    use crate::records::record::NewRecord;
    use crate::records::record_batch::{encode, encode_control, BatchOptions};
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int64Type, TimestampMicrosecondType};
    use arrow_array::Array;

    fn recs(base: i64, n: usize) -> Vec<NewRecord> {
        (0..n)
            .map(|i| NewRecord {
                offset: base + i as i64,
                timestamp: 1_000 + base + i as i64,
                key: (i % 2 == 0).then(|| format!("k{i}").into_bytes()),
                value: Some(vec![b'v'; i]),
                headers: vec![(b"h".to_vec(), Some(vec![i as u8])), (b"n".to_vec(), None)],
            })
            .collect()
    }

    #[test]
    fn every_codec_decodes_to_the_same_columns() {
        for c in ALL {
            let b = encode(&recs(10, 5), &BatchOptions { base_offset: 10, compression: c, ..Default::default() });
            let mut d = ArrowDecoder::new("t", 3, true);
            let a = d.append_batch(&b, 0, &RecordFilter::default(), false).unwrap();
            assert_eq!(a, Appended { rows: 5, next_offset: 15 });
            let rb = d.finish();
            assert_eq!(rb.num_rows(), 5);
            let key = rb.column(0).as_binary::<i32>();
            assert!(key.is_null(1) && key.value(2) == b"k2");
            assert_eq!(rb.column(1).as_binary::<i32>().value(4), b"vvvv");
            assert_eq!(rb.column(2).as_string::<i32>().value(0), "t");
            assert_eq!(rb.column(4).as_primitive::<Int64Type>().values().to_vec(), vec![10, 11, 12, 13, 14]);
            assert_eq!(rb.column(5).as_primitive::<TimestampMicrosecondType>().value(0), 1_010_000);
            let headers = rb.column(7).as_list::<i32>();
            assert_eq!(headers.value(0).len(), 2, "{}", c.name());
            assert!(headers.value(0).as_struct().column(1).is_null(1));
        }
    }

    #[test]
    fn filter_and_control_batches() {
        let b = encode(&recs(0, 10), &BatchOptions { compression: Compression::Lz4, ..Default::default() });
        let ctl = encode_control(0, 0, 5, &BatchOptions { base_offset: 10, ..Default::default() });
        let mut d = ArrowDecoder::new("t", 0, false);
        let f = RecordFilter { start_offset: 3, end_offset: 8, min_timestamp: 1_004, max_timestamp: i64::MAX };
        assert_eq!(d.append_batch(&b, 0, &f, false).unwrap().rows, 4);
        assert_eq!(d.append_batch(&ctl, 0, &RecordFilter::default(), false).unwrap(), Appended { rows: 0, next_offset: 11 });
        assert_eq!(d.append_batch(&b, 0, &RecordFilter::default(), true).unwrap().rows, 0);
        let rb = d.finish();
        assert_eq!(rb.num_columns(), 7);
        assert_eq!(rb.column(4).as_primitive::<Int64Type>().values().to_vec(), vec![4, 5, 6, 7]);
        assert_eq!(d.rows(), 0);
    }

    #[test]
    fn a_damaged_batch_is_an_error() {
        let mut b = encode(&recs(0, 3), &BatchOptions::default());
        let n = b.len();
        b[n - 1] ^= 1;
        assert!(ArrowDecoder::new("t", 0, false).append_batch(&b, 0, &RecordFilter::default(), false).is_err());
    }
}

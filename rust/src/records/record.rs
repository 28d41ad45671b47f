//! One record inside a RecordBatch v2 (after decompression of the record area).
//!
//! ```text
//! length          varint   bytes that follow
//! attributes      int8     unused, 0
//! timestampDelta  varlong  relative to the batch's baseTimestamp
//! offsetDelta     varint   relative to the batch's baseOffset
//! keyLength       varint   -1 = null key
//! key             bytes
//! valueLength     varint   -1 = null value (a tombstone)
//! value           bytes
//! headerCount     varint
//! headers         [keyLength varint, key bytes, valueLength varint (-1 null), value bytes]
//! ```

use crate::error::{Error, Result};
use crate::varint::{put_varint, put_varlong, read_raw, unzigzag64, varint_len, varlong_len, Cursor};

/// A record borrowed from a decoded record area; offsets and timestamps are absolute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordRef<'a> {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: Vec<(&'a [u8], Option<&'a [u8]>)>,
}

/// A record to encode: `offset` and `timestamp` are absolute; the encoder derives deltas.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NewRecord {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl RecordRef<'_> {
    pub fn to_owned_record(&self) -> NewRecord {
        NewRecord {
            offset: self.offset,
            timestamp: self.timestamp,
            key: self.key.map(<[u8]>::to_vec),
            value: self.value.map(<[u8]>::to_vec),
            headers: self.headers.iter().map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec))).collect(),
        }
    }
}

fn nullable_len(b: Option<&[u8]>) -> usize {
    match b {
        None => varint_len(-1),
        Some(b) => varint_len(b.len() as i32) + b.len(),
    }
}

fn put_nullable(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => put_varint(out, -1),
        Some(b) => {
            put_varint(out, b.len() as i32);
            out.extend_from_slice(b);
        }
    }
}

/// Appends one encoded record to `out`.
pub fn write_record(out: &mut Vec<u8>, rec: &NewRecord, base_offset: i64, base_timestamp: i64) {
    let ts_delta = rec.timestamp.wrapping_sub(base_timestamp);
    let off_delta = (rec.offset - base_offset) as i32;
    let mut body = 1 + varlong_len(ts_delta) + varint_len(off_delta);
    body += nullable_len(rec.key.as_deref()) + nullable_len(rec.value.as_deref());
    body += varint_len(rec.headers.len() as i32);
    for (k, v) in &rec.headers {
        body += nullable_len(Some(k)) + nullable_len(v.as_deref());
    }
    out.reserve(body + 5);
    put_varint(out, body as i32);
    out.push(0);
    put_varlong(out, ts_delta);
    put_varint(out, off_delta);
    put_nullable(out, rec.key.as_deref());
    put_nullable(out, rec.value.as_deref());
    put_varint(out, rec.headers.len() as i32);
    for (k, v) in &rec.headers {
        put_nullable(out, Some(k));
        put_nullable(out, v.as_deref());
    }
}

/// Reads one record. `log_append_time` overrides every record's timestamp, as Kafka's
/// readers do for batches stamped with LogAppendTime.
pub fn read_record<'a>(
    cur: &mut Cursor<'a>,
    base_offset: i64,
    base_timestamp: i64,
    log_append_time: Option<i64>,
) -> Result<RecordRef<'a>> {
    let start = cur.pos;
    let len = cur.varint()?;
    if len < 0 || len as usize > cur.remaining() {
        return Err(Error::corrupt(cur.base + start as u64, format!("record length {len} runs past the batch")));
    }
    let end = cur.pos + len as usize;
    let mut rec = Cursor { buf: &cur.buf[..end], pos: cur.pos, base: cur.base };
    let _attributes = rec.i8()?;
    let ts_delta = rec.varlong()?;
    let off_delta = rec.varint()?;
    let key = rec.nullable_bytes()?;
    let value = rec.nullable_bytes()?;
    let header_count = rec.varint()?;
    if header_count < 0 || header_count as usize > rec.remaining() {
        return Err(Error::corrupt(cur.base + start as u64, format!("bad header count {header_count}")));
    }
    let mut headers = Vec::with_capacity(header_count as usize);
    for _ in 0..header_count {
        let hk = rec.nullable_bytes()?.ok_or_else(|| Error::corrupt(cur.base + rec.pos as u64, "null header key"))?;
        let hv = rec.nullable_bytes()?;
        headers.push((hk, hv));
    }
    if rec.pos != end {
        return Err(Error::corrupt(cur.base + start as u64, "record length disagrees with its fields"));
    }
    cur.pos = end;
    Ok(RecordRef {
        offset: base_offset + off_delta as i64,
        timestamp: log_append_time.unwrap_or(base_timestamp.wrapping_add(ts_delta)),
        key,
        value,
        headers,
    })
}

/// Walks `count` records of an uncompressed record area checking only the framing:
/// each length fits, the offset deltas are 0, 1, 2, ... when `contiguous`, and the
/// records end exactly at the end of the area.
pub fn check_framing(area: &[u8], count: i32, contiguous: bool, base: u64) -> Result<()> {
    if framing_holds(area, count, contiguous) {
        return Ok(());
    }
    check_framing_naming_the_error(area, count, contiguous, base)
}

/// `check_framing`'s walk without error values, for the common case of valid input: it
/// holds exactly when `check_framing_naming_the_error` returns `Ok`.
fn framing_holds(area: &[u8], count: i32, contiguous: bool) -> bool {
    let mut pos = 0usize;
    for i in 0..count {
        let Some(len) = read_raw(area, &mut pos, 5).map(unzigzag64) else { return false };
        if len < 0 || len as usize > area.len() - pos {
            return false;
        }
        let next = pos + len as usize;
        if contiguous {
            pos += 1; // attributes
            if pos > area.len() || read_raw(area, &mut pos, 10).is_none() {
                return false;
            }
            if read_raw(area, &mut pos, 5).map(unzigzag64) != Some(i as i64) {
                return false;
            }
        }
        pos = next;
    }
    pos == area.len()
}

fn check_framing_naming_the_error(area: &[u8], count: i32, contiguous: bool, base: u64) -> Result<()> {
    let mut cur = Cursor::new(area, base);
    for i in 0..count {
        let at = cur.pos;
        let len = cur.varint()?;
        if len < 0 || len as usize > cur.remaining() {
            return Err(Error::corrupt(base + at as u64, format!("record {i} length {len} runs past the batch")));
        }
        let next = cur.pos + len as usize;
        if contiguous {
            cur.i8()?;
            cur.varlong()?;
            let delta = cur.varint()?;
            if delta != i {
                return Err(Error::corrupt(base + at as u64, format!("record {i} has offset delta {delta}")));
            }
        }
        cur.pos = next;
    }
    if cur.remaining() != 0 {
        return Err(Error::corrupt(base + cur.pos as u64, format!("{} bytes after the last of {count} records", cur.remaining())));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn area(n: usize, value_len: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for i in 0..n {
            let r = NewRecord { offset: i as i64, timestamp: 1000 + i as i64, key: Some(vec![1; i % 5]), value: Some(vec![7; value_len]), headers: vec![] };
            write_record(&mut out, &r, 0, 1000);
        }
        out
    }

    #[test]
    fn the_fast_walk_agrees_with_the_one_naming_errors() {
        // xorshift: no dependency, reproducible.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for case in 0..4000 {
            let n = (next() % 40) as usize;
            let mut a = area(n, (next() % 300) as usize);
            match case % 4 {
                0 => {}
                1 if !a.is_empty() => {
                    let at = (next() as usize) % a.len();
                    a[at] = next() as u8;
                }
                2 => a.truncate((next() as usize) % (a.len() + 1)),
                _ => a.extend((0..next() % 4).map(|_| next() as u8)),
            }
            for contiguous in [true, false] {
                let count = if next() % 8 == 0 { n as i32 + 1 } else { n as i32 };
                let slow = check_framing_naming_the_error(&a, count, contiguous, 0).is_ok();
                assert_eq!(framing_holds(&a, count, contiguous), slow, "case {case}");
                assert_eq!(check_framing(&a, count, contiguous, 0).is_ok(), slow);
            }
        }
    }
}

//! The records of a compressed batch, walked as its codec streams them out, for the
//! append-time checks (`record_batch::validate_contents`). Only each record's length
//! and leading fields are read and the rest is skipped, so a check holds one decoder
//! buffer whatever the batch decompresses to, as Kafka's skip-key-value iterator does:
//! a compression bomb costs the time to decompress it, not the memory.
//!
//! Record (v2): length varint, attributes int8, timestampDelta varlong, offsetDelta
//! varint, keyLength varint, key, valueLength varint, value, header count varint,
//! headers. The leading fields read here must lie within the record's length.

use std::io::{self, BufRead, BufReader, Read};

use crate::error::{Error, Result};
use crate::varint::Cursor;

/// The leading fields of one record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHead {
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key_len: i32,
}

/// Bytes the leading fields can take: attributes 1, timestampDelta up to 10,
/// offsetDelta up to 5, keyLength up to 5.
const HEAD_MAX: usize = 21;
const BUFFER: usize = 64 << 10;

/// Reads `count` records from `area` (a decoder of the record area; `base` is the
/// area's position in the log, for error messages) and calls `each` with every record's
/// index and leading fields. Fails, as `record::check_framing` does, when a length runs
/// past the area, when bytes follow the last record, and also when a record is too
/// short for its leading fields. A decoder error is CorruptRecord ("`codec`
/// decompression failed").
pub fn walk(area: impl Read, count: i32, base: u64, codec: &str, mut each: impl FnMut(i32, RecordHead) -> Result<()>) -> Result<()> {
    let mut s = Stream { inner: BufReader::with_capacity(BUFFER, area), pos: 0, base, codec };
    let mut head = [0u8; HEAD_MAX];
    for i in 0..count {
        let at = s.pos;
        // Most records' length and leading fields lie whole in the decoder's buffer and
        // are parsed there; the byte-wise path handles those split by its end.
        let (len, fields) = match s.buffered_head(i)? {
            Some(found) => found,
            None => {
                let len = s.varint(i)?;
                if len < 0 {
                    return Err(Error::corrupt(base + at, format!("record {i} has length {len}")));
                }
                let head_len = HEAD_MAX.min(len as usize);
                if s.read_up_to(&mut head[..head_len])? < head_len {
                    return Err(s.past_end(i, at, len as u64));
                }
                (len as u64, parse_head(&head[..head_len]).ok_or_else(|| too_short(base + at, i, len as u64))?)
            }
        };
        let head_len = HEAD_MAX.min(len as usize);
        let rest = len - head_len as u64;
        if s.skip(rest)? < rest {
            return Err(s.past_end(i, at, len));
        }
        each(i, fields)?;
    }
    let mut extra = [0u8; 1];
    if s.read_up_to(&mut extra)? != 0 {
        return Err(Error::corrupt(base + s.pos - 1, format!("bytes after the last of {count} records")));
    }
    Ok(())
}

/// The leading fields at the start of `head` (the whole record if shorter than
/// HEAD_MAX), or None when they do not fit in it.
fn parse_head(head: &[u8]) -> Option<RecordHead> {
    let mut cur = Cursor::new(head, 0);
    cur.i8().ok()?;
    Some(RecordHead { timestamp_delta: cur.varlong().ok()?, offset_delta: cur.varint().ok()?, key_len: cur.varint().ok()? })
}

fn too_short(position: u64, i: i32, len: u64) -> Error {
    Error::corrupt(position, format!("record {i} of {len} bytes is too short for its leading fields"))
}

struct Stream<'c, R: Read> {
    inner: BufReader<R>,
    /// Bytes consumed from the decompressed area.
    pos: u64,
    base: u64,
    codec: &'c str,
}

impl<R: Read> Stream<'_, R> {
    fn decode_error(&self, e: io::Error) -> Error {
        Error::corrupt(self.base + self.pos, format!("{} decompression failed: {e}", self.codec))
    }

    fn past_end(&self, i: i32, at: u64, len: u64) -> Error {
        Error::corrupt(self.base + at, format!("record {i} length {len} runs past the batch"))
    }

    /// Fills `buf` as far as the area goes; the count read.
    fn read_up_to(&mut self, buf: &mut [u8]) -> Result<usize> {
        let mut n = 0;
        while n < buf.len() {
            match self.inner.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.decode_error(e)),
            }
        }
        self.pos += n as u64;
        Ok(n)
    }

    /// Discards up to `n` bytes; the count discarded.
    fn skip(&mut self, n: u64) -> Result<u64> {
        let mut left = n;
        while left > 0 {
            let available = match self.inner.fill_buf() {
                Ok(b) => b.len(),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.decode_error(e)),
            };
            if available == 0 {
                break;
            }
            let k = (available as u64).min(left) as usize;
            self.inner.consume(k);
            left -= k as u64;
        }
        self.pos += n - left;
        Ok(n - left)
    }

    /// Record `i`'s length and leading fields, consumed, when the buffer holds them
    /// whole (None, nothing consumed, when it does not).
    fn buffered_head(&mut self, i: i32) -> Result<Option<(u64, RecordHead)>> {
        let buf = match self.inner.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(None),
            Err(e) => return Err(self.decode_error(e)),
        };
        if buf.len() < 5 + HEAD_MAX {
            return Ok(None);
        }
        let at = self.pos;
        let mut p = 0;
        let Some(raw) = crate::varint::read_raw(buf, &mut p, 5) else {
            return Err(Error::corrupt(self.base + at, format!("record {i} length varint is too long")));
        };
        let len = crate::varint::unzigzag64(raw) as i32;
        if len < 0 {
            return Err(Error::corrupt(self.base + at, format!("record {i} has length {len}")));
        }
        let head_len = HEAD_MAX.min(len as usize);
        let fields = parse_head(&buf[p..p + head_len]).ok_or_else(|| too_short(self.base + at, i, len as u64))?;
        self.inner.consume(p + head_len);
        self.pos += (p + head_len) as u64;
        Ok(Some((len as u64, fields)))
    }

    /// A zigzag varint of at most 5 bytes (record `i`'s length).
    fn varint(&mut self, i: i32) -> Result<i32> {
        let at = self.pos;
        let mut raw = 0u64;
        for shift in 0..5 {
            let mut b = [0u8; 1];
            if self.read_up_to(&mut b)? == 0 {
                return Err(Error::corrupt(self.base + at, format!("record {i} length is truncated")));
            }
            raw |= ((b[0] & 0x7f) as u64) << (7 * shift);
            if b[0] < 0x80 {
                return Ok(crate::varint::unzigzag64(raw) as i32);
            }
        }
        Err(Error::corrupt(self.base + at, format!("record {i} length varint is too long")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::record::{check_framing, write_record, NewRecord};

    fn area(n: usize, value_len: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for i in 0..n {
            let key = (i % 2 == 0).then(|| vec![b'k'; i % 7]);
            let r = NewRecord { offset: i as i64, timestamp: 1000 + i as i64, key, value: Some(vec![7u8; value_len + i]), headers: vec![] };
            write_record(&mut out, &r, 0, 1000);
        }
        out
    }

    fn heads(a: &[u8], count: i32) -> Result<Vec<RecordHead>> {
        let mut out = Vec::new();
        walk(a, count, 100, "test", |i, h| {
            assert_eq!(i as usize, out.len());
            out.push(h);
            Ok(())
        })?;
        Ok(out)
    }

    #[test]
    fn reads_every_records_leading_fields() {
        let a = area(50, 30);
        let h = heads(&a, 50).unwrap();
        for (i, h) in h.iter().enumerate() {
            assert_eq!((h.timestamp_delta, h.offset_delta), (i as i64, i as i32));
            assert_eq!(h.key_len, if i % 2 == 0 { (i % 7) as i32 } else { -1 });
        }
    }

    #[test]
    fn agrees_with_check_framing_on_cut_and_padded_areas() {
        let a = area(20, 3);
        for cut in 0..a.len() {
            let in_memory = check_framing(&a[..cut], 20, true, 100).is_ok();
            assert_eq!(heads(&a[..cut], 20).is_ok(), in_memory, "cut at {cut}");
            assert!(!in_memory);
        }
        let mut padded = a.clone();
        padded.push(0);
        assert!(heads(&padded, 20).unwrap_err().to_string().contains("bytes after the last of 20 records"));
        assert!(heads(&a, 21).unwrap_err().to_string().contains("record 20 length is truncated"));
        assert!(heads(&a, 20).is_ok() && check_framing(&a, 20, true, 100).is_ok());
    }

    #[test]
    fn a_record_too_short_for_its_fields_is_corrupt() {
        // length 2: attributes and a timestamp delta, no offset delta or key length
        let e = heads(&[4, 0, 0], 1).unwrap_err().to_string();
        assert!(e.contains("record 0 of 2 bytes is too short"), "{e}");
        let e = heads(&[1], 1).unwrap_err().to_string();
        assert!(e.contains("record 0 has length -1"), "{e}");
        let e = heads(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01], 1).unwrap_err().to_string();
        assert!(e.contains("too long"), "{e}");
    }

    #[test]
    fn a_decoder_error_names_the_codec() {
        struct Failing;
        impl Read for Failing {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::other("bad block"))
            }
        }
        let e = walk(Failing, 1, 7, "zstd", |_, _| Ok(())).unwrap_err().to_string();
        assert!(e.contains("zstd decompression failed: bad block"), "{e}");
    }
}

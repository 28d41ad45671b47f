//! Zigzag varints as used inside Kafka records (protobuf-style base-128, little-endian groups).
//!
//! `varint` is a zigzag-encoded i32 (at most 5 bytes), `varlong` a zigzag-encoded i64
//! (at most 10 bytes). Readers advance a cursor and fail on truncation or overlong input.

use crate::error::{Error, Result};

pub fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

pub fn unzigzag64(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

pub fn put_varlong(out: &mut Vec<u8>, v: i64) {
    let mut u = zigzag64(v);
    while u >= 0x80 {
        out.push((u as u8) | 0x80);
        u >>= 7;
    }
    out.push(u as u8);
}

pub fn put_varint(out: &mut Vec<u8>, v: i32) {
    put_varlong(out, v as i64)
}

pub fn varlong_len(v: i64) -> usize {
    let u = zigzag64(v);
    (64 - (u | 1).leading_zeros() as usize).div_ceil(7)
}

pub fn varint_len(v: i32) -> usize {
    varlong_len(v as i64)
}

/// The unsigned value of the base-128 varint at `*pos` (at most `max_bytes` long), moving
/// `*pos` past it; `None` when it is truncated or longer than `max_bytes`.
#[inline(always)]
pub fn read_raw(buf: &[u8], pos: &mut usize, max_bytes: usize) -> Option<u64> {
    let mut result = 0u64;
    for i in 0..max_bytes {
        let b = *buf.get(*pos)?;
        *pos += 1;
        result |= ((b & 0x7f) as u64) << (7 * i);
        if b < 0x80 {
            return Some(result);
        }
    }
    None
}

/// A bounds-checked reader over a record area. `base` is the absolute byte position of
/// `buf[0]`, used only in error messages.
pub struct Cursor<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
    pub base: u64,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8], base: u64) -> Self {
        Cursor { buf, pos: 0, base }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn err(&self, what: &str) -> Error {
        Error::corrupt(self.base + self.pos as u64, what.to_string())
    }

    fn read_raw_varint(&mut self, max_bytes: usize) -> Result<u64> {
        let at = self.pos;
        match read_raw(self.buf, &mut self.pos, max_bytes) {
            Some(v) => Ok(v),
            // `read_raw` stops where the varint failed: at the end of the buffer, or after
            // `max_bytes` bytes that all had their continuation bit set.
            None if self.pos - at < max_bytes => Err(self.err("truncated varint")),
            None => Err(self.err("varint too long")),
        }
    }

    pub fn varlong(&mut self) -> Result<i64> {
        Ok(unzigzag64(self.read_raw_varint(10)?))
    }

    pub fn varint(&mut self) -> Result<i32> {
        let v = unzigzag64(self.read_raw_varint(5)?);
        i32::try_from(v).map_err(|_| self.err("varint out of i32 range"))
    }

    pub fn i8(&mut self) -> Result<i8> {
        let b = *self.buf.get(self.pos).ok_or_else(|| self.err("truncated record"))?;
        self.pos += 1;
        Ok(b as i8)
    }

    pub fn bytes(&mut self, len: usize) -> Result<&'a [u8]> {
        if len > self.remaining() {
            return Err(self.err("length runs past the end of the record"));
        }
        let s = &self.buf[self.pos..self.pos + len];
        self.pos += len;
        Ok(s)
    }

    /// A varint length followed by that many bytes; -1 means null.
    pub fn nullable_bytes(&mut self) -> Result<Option<&'a [u8]>> {
        let len = self.varint()?;
        match len {
            -1 => Ok(None),
            l if l < -1 => Err(self.err("negative length")),
            l => self.bytes(l as usize).map(Some),
        }
    }

    pub fn skip(&mut self, len: usize) -> Result<()> {
        self.bytes(len).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_lengths() {
        for v in [0i64, 1, -1, 63, -64, 64, 300, -300, i32::MAX as i64, i32::MIN as i64, i64::MAX, i64::MIN] {
            let mut out = Vec::new();
            put_varlong(&mut out, v);
            assert_eq!(out.len(), varlong_len(v), "len of {v}");
            let mut c = Cursor::new(&out, 0);
            assert_eq!(c.varlong().unwrap(), v);
            assert_eq!(c.remaining(), 0);
        }
        // Known encodings from the protobuf spec: zigzag(-1) = 1, zigzag(1) = 2, 150*2=300 -> ac 02
        let mut out = Vec::new();
        put_varint(&mut out, 150);
        assert_eq!(out, vec![0xac, 0x02]);
    }

    #[test]
    fn truncated_and_overlong() {
        assert!(Cursor::new(&[0x80], 0).varint().is_err());
        assert!(Cursor::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01], 0).varint().is_err());
        assert!(Cursor::new(&[0x03], 0).nullable_bytes().is_err()); // len -2
        assert_eq!(Cursor::new(&[0x01], 0).nullable_bytes().unwrap(), None);
    }
}

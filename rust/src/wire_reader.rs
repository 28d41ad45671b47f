//! Reading Kafka protocol primitives in place from a request frame, for the requests
//! parsed whole in Rust (`produce_request`, `follower_fetch_request`); the counterpart of
//! `wire_writer`.
//!
//! Integers are big-endian. An unsigned varint (compact lengths and counts, tags) is at
//! most 5 bytes and must fit 32 bits. Every read is bounds-checked and answers `None` on
//! truncation or an overlong varint, so a parser is a chain of `?`.

pub struct WireReader<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
}

impl<'a> WireReader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        WireReader { buf, pos: 0 }
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let b = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(b)
    }

    pub fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    pub fn i8(&mut self) -> Option<i8> {
        Some(i8::from_be_bytes(self.array()?))
    }

    pub fn i16(&mut self) -> Option<i16> {
        Some(i16::from_be_bytes(self.array()?))
    }

    pub fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.array()?))
    }

    pub fn i64(&mut self) -> Option<i64> {
        Some(i64::from_be_bytes(self.array()?))
    }

    /// An unsigned varint of at most 5 bytes (a 32-bit value).
    pub fn uvarint(&mut self) -> Option<u32> {
        let mut value: u32 = 0;
        for i in 0..5 {
            let b = *self.buf.get(self.pos)?;
            self.pos += 1;
            value |= u32::from(b & 0x7F) << (7 * i);
            if b < 0x80 {
                return if i == 4 && b > 0x0F { None } else { Some(value) };
            }
        }
        None
    }

    /// How many bytes are left after `pos`.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_big_endian_fields_and_refuses_truncation() {
        let mut r = WireReader::new(&[0x01, 0x02, 0xFF, 0xFF, 0xFF, 0xFE, 0x7F]);
        assert_eq!(r.i16(), Some(0x0102));
        assert_eq!(r.i32(), Some(-2));
        assert_eq!(r.remaining(), 1);
        assert_eq!(r.i16(), None);
        assert_eq!(r.i8(), Some(0x7F));
        assert_eq!(r.take(1), None);
    }

    #[test]
    fn uvarints_fit_32_bits() {
        assert_eq!(WireReader::new(&[0x00]).uvarint(), Some(0));
        assert_eq!(WireReader::new(&[0xAC, 0x02]).uvarint(), Some(300));
        assert_eq!(WireReader::new(&[0xFF, 0xFF, 0xFF, 0xFF, 0x0F]).uvarint(), Some(u32::MAX));
        assert_eq!(WireReader::new(&[0xFF, 0xFF, 0xFF, 0xFF, 0x10]).uvarint(), None);
        assert_eq!(WireReader::new(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x00]).uvarint(), None);
        assert_eq!(WireReader::new(&[0x80]).uvarint(), None);
    }
}

//! Writing Kafka protocol primitives into a growing buffer, for the responses encoded
//! whole in Rust (`produce_response`, `fetch_response`).
//!
//! Integers are big-endian. Non-flexible versions write array counts as int32 and
//! strings and bytes with int16 / int32 lengths (-1 for null); flexible versions write
//! them as unsigned varints of length + 1 (0 for null) and end each struct with a
//! tagged-field count. These writers never write tagged fields.

pub struct WireWriter {
    pub out: Vec<u8>,
    pub flexible: bool,
}

impl WireWriter {
    pub fn new(capacity: usize, flexible: bool) -> Self {
        WireWriter { out: Vec::with_capacity(capacity), flexible }
    }

    pub fn i16(&mut self, v: i16) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    pub fn i32(&mut self, v: i32) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    pub fn i64(&mut self, v: i64) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }

    pub fn uvarint(&mut self, mut v: u32) {
        while v > 0x7F {
            self.out.push((v as u8 & 0x7F) | 0x80);
            v >>= 7;
        }
        self.out.push(v as u8);
    }

    /// An array's element count; `None` is a null array.
    pub fn count(&mut self, n: Option<usize>) {
        match (n, self.flexible) {
            (Some(n), true) => self.uvarint(n as u32 + 1),
            (None, true) => self.out.push(0),
            (Some(n), false) => self.i32(n as i32),
            (None, false) => self.i32(-1),
        }
    }

    pub fn nullable_string(&mut self, s: Option<&str>) {
        match (s, self.flexible) {
            (None, true) => self.out.push(0),
            (None, false) => self.i16(-1),
            (Some(s), true) => {
                self.uvarint(s.len() as u32 + 1);
                self.out.extend_from_slice(s.as_bytes());
            }
            (Some(s), false) => {
                self.i16(s.len() as i16);
                self.out.extend_from_slice(s.as_bytes());
            }
        }
    }

    /// The length prefix of a bytes field whose `len` bytes the caller writes (or sends)
    /// itself.
    pub fn bytes_length(&mut self, len: u32) {
        if self.flexible {
            self.uvarint(len + 1);
        } else {
            self.i32(len as i32);
        }
    }

    pub fn no_tagged_fields(&mut self) {
        if self.flexible {
            self.out.push(0);
        }
    }

    /// Starts a frame: a size placeholder, then the correlation id and, for flexible
    /// versions, the response header's tagged fields.
    pub fn start_frame(&mut self, correlation_id: i32) {
        self.out.extend_from_slice(&[0; 4]);
        self.i32(correlation_id);
        self.no_tagged_fields();
    }

    /// Fills in the size placeholder; `extra` counts bytes sent after `out` (records
    /// the caller sends by `sendfile`).
    pub fn finish_frame(&mut self, extra: u64) {
        let size = (self.out.len() as u64 - 4 + extra) as i32;
        self.out[..4].copy_from_slice(&size.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_follow_flexibility() {
        let mut w = WireWriter::new(0, true);
        w.count(Some(200));
        w.count(None);
        w.bytes_length(0);
        assert_eq!(w.out, [0xC9, 0x01, 0x00, 0x01]);
        let mut w = WireWriter::new(0, false);
        w.count(None);
        w.nullable_string(Some("ab"));
        w.bytes_length(7);
        assert_eq!(w.out, [0xFF, 0xFF, 0xFF, 0xFF, 0, 2, b'a', b'b', 0, 0, 0, 7]);
    }
}

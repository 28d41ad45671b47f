//! Message formats v0 and v1 (magic 0 and 1): the "message sets" of Produce v0-v2 and
//! Fetch v0-v3, which the log never stores (it holds RecordBatch v2 only;
//! `record_conversion` converts between the two).
//!
//! A message set is a sequence of log entries, nothing before or between them:
//!
//! | byte | field |
//! |---|---|
//! | 0 | offset int64 |
//! | 8 | message_size int32 (the bytes that follow) |
//! | 12 | crc uint32: CRC-32 (IEEE, as zlib) over byte 16 to the end |
//! | 16 | magic int8 (0 or 1) |
//! | 17 | attributes int8: bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4); bit 3 LogAppendTime (v1) |
//! | 18 | timestamp int64 (v1 only; -1 for none) |
//! | 18 / 26 | key_length int32 (-1 = null), key |
//! | .. | value_length int32 (-1 = null), value |
//!
//! The magic byte sits at byte 16 in both this format and RecordBatch v2, which is how a
//! reader tells them apart.
//!
//! A message whose codec is not 0 is a wrapper: its key is null and its value is the
//! compressed bytes of an inner message set of uncompressed messages. Inner offsets are
//! absolute in magic 0 and relative (0, 1, ...) in magic 1, where the wrapper's offset is
//! the absolute offset of the last inner message. A magic 1 wrapper's timestamp is the
//! largest inner timestamp (CreateTime) or the log append time, which then applies to
//! every inner message (LogAppendTime).
//!
//! Codec framing is that of v2 (`compression`), except lz4 in magic 0: Kafka before
//! 0.10 computed the LZ4 frame's header checksum over the 4-byte frame magic as well as
//! the frame descriptor (KAFKA-3160), and magic 0 keeps that checksum on the wire, both
//! ways. Zstandard does not exist in these formats.

use crate::compression::Compression;
use crate::error::{Error, Result};

pub const MAGIC_V0: u8 = 0;
pub const MAGIC_V1: u8 = 1;
/// offset int64 + message_size int32.
pub const LOG_OVERHEAD: usize = 12;
/// crc, magic, attributes, key length and value length.
pub const RECORD_OVERHEAD_V0: usize = 14;
/// v0's overhead plus the timestamp.
pub const RECORD_OVERHEAD_V1: usize = 22;
pub const CODEC_MASK: u8 = 0x07;
pub const TIMESTAMP_TYPE_MASK: u8 = 0x08;
pub const NO_TIMESTAMP: i64 = -1;

/// One message of a message set, borrowed from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LegacyMessage<'a> {
    pub offset: i64,
    pub magic: u8,
    pub attributes: u8,
    /// -1 for magic 0.
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
}

impl LegacyMessage<'_> {
    pub fn codec_id(&self) -> u8 {
        self.attributes & CODEC_MASK
    }

    pub fn is_log_append_time(&self) -> bool {
        self.magic > MAGIC_V0 && self.attributes & TIMESTAMP_TYPE_MASK != 0
    }
}

pub fn record_overhead(magic: u8) -> usize {
    if magic == MAGIC_V0 {
        RECORD_OVERHEAD_V0
    } else {
        RECORD_OVERHEAD_V1
    }
}

/// The size of one log entry holding this key and value.
pub fn entry_size(magic: u8, key: Option<&[u8]>, value: Option<&[u8]>) -> usize {
    LOG_OVERHEAD + record_overhead(magic) + key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len)
}

/// Reads every entry of `buf`, which must hold whole entries only, each with a valid CRC.
/// `base` is `buf`'s position in the request or file, for error messages.
pub fn read_message_set(buf: &[u8], base: u64) -> Result<Vec<LegacyMessage<'_>>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let (message, size) = read_entry(buf, pos, base)?;
        out.push(message);
        pos += size;
    }
    Ok(out)
}

/// The entry at `pos` and its size.
fn read_entry(buf: &[u8], pos: usize, base: u64) -> Result<(LegacyMessage<'_>, usize)> {
    let at = base + pos as u64;
    let bad = |reason: String| Error::corrupt(at, reason);
    let rest = &buf[pos..];
    if rest.len() < LOG_OVERHEAD + RECORD_OVERHEAD_V0 {
        return Err(bad(format!("message set entry of {} bytes is shorter than the smallest message", rest.len())));
    }
    let offset = i64::from_be_bytes(rest[0..8].try_into().unwrap());
    let size = i32::from_be_bytes(rest[8..12].try_into().unwrap());
    if size < RECORD_OVERHEAD_V0 as i32 || size as usize > rest.len() - LOG_OVERHEAD {
        return Err(bad(format!("message size {size} does not fit the {} bytes left", rest.len() - LOG_OVERHEAD)));
    }
    let message = &rest[LOG_OVERHEAD..LOG_OVERHEAD + size as usize];
    let magic = message[4];
    if magic > MAGIC_V1 {
        return Err(bad(format!("magic {magic} in a message set of magic 0/1")));
    }
    if message.len() < record_overhead(magic) {
        return Err(bad(format!("message of {} bytes is shorter than magic {magic}'s overhead", message.len())));
    }
    let crc = u32::from_be_bytes(message[0..4].try_into().unwrap());
    let computed = crc32(&message[4..]);
    if crc != computed {
        return Err(bad(format!("message CRC {crc:#010x} does not match its contents ({computed:#010x})")));
    }
    let attributes = message[5];
    let (timestamp, mut p) = if magic == MAGIC_V0 {
        (NO_TIMESTAMP, 6)
    } else {
        (i64::from_be_bytes(message[6..14].try_into().unwrap()), 14)
    };
    let key = read_bytes(message, &mut p).ok_or_else(|| bad("message key runs past the message".into()))?;
    let value = read_bytes(message, &mut p).ok_or_else(|| bad("message value runs past the message".into()))?;
    if p != message.len() {
        return Err(bad(format!("{} bytes after the message value", message.len() - p)));
    }
    Ok((LegacyMessage { offset, magic, attributes, timestamp, key, value }, LOG_OVERHEAD + size as usize))
}

/// An int32-length-prefixed nullable byte string; None (outer) if it does not fit.
#[allow(clippy::option_option, reason = "the outer None is a message cut short, the inner a null")]
fn read_bytes<'a>(message: &'a [u8], p: &mut usize) -> Option<Option<&'a [u8]>> {
    let len = i32::from_be_bytes(message.get(*p..*p + 4)?.try_into().ok()?);
    *p += 4;
    if len == -1 {
        return Some(None);
    }
    let len = usize::try_from(len).ok()?;
    let b = message.get(*p..p.checked_add(len)?)?;
    *p += len;
    Some(Some(b))
}

/// Appends one log entry. `timestamp` is ignored for magic 0.
pub fn write_entry(out: &mut Vec<u8>, offset: i64, magic: u8, attributes: u8, timestamp: i64, key: Option<&[u8]>, value: Option<&[u8]>) {
    let size = entry_size(magic, key, value) - LOG_OVERHEAD;
    out.reserve(LOG_OVERHEAD + size);
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(&(size as i32).to_be_bytes());
    let crc_at = out.len();
    out.extend_from_slice(&[0; 4]);
    out.push(magic);
    out.push(attributes);
    if magic > MAGIC_V0 {
        out.extend_from_slice(&timestamp.to_be_bytes());
    }
    for field in [key, value] {
        match field {
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(b) => {
                out.extend_from_slice(&(b.len() as i32).to_be_bytes());
                out.extend_from_slice(b);
            }
        }
    }
    let crc = crc32(&out[crc_at + 4..]);
    out[crc_at..crc_at + 4].copy_from_slice(&crc.to_be_bytes());
}

/// CRC-32 (IEEE 802.3, zlib's), the checksum of message format v0/v1.
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = flate2::Crc::new();
    crc.update(data);
    crc.sum()
}

/// The codec of a wrapper's attributes, refusing zstd and unknown ids.
pub fn codec(attributes: u8, position: u64) -> Result<Compression> {
    match attributes & CODEC_MASK {
        id @ 0..=3 => Compression::from_id(id),
        id => Err(Error::corrupt(position, format!("codec id {id} does not exist in message format v0/v1"))),
    }
}

/// A wrapper's value compressed for `magic` (lz4 in magic 0 with its header checksum).
pub fn compress(codec: Compression, magic: u8, inner: &[u8]) -> Vec<u8> {
    let mut out = codec.compress(inner);
    if codec == Compression::Lz4 && magic == MAGIC_V0 {
        set_lz4_header_checksum(&mut out, true);
    }
    out
}

/// A wrapper's value decompressed; a magic 0 lz4 frame may carry either header checksum.
pub fn decompress(codec: Compression, magic: u8, data: &[u8], position: u64) -> Result<Vec<u8>> {
    if codec == Compression::Lz4 && magic == MAGIC_V0 {
        let mut fixed = data.to_vec();
        set_lz4_header_checksum(&mut fixed, false);
        return codec.decompress(&fixed, position);
    }
    codec.decompress(data, position)
}

const LZ4_FRAME_MAGIC: [u8; 4] = [0x04, 0x22, 0x4D, 0x18];

/// Rewrites an LZ4 frame's header checksum byte: the second byte of xxh32 (seed 0) over
/// the frame descriptor (FLG, BD and the optional content size and dictionary id), or,
/// `kafka_0_8`, over the frame magic and the descriptor. A frame too short or of
/// another magic is left as it is (the decoder reports it).
pub fn set_lz4_header_checksum(frame: &mut [u8], kafka_0_8: bool) {
    if frame.len() < 7 || frame[..4] != LZ4_FRAME_MAGIC {
        return;
    }
    let flg = frame[4];
    let descriptor_end = 6 + if flg & 0x08 != 0 { 8 } else { 0 } + if flg & 0x01 != 0 { 4 } else { 0 };
    if frame.len() <= descriptor_end {
        return;
    }
    let from = if kafka_0_8 { 0 } else { 4 };
    frame[descriptor_end] = (xxhash_rust::xxh32::xxh32(&frame[from..descriptor_end], 0) >> 8) as u8;
}

#[cfg(test)]
mod tests {
    use super::*;

    // One magic 0 entry at offset 5: key "k", value "vv" (byte for byte what
    // kafka-python's LegacyRecordBatchBuilder writes), checked by hand:
    // crc = zlib.crc32(bytes([0, 0, 0,0,0,1, 0x6b, 0,0,0,2, 0x76, 0x76])) = 0x89e88014.
    #[rustfmt::skip]
    const V0_ENTRY: [u8; 29] = [
        0, 0, 0, 0, 0, 0, 0, 5, // offset 5
        0, 0, 0, 17, // message size
        0x89, 0xe8, 0x80, 0x14, // crc
        0, 0, // magic 0, attributes 0
        0, 0, 0, 1, b'k', // key
        0, 0, 0, 2, b'v', b'v', // value
    ];

    // One magic 1 entry at offset 0: timestamp 1000 (0x3e8), null key, value "x",
    // LogAppendTime; crc = zlib.crc32(bytes([1, 8, 0,0,0,0,0,0,3,0xe8, 0xff,0xff,0xff,0xff,
    // 0,0,0,1, 0x78])) = 0xf95fefa1.
    #[rustfmt::skip]
    const V1_ENTRY: [u8; 35] = [
        0, 0, 0, 0, 0, 0, 0, 0, // offset 0
        0, 0, 0, 23, // message size
        0xf9, 0x5f, 0xef, 0xa1, // crc
        1, 8, // magic 1, attributes: LogAppendTime
        0, 0, 0, 0, 0, 0, 3, 0xe8, // timestamp 1000
        0xff, 0xff, 0xff, 0xff, // null key
        0, 0, 0, 1, b'x', // value
    ];

    #[test]
    fn reads_the_hand_checked_entries() {
        let m = read_message_set(&V0_ENTRY, 0).unwrap();
        assert_eq!(m, vec![LegacyMessage { offset: 5, magic: 0, attributes: 0, timestamp: -1, key: Some(b"k"), value: Some(b"vv") }]);
        let m = read_message_set(&V1_ENTRY, 0).unwrap();
        assert_eq!(m, vec![LegacyMessage { offset: 0, magic: 1, attributes: 8, timestamp: 1000, key: None, value: Some(b"x") }]);
        assert!(m[0].is_log_append_time());
    }

    #[test]
    fn writes_the_hand_checked_entries() {
        let mut out = Vec::new();
        write_entry(&mut out, 5, 0, 0, 1234, Some(b"k"), Some(b"vv"));
        assert_eq!(out, V0_ENTRY);
        out.clear();
        write_entry(&mut out, 0, 1, 8, 1000, None, Some(b"x"));
        assert_eq!(out, V1_ENTRY);
        assert_eq!(entry_size(1, None, Some(b"x")), V1_ENTRY.len());
    }

    #[test]
    fn refuses_bad_crc_truncation_and_trailing_bytes() {
        let mut bad = V0_ENTRY;
        bad[28] ^= 1;
        assert!(matches!(read_message_set(&bad, 7), Err(Error::CorruptRecord { position: 7, .. })));
        for end in 1..V0_ENTRY.len() {
            assert!(read_message_set(&V0_ENTRY[..end], 0).is_err(), "cut at {end}");
        }
        let mut long = V0_ENTRY.to_vec();
        long[11] += 1; // size claims one byte more than the message has
        long.push(0);
        assert!(read_message_set(&long, 0).is_err());
        let mut magic2 = V1_ENTRY;
        magic2[16] = 2;
        assert!(read_message_set(&magic2, 0).is_err());
    }

    #[test]
    fn lz4_magic_0_uses_the_kafka_0_8_header_checksum() {
        let inner = b"some bytes some bytes some bytes".to_vec();
        let proper = Compression::Lz4.compress(&inner);
        let old = compress(Compression::Lz4, MAGIC_V0, &inner);
        assert_eq!(compress(Compression::Lz4, MAGIC_V1, &inner), proper);
        // Only the header checksum byte (after magic, FLG, BD) differs.
        let hc = 6 + if proper[4] & 0x08 != 0 { 8 } else { 0 };
        assert_ne!(old[hc], proper[hc]);
        assert_eq!(old[..hc], proper[..hc]);
        assert_eq!(old[hc + 1..], proper[hc + 1..]);
        assert_eq!(old[hc], (xxhash_rust::xxh32::xxh32(&proper[..hc], 0) >> 8) as u8);
        // Magic 0 reads either checksum; a proper frame is read by the plain codec.
        assert_eq!(decompress(Compression::Lz4, MAGIC_V0, &old, 0).unwrap(), inner);
        assert_eq!(decompress(Compression::Lz4, MAGIC_V0, &proper, 0).unwrap(), inner);
        assert!(Compression::Lz4.decompress(&old, 0).is_err());
    }

    #[test]
    fn zstd_and_unknown_codecs_are_refused() {
        assert_eq!(codec(2, 0).unwrap(), Compression::Snappy);
        assert!(codec(4, 0).is_err());
        assert!(codec(7, 0).is_err());
    }
}

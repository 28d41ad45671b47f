//! Record batch compression codecs (attributes bits 0-2).
//!
//! Framing per codec, as Kafka's Java client writes and reads it:
//! - gzip: RFC 1952 gzip stream.
//! - snappy: xerial "snappy-java" framing: 16-byte header (`\x82SNAPPY\0`, version 1,
//!   compatible version 1, both big-endian i32), then blocks of (i32 BE length, raw
//!   snappy block). Unframed raw snappy is accepted on read (some clients send it).
//! - lz4: the standard LZ4 frame format.
//! - zstd: a standard zstd frame.

use std::io::{Read, Write};

use crate::error::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Compression {
    None = 0,
    Gzip = 1,
    Snappy = 2,
    Lz4 = 3,
    Zstd = 4,
}

pub const ALL: [Compression; 5] =
    [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];

/// Decompressed record areas larger than this are refused: a batch cannot hold more
/// than 2 GiB of records, so a larger output is a decompression bomb or corruption.
const MAX_DECOMPRESSED: u64 = i32::MAX as u64;

const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_BLOCK: usize = 32 * 1024;

impl Compression {
    pub fn from_id(id: u8) -> Result<Self> {
        Ok(match id {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            other => return Err(Error::UnsupportedCompression(other)),
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        ALL.iter().copied().find(|c| c.name() == name.to_ascii_lowercase())
    }

    pub fn compress(self, data: &[u8]) -> Vec<u8> {
        match self {
            Compression::None => data.to_vec(),
            Compression::Gzip => {
                let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                enc.write_all(data).expect("writing to a Vec cannot fail");
                enc.finish().expect("writing to a Vec cannot fail")
            }
            Compression::Snappy => {
                let mut out = Vec::with_capacity(16 + data.len() / 2);
                out.extend_from_slice(&XERIAL_MAGIC);
                out.extend_from_slice(&1i32.to_be_bytes());
                out.extend_from_slice(&1i32.to_be_bytes());
                let mut enc = snap::raw::Encoder::new();
                for chunk in data.chunks(XERIAL_BLOCK) {
                    let block = enc.compress_vec(chunk).expect("snappy block within limits");
                    out.extend_from_slice(&(block.len() as i32).to_be_bytes());
                    out.extend_from_slice(&block);
                }
                out
            }
            Compression::Lz4 => {
                let mut enc = lz4_flex::frame::FrameEncoder::new(Vec::new());
                enc.write_all(data).expect("writing to a Vec cannot fail");
                enc.finish().expect("writing to a Vec cannot fail")
            }
            Compression::Zstd => zstd::bulk::compress(data, 3).expect("zstd compression of a buffer"),
        }
    }

    /// A decoder streaming out the record area `data` compresses (for
    /// `record_stream::walk`). Snappy, whose blocks are decoded whole, is decompressed
    /// here first: its format caps a block's expansion at a small ratio, unlike the others.
    pub fn reader<'a>(self, data: &'a [u8], position: u64) -> Result<Box<dyn Read + 'a>> {
        let bad = |e: &dyn std::fmt::Display| {
            Error::corrupt(position, format!("{} decompression failed: {e}", self.name()))
        };
        Ok(match self {
            Compression::None => Box::new(data),
            Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(data)),
            Compression::Snappy => Box::new(std::io::Cursor::new(self.decompress(data, position)?)),
            Compression::Lz4 => Box::new(lz4_flex::frame::FrameDecoder::new(data)),
            Compression::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(data).map_err(|e| bad(&e))?),
        })
    }

    /// Decompresses a record area; `position` is only for error messages.
    pub fn decompress(self, data: &[u8], position: u64) -> Result<Vec<u8>> {
        let bad = |e: &dyn std::fmt::Display| {
            Error::corrupt(position, format!("{} decompression failed: {e}", self.name()))
        };
        let mut out = Vec::with_capacity(data.len().saturating_mul(3).min(64 << 20));
        match self {
            Compression::None => out.extend_from_slice(data),
            Compression::Gzip => {
                read_bounded(flate2::read::MultiGzDecoder::new(data), &mut out).map_err(|e| bad(&e))?
            }
            Compression::Snappy => snappy_decompress(data, &mut out).map_err(|e| bad(&e))?,
            Compression::Lz4 => {
                read_bounded(lz4_flex::frame::FrameDecoder::new(data), &mut out).map_err(|e| bad(&e))?
            }
            Compression::Zstd => {
                let dec = zstd::stream::read::Decoder::with_buffer(data).map_err(|e| bad(&e))?;
                read_bounded(dec, &mut out).map_err(|e| bad(&e))?
            }
        }
        Ok(out)
    }
}

fn read_bounded(reader: impl Read, out: &mut Vec<u8>) -> std::io::Result<()> {
    let mut limited = reader.take(MAX_DECOMPRESSED + 1);
    limited.read_to_end(out)?;
    if out.len() as u64 > MAX_DECOMPRESSED {
        return Err(std::io::Error::other("decompressed size exceeds 2 GiB"));
    }
    Ok(())
}

fn snappy_decompress(data: &[u8], out: &mut Vec<u8>) -> std::result::Result<(), String> {
    let mut dec = snap::raw::Decoder::new();
    if data.len() < 16 || data[..8] != XERIAL_MAGIC {
        let n = snap::raw::decompress_len(data).map_err(|e| e.to_string())?;
        if n as u64 > MAX_DECOMPRESSED {
            return Err("decompressed size exceeds 2 GiB".into());
        }
        out.resize(n, 0);
        dec.decompress(data, out).map_err(|e| e.to_string())?;
        return Ok(());
    }
    let mut rest = &data[16..];
    while !rest.is_empty() {
        if rest.len() < 4 {
            return Err("truncated xerial block length".into());
        }
        let len = i32::from_be_bytes(rest[..4].try_into().unwrap());
        if len < 0 || len as usize > rest.len() - 4 {
            return Err(format!("xerial block length {len} runs past the end"));
        }
        let block = &rest[4..4 + len as usize];
        let n = snap::raw::decompress_len(block).map_err(|e| e.to_string())?;
        if (out.len() + n) as u64 > MAX_DECOMPRESSED {
            return Err("decompressed size exceeds 2 GiB".into());
        }
        let start = out.len();
        out.resize(start + n, 0);
        dec.decompress(block, &mut out[start..]).map_err(|e| e.to_string())?;
        rest = &rest[4 + len as usize..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_codec_roundtrips() {
        let data: Vec<u8> = (0..200_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        for c in ALL {
            let z = c.compress(&data);
            assert_eq!(c.decompress(&z, 0).unwrap(), data, "{}", c.name());
            assert_eq!(c.decompress(&c.compress(b""), 0).unwrap(), b"", "{} empty", c.name());
        }
    }

    #[test]
    fn raw_snappy_is_accepted() {
        let raw = snap::raw::Encoder::new().compress_vec(b"hello hello hello").unwrap();
        assert_eq!(Compression::Snappy.decompress(&raw, 0).unwrap(), b"hello hello hello");
    }

    #[test]
    fn garbage_is_a_corrupt_record_error() {
        for c in [Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd] {
            let err = c.decompress(b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01garbage!", 7).unwrap_err();
            assert!(matches!(err, Error::CorruptRecord { position: 7, .. }), "{}: {err}", c.name());
        }
        assert!(Compression::from_id(5).is_err());
    }
}

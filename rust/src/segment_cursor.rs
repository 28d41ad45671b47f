//! Read-only, chunked iteration over the whole batches of one `.log` segment file that
//! another process (a running broker) may be appending to.
//!
//! Invariants: bytes are read with `pread` into a private buffer (never mmapped, so a
//! concurrent truncation cannot fault the reader); a batch is returned only when all of
//! its `batchLength + 12` bytes were read; a partial tail at the end of the file (a batch
//! still being written) ends the iteration without an error. The open file handle keeps
//! the segment readable after the broker rolls, cleans (renames over) or deletes it.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::{IoContext, Result};
use crate::records::record_batch::{next_batch, HEADER_SIZE};

/// Bytes read per `pread` (grown when one batch is larger).
pub const CHUNK: usize = 4 << 20;

pub struct SegmentCursor {
    file: File,
    path: std::path::PathBuf,
    buf: Vec<u8>,
    /// File position of `buf[0]`.
    buf_pos: u64,
    /// `buf[consumed..filled]` holds read bytes not yet returned.
    consumed: usize,
    filled: usize,
    eof: bool,
    /// Bytes read from the file so far.
    pub bytes_read: u64,
}

impl SegmentCursor {
    /// Opens `path` for reading at byte `position` (a batch boundary).
    pub fn open(path: &Path, position: u64) -> std::io::Result<Self> {
        let file = File::open(path)?;
        Ok(SegmentCursor {
            file,
            path: path.to_path_buf(),
            buf: Vec::new(),
            buf_pos: position,
            consumed: 0,
            filled: 0,
            eof: false,
            bytes_read: 0,
        })
    }

    /// The next whole batch: (its position in the file, its bytes), or None at the end of
    /// the whole batches on disk.
    pub fn next_batch(&mut self) -> Result<Option<(u64, &[u8])>> {
        loop {
            if let Some(h) = next_batch(&self.buf[..self.filled], self.consumed, self.buf_pos)? {
                let at = self.consumed;
                self.consumed += h.size();
                return Ok(Some((self.buf_pos + at as u64, &self.buf[at..self.consumed])));
            }
            if self.eof {
                return Ok(None);
            }
            self.refill()?;
        }
    }

    /// The next whole batch's position and header, reading only its 61-byte header when
    /// nothing is buffered (header-only scans read far fewer bytes).
    pub fn next_header_only(&mut self) -> Result<Option<(u64, crate::records::record_batch::BatchHeader)>> {
        if self.filled - self.consumed >= HEADER_SIZE {
            // Buffered data: no need for a separate read.
            return Ok(self.next_batch()?.map(|(p, b)| (p, crate::records::record_batch::BatchHeader::parse(b))));
        }
        let pos = self.buf_pos + self.consumed as u64;
        let mut hdr = [0u8; HEADER_SIZE];
        let n = read_full(&self.file, &mut hdr, pos).ctx("read segment", &self.path)?;
        self.bytes_read += n as u64;
        if n < HEADER_SIZE {
            return Ok(None);
        }
        let h = crate::records::record_batch::BatchHeader::parse(&hdr);
        crate::records::record_batch::check_header(&h, pos)?;
        let len = self.file.metadata().ctx("stat segment", &self.path)?.len();
        if pos + h.size() as u64 > len {
            return Ok(None);
        }
        self.buf_pos = pos + h.size() as u64;
        self.consumed = 0;
        self.filled = 0;
        Ok(Some((pos, h)))
    }

    fn refill(&mut self) -> Result<()> {
        self.buf.copy_within(self.consumed..self.filled, 0);
        self.buf_pos += self.consumed as u64;
        self.filled -= self.consumed;
        self.consumed = 0;
        let need = if self.filled >= HEADER_SIZE {
            crate::records::record_batch::BatchHeader::parse(&self.buf[..self.filled]).size().max(CHUNK)
        } else {
            CHUNK
        };
        if self.buf.len() < need {
            self.buf.resize(need, 0);
        }
        let n = self.file.read_at(&mut self.buf[self.filled..], self.buf_pos + self.filled as u64).ctx("read segment", &self.path)?;
        self.bytes_read += n as u64;
        self.filled += n;
        if n == 0 {
            self.eof = true;
        }
        Ok(())
    }
}

fn read_full(file: &File, buf: &mut [u8], pos: u64) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        let n = file.read_at(&mut buf[got..], pos + got as u64)?;
        if n == 0 {
            break;
        }
        got += n;
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::record::NewRecord;
    use crate::records::record_batch::{encode, BatchOptions};

    #[test]
    fn whole_batches_then_stop_at_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.log");
        let mut bytes = Vec::new();
        for i in 0..3i64 {
            let r = NewRecord { offset: i, timestamp: 1, key: None, value: Some(vec![7; 3_000_000]), headers: vec![] };
            bytes.extend(encode(&[r], &BatchOptions { base_offset: i, ..Default::default() }));
        }
        let whole = bytes.len();
        bytes.extend_from_slice(&bytes.clone()[..100]);
        std::fs::write(&path, &bytes).unwrap();
        let mut c = SegmentCursor::open(&path, 0).unwrap();
        let mut got = vec![];
        while let Some((p, b)) = c.next_batch().unwrap() {
            got.push((p, b.len()));
        }
        assert_eq!(got.len(), 3);
        assert_eq!(got[2].0 as usize + got[2].1, whole);
        let mut h = SegmentCursor::open(&path, 0).unwrap();
        let mut n = 0;
        while h.next_header_only().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, 3);
        assert!(h.bytes_read < 1000);
    }
}

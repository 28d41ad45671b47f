//! `DirectWriter`: fills a new file front to back with `O_DIRECT` writes, for bytes that
//! are written once and read later, if at all (the log cleaner's output). The bytes skip
//! the page cache: no page-cache pages are taken for them and nothing is copied into
//! such pages, and the `fsync` that follows has no dirty pages to write.
//!
//! Layout and invariants:
//! - Bytes are gathered in a page-aligned buffer of `BUFFER_BYTES` (a multiple of
//!   `ALIGN`). A full buffer is written at its file offset (a multiple of `BUFFER_BYTES`)
//!   on a writer thread while the next buffer fills, so the disk write overlaps the
//!   caller's work. At most one write is in flight.
//! - `finish` writes the last, partial buffer zero-padded to `ALIGN`, then truncates the
//!   file to the bytes appended. Until `finish` returns, the file's contents are
//!   undefined: readers must wait for it.
//! - Where the file system refuses `O_DIRECT` (at open, or with EINVAL at a write), the
//!   same writes go through the page cache of the plain handle instead.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

use memmap2::MmapMut;

/// The alignment `O_DIRECT` asks of buffer addresses, file offsets and lengths: the page
/// size, which covers every logical block size in use.
pub const ALIGN: usize = 4096;
/// The size of each write (and of each of the two buffers).
pub const BUFFER_BYTES: usize = 4 << 20;

/// A full buffer on its way to the disk: the buffer comes back with the write's result.
type InFlight = JoinHandle<(MmapMut, io::Result<()>)>;

pub struct DirectWriter {
    /// The `O_DIRECT` handle; None when the file system does not take direct I/O.
    direct: Option<Arc<File>>,
    /// The file's ordinary handle: the fallback, and the one `finish` truncates.
    plain: Arc<File>,
    buf: MmapMut,
    /// Bytes of `buf` filled.
    len: usize,
    /// The file offset of `buf[0]`.
    buf_pos: u64,
    in_flight: Option<InFlight>,
    spare: Option<MmapMut>,
}

impl DirectWriter {
    /// A writer for the empty file `plain` (opened at `path`).
    pub fn new(path: &Path, plain: Arc<File>) -> io::Result<DirectWriter> {
        let direct = match OpenOptions::new().write(true).custom_flags(libc::O_DIRECT).open(path) {
            Ok(f) => Some(Arc::new(f)),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => None,
            Err(e) => return Err(e),
        };
        Ok(DirectWriter { direct, plain, buf: MmapMut::map_anon(BUFFER_BYTES)?, len: 0, buf_pos: 0, in_flight: None, spare: None })
    }

    /// Whether writes still bypass the page cache.
    pub fn is_direct(&self) -> bool {
        self.direct.is_some()
    }

    /// Appends `bytes` after everything written so far.
    pub fn write(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            let n = bytes.len().min(BUFFER_BYTES - self.len);
            self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
            self.len += n;
            bytes = &bytes[n..];
            if self.len == BUFFER_BYTES {
                self.send_full_buffer()?;
            }
        }
        Ok(())
    }

    /// Hands the full buffer to a writer thread, once the previous write has finished.
    fn send_full_buffer(&mut self) -> io::Result<()> {
        let next = match self.wait()? {
            Some(b) => b,
            None => match self.spare.take() {
                Some(b) => b,
                None => MmapMut::map_anon(BUFFER_BYTES)?,
            },
        };
        let full = std::mem::replace(&mut self.buf, next);
        let (direct, plain, pos) = (self.direct.clone(), Arc::clone(&self.plain), self.buf_pos);
        self.in_flight = Some(std::thread::Builder::new().name("logstore-direct-write".into()).spawn(move || {
            let result = write_block(direct.as_deref(), &plain, &full, pos).map(|_| ());
            (full, result)
        })?);
        self.buf_pos += BUFFER_BYTES as u64;
        self.len = 0;
        Ok(())
    }

    /// Waits for the write in flight; returns its buffer.
    fn wait(&mut self) -> io::Result<Option<MmapMut>> {
        let Some(handle) = self.in_flight.take() else { return Ok(None) };
        let (buf, result) = handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        result?;
        Ok(Some(buf))
    }

    /// Writes what is left and cuts the file to the bytes appended; returns their count.
    pub fn finish(&mut self) -> io::Result<u64> {
        if let Some(b) = self.wait()? {
            self.spare = Some(b);
        }
        let end = self.buf_pos + self.len as u64;
        if self.len > 0 {
            let padded = self.len.next_multiple_of(ALIGN);
            self.buf[self.len..padded].fill(0);
            if !write_block(self.direct.as_deref(), &self.plain, &self.buf[..padded], self.buf_pos)? {
                self.direct = None;
            }
            self.buf_pos += padded as u64;
            self.len = 0;
        }
        self.plain.set_len(end)?;
        self.buf_pos = end;
        Ok(end)
    }
}

impl Drop for DirectWriter {
    fn drop(&mut self) {
        // The thread borrows nothing, but its write must not land after the file is reused.
        let _ = self.wait();
    }
}

/// Writes the aligned `block` at `pos`, directly when `direct` is given and the file
/// system takes it; returns whether it went direct.
fn write_block(direct: Option<&File>, plain: &File, block: &[u8], pos: u64) -> io::Result<bool> {
    if let Some(d) = direct {
        match d.write_all_at(block, pos) {
            Ok(()) => return Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            Err(e) => return Err(e),
        }
    }
    plain.write_all_at(block, pos)?;
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer(dir: &Path) -> (std::path::PathBuf, DirectWriter) {
        let path = dir.join("out");
        let plain = Arc::new(OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap());
        let w = DirectWriter::new(&path, plain).unwrap();
        (path, w)
    }

    #[test]
    fn writes_every_byte_in_order_at_any_size() {
        let dir = tempfile::tempdir().unwrap();
        for total in [0usize, 1, ALIGN - 1, ALIGN, ALIGN + 1, BUFFER_BYTES, BUFFER_BYTES + 7, 3 * BUFFER_BYTES + ALIGN + 3] {
            let (path, mut w) = writer(dir.path());
            let data: Vec<u8> = (0..total).map(|i| (i * 31 % 251) as u8).collect();
            // Pieces of awkward sizes, as batches come.
            let mut rest = &data[..];
            let mut step = 1;
            while !rest.is_empty() {
                let n = step.min(rest.len());
                w.write(&rest[..n]).unwrap();
                rest = &rest[n..];
                step = step * 7 % 1_000_003 + 13;
            }
            assert_eq!(w.finish().unwrap(), total as u64);
            drop(w);
            assert_eq!(std::fs::read(&path).unwrap(), data, "{total} bytes");
        }
    }

    #[test]
    fn a_file_system_without_direct_io_gets_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut w) = writer(dir.path());
        w.direct = None;
        let data = vec![7u8; BUFFER_BYTES + 100];
        w.write(&data).unwrap();
        assert_eq!(w.finish().unwrap(), data.len() as u64);
        assert_eq!(std::fs::read(&path).unwrap(), data);
    }
}

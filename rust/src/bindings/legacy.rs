//! Message formats v0/v1 (`record_conversion`): `up_convert_records` for Produce v0-v2
//! and `down_convert_slice` for Fetch v0-v3 (which cannot use `sendfile`: the bytes on
//! disk are v2).

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::records::record_conversion;

use super::buffer::Borrowed;
use super::file_slice::PyFileSlice;

/// The one RecordBatch v2 holding the messages of a magic 0/1 message set (base offset
/// 0; the log assigns offsets). Magic 0 messages get `now_ms` as their timestamp.
/// Raises CorruptRecordError for a malformed set, a bad CRC or a codec v0/v1 lack.
#[pyfunction]
pub(super) fn up_convert_records<'py>(py: Python<'py>, records: &Bound<'py, PyAny>, now_ms: i64) -> PyResult<Bound<'py, PyBytes>> {
    let borrowed = Borrowed::new(records)?;
    let data = borrowed.as_slice();
    let batch = py.detach(|| record_conversion::up_convert(data, now_ms))?;
    Ok(PyBytes::new(py, &batch))
}

/// The whole v2 batches of `slice` as a message set of `to_magic` (0 or 1) from
/// `first_offset`, at most `max_bytes` long unless its first message alone is longer:
/// `(records, next_offset, records_converted)`, next_offset being the offset after the
/// last batch examined. Raises UnsupportedForMessageFormatError for a zstd batch.
#[pyfunction]
pub(super) fn down_convert_slice<'py>(
    py: Python<'py>,
    slice: &PyFileSlice,
    to_magic: u8,
    first_offset: i64,
    max_bytes: usize,
) -> PyResult<(Bound<'py, PyBytes>, i64, usize)> {
    let slice = slice.inner();
    let out = py.detach(|| -> crate::Result<_> {
        let batches = slice.read()?;
        record_conversion::down_convert(&batches, to_magic, first_offset, max_bytes)
    })?;
    Ok((PyBytes::new(py, &out.records), out.next_offset, out.records_converted))
}

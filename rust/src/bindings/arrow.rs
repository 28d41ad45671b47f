//! Read-only scans into pyarrow (what the Spark source reads with): `PartitionReader`
//! over a partition directory a broker may be writing, `partition_offsets`,
//! `offset_for_timestamp`, and `decode_arrow` over fetched bytes. Arrow batches cross
//! to pyarrow through the C Data Interface, without a copy.

use std::path::PathBuf;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::{Array, StructArray};

use crate::arrow_decoder::{self, ArrowDecoder, RecordFilter};
use crate::log_reader::{PartitionDir, PartitionScan};

use super::buffer::Borrowed;

/// Hands an Arrow record batch to pyarrow through the Arrow C Data Interface: the FFI
/// structs live on this stack frame and `RecordBatch._import_from_c` moves their
/// contents out (leaving `release` null), so nothing is copied and nothing leaks.
fn to_pyarrow(py: Python<'_>, batch: arrow_array::RecordBatch) -> PyResult<Py<PyAny>> {
    let data = StructArray::from(batch).into_data();
    let mut array = FFI_ArrowArray::new(&data);
    let mut schema = FFI_ArrowSchema::try_from(data.data_type()).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let cls = py.import("pyarrow")?.getattr("RecordBatch")?;
    let addrs = (&mut array as *mut FFI_ArrowArray as usize, &mut schema as *mut FFI_ArrowSchema as usize);
    Ok(cls.call_method1("_import_from_c", addrs)?.unbind())
}

fn record_filter(start_offset: i64, end_offset: Option<i64>, min_timestamp: Option<i64>, max_timestamp: Option<i64>) -> RecordFilter {
    RecordFilter {
        start_offset,
        end_offset: end_offset.unwrap_or(i64::MAX),
        min_timestamp: min_timestamp.unwrap_or(i64::MIN),
        max_timestamp: max_timestamp.unwrap_or(i64::MAX),
    }
}

/// A read-only scan of one partition directory into pyarrow record batches.
#[pyclass(name = "PartitionReader", module = "logstore._native")]
pub(super) struct PyPartitionReader {
    scan: PartitionScan,
    decoder: ArrowDecoder,
}

#[pymethods]
impl PyPartitionReader {
    #[new]
    #[pyo3(signature = (path, topic, partition, *, start_offset, end_offset, min_timestamp = None, max_timestamp = None, include_headers = false, fail_on_data_loss = true))]
    #[allow(clippy::too_many_arguments, reason = "mirrors the Python keyword arguments of PartitionReader")]
    fn new(
        path: PathBuf,
        topic: &str,
        partition: i32,
        start_offset: i64,
        end_offset: i64,
        min_timestamp: Option<i64>,
        max_timestamp: Option<i64>,
        include_headers: bool,
        fail_on_data_loss: bool,
    ) -> Self {
        let filter = record_filter(start_offset, Some(end_offset), min_timestamp, max_timestamp);
        PyPartitionReader { scan: PartitionScan::new(&path, filter, fail_on_data_loss), decoder: ArrowDecoder::new(topic, partition, include_headers) }
    }

    /// The next pyarrow.RecordBatch of at least `max_rows` rows (fewer at the end), or
    /// None when the scan is done. The GIL is released while reading and decoding.
    fn read(&mut self, py: Python<'_>, max_rows: usize) -> PyResult<Option<Py<PyAny>>> {
        let (scan, decoder) = (&mut self.scan, &mut self.decoder);
        py.detach(|| scan.read_into(decoder, max_rows.max(1)))?;
        if self.decoder.rows() == 0 {
            return Ok(None);
        }
        let batch = py.detach(|| self.decoder.finish());
        to_pyarrow(py, batch).map(Some)
    }

    #[getter]
    fn next_offset(&self) -> i64 {
        self.scan.next_offset()
    }
    #[getter]
    fn done(&self) -> bool {
        self.scan.is_done()
    }
    #[getter]
    fn segments_opened(&self) -> u64 {
        self.scan.stats.segments_opened
    }
    #[getter]
    fn bytes_read(&self) -> u64 {
        self.scan.stats.bytes_read
    }
    #[getter]
    fn batches_decoded(&self) -> u64 {
        self.scan.stats.batches_decoded
    }
}

/// (log start offset, log end offset) of a partition directory, read-only.
#[pyfunction]
pub(super) fn partition_offsets(py: Python<'_>, path: PathBuf) -> PyResult<(i64, i64)> {
    let dir = PartitionDir::new(&path);
    Ok(py.detach(|| -> crate::error::Result<(i64, i64)> { Ok((dir.log_start_offset()?, dir.log_end_offset()?)) })?)
}

/// The first offset whose record timestamp is >= `timestamp` (ms), or None.
#[pyfunction]
pub(super) fn offset_for_timestamp(py: Python<'_>, path: PathBuf, timestamp: i64) -> PyResult<Option<i64>> {
    let dir = PartitionDir::new(&path);
    Ok(py.detach(|| dir.offset_for_timestamp(timestamp))?)
}

/// Decodes the whole batches in `data` (as a Fetch returns them) into one pyarrow
/// RecordBatch; returns it with the offset after the last whole batch (or
/// `start_offset` when there is none).
#[pyfunction]
#[pyo3(signature = (data, topic, partition, *, start_offset = 0, end_offset = None, min_timestamp = None, max_timestamp = None, include_headers = false))]
#[allow(clippy::too_many_arguments, reason = "mirrors the Python keyword arguments of decode_arrow")]
pub(super) fn decode_arrow(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    topic: &str,
    partition: i32,
    start_offset: i64,
    end_offset: Option<i64>,
    min_timestamp: Option<i64>,
    max_timestamp: Option<i64>,
    include_headers: bool,
) -> PyResult<(Py<PyAny>, i64)> {
    let data = Borrowed::new(data)?;
    let buf = data.as_slice();
    let filter = record_filter(start_offset, end_offset, min_timestamp, max_timestamp);
    let (batch, next) = py.detach(|| arrow_decoder::decode_buffer(buf, topic, partition, include_headers, &filter))?;
    Ok((to_pyarrow(py, batch)?, next))
}

//! A Parquet file's footer, read through the storage layer and checked before the `parquet`
//! crate sees it, and the check of a column chunk's page headers before it is decoded.
//!
//! The `parquet` crate trusts lengths it reads: a list count in the footer becomes
//! `Vec::with_capacity(count)`, a binary length in a page header (read from an `io::Read`)
//! likewise, a page's `uncompressed_page_size` sizes its decompression buffer, and a negative
//! column chunk offset panics in `ColumnChunkMetaData::byte_range`. So every length is
//! checked here first, against the bytes that are really there:
//! - the footer's length against the file's size (before it is read);
//! - every list, set, map and binary length of the footer's Thrift encoding against the
//!   bytes left in the footer ([`check_thrift`]), so the crate's allocations are bounded by
//!   the footer's size, never by a number in it;
//! - every column chunk's offset and length against the data part of the file;
//! - every page header of a chunk, before it is decoded ([`check_pages`]): its Thrift lengths
//!   against the chunk, its compressed size against what is left of the chunk, and its
//!   uncompressed size against the chunk's total from the footer (the two are written
//!   independently, so one damaged number is caught by the other).

use std::sync::Arc;

use bytes::Bytes;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};

use crate::storage::{self, Identity, Location};

/// The first read of a file's end: most footers fit, so one request reads it.
const TAIL: u64 = 64 * 1024;
/// A Parquet file starts and ends with this.
const MAGIC: &[u8; 4] = b"PAR1";
/// Thrift structures nested deeper than this are refused (the footer's schema is flat; a
/// damaged file must not recurse without bound).
const MAX_DEPTH: u32 = 64;

/// One file's footer, checked, with what reading its row groups needs.
pub(super) struct FileMeta {
    pub(super) location: Location,
    /// Its size and version when the footer was read.
    pub(super) identity: Identity,
    /// The footer, decoded, with the Arrow schema.
    pub(super) arrow: ArrowReaderMetadata,
    /// The columns read (roots of the schema).
    pub(super) mask: ProjectionMask,
    /// The projected root columns: their index among the roots and their name.
    pub(super) roots: Vec<(usize, String)>,
    /// The decoder yields the projected columns in the file's order: the columns of a
    /// decoded batch to take, in the order asked for (none: as they are).
    pub(super) order: Option<Vec<usize>>,
    /// Where the footer starts: every column chunk lies in `4..data_end`.
    pub(super) data_end: u64,
}

impl FileMeta {
    pub(super) fn metadata(&self) -> &Arc<ParquetMetaData> {
        self.arrow.metadata()
    }
}

impl std::fmt::Debug for FileMeta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileMeta")
            .field("location", &self.location)
            .field("row_groups", &self.metadata().num_row_groups())
            .finish_non_exhaustive()
    }
}

/// Reads and checks `location`'s footer; `columns` are the root columns to read (all when
/// `None`).
pub(super) async fn read_footer(
    location: &Location,
    columns: Option<&[String]>,
    exclude: &[String],
) -> anyhow::Result<FileMeta> {
    let identity = storage::stat(location).await?;
    let len = identity.size;
    anyhow::ensure!(
        len >= 12,
        "{location}: not a Parquet file: {len} bytes, fewer than the magic and footer length \
         of an empty one (12)"
    );
    let tail_len = len.min(TAIL);
    let tail = storage::read_range(location.clone(), len - tail_len..len).await?;
    anyhow::ensure!(
        tail.len() as u64 == tail_len,
        "{location}: the file is shorter than its size said ({len} bytes): it changed while read"
    );
    let end = &tail[tail.len() - 8..];
    if &end[4..] != MAGIC {
        anyhow::ensure!(
            &end[4..] != b"PARE",
            "{location}: an encrypted Parquet file (magic PARE): not supported"
        );
        anyhow::bail!(
            "{location}: not a Parquet file, or truncated: it does not end with the magic PAR1 \
             (ends with {:02x?})",
            &end[4..]
        );
    }
    if tail_len == len {
        anyhow::ensure!(
            &tail[..4] == MAGIC,
            "{location}: not a Parquet file: it does not start with the magic PAR1"
        );
    }
    let footer_len = u64::from(u32::from_le_bytes([end[0], end[1], end[2], end[3]]));
    // Magic at the start, footer, length and magic at the end.
    anyhow::ensure!(
        footer_len + 12 <= len,
        "{location}: damaged footer: its length ({footer_len} bytes) is more than the file \
         ({len} bytes) holds"
    );
    let data_end = len - 8 - footer_len;
    let footer = if footer_len + 8 <= tail_len {
        let start = (tail_len - 8 - footer_len) as usize;
        tail.slice(start..tail.len() - 8)
    } else {
        let footer = storage::read_range(location.clone(), data_end..len - 8).await?;
        anyhow::ensure!(
            footer.len() as u64 == footer_len,
            "{location}: the file is shorter than its size said ({len} bytes): it changed while \
             read"
        );
        footer
    };
    let metadata = decode_footer(&footer).map_err(|e| anyhow::anyhow!("{location}: {e}"))?;
    check_chunks(&metadata, data_end).map_err(|e| anyhow::anyhow!("{location}: {e}"))?;
    let metadata = Arc::new(metadata);
    let arrow = guard(|| ArrowReaderMetadata::try_new(metadata, ArrowReaderOptions::new()))
        .map_err(|e| anyhow::anyhow!("{location}: damaged footer: its schema: {e}"))?;
    let (mask, roots) = projection(&arrow, columns, exclude)
        .map_err(|e| crate::Error::InvalidArgument(format!("{location}: {e}")))?;
    let mut sorted: Vec<usize> = roots.iter().map(|(i, _)| *i).collect();
    sorted.sort_unstable();
    sorted.dedup();
    let order: Vec<usize> = roots
        .iter()
        .map(|(i, _)| sorted.partition_point(|s| s < i))
        .collect();
    let order = (!order.iter().copied().eq(0..sorted.len())).then_some(order);
    Ok(FileMeta {
        location: location.clone(),
        identity,
        arrow,
        mask,
        roots,
        order,
        data_end,
    })
}

/// The footer's Thrift bytes, checked, then decoded by the `parquet` crate.
fn decode_footer(footer: &[u8]) -> Result<ParquetMetaData, String> {
    let mut at = 0;
    check_struct(footer, &mut at, 0, 0, &mut |_, _, _| {})
        .map_err(|e| format!("damaged footer: {e}"))?;
    guard(|| ParquetMetaDataReader::decode_metadata(footer))
        .map_err(|e| format!("damaged footer: {e}"))
}

/// Every row group's row count, and every column chunk's offset and length within the data
/// part of the file (`4..data_end`).
fn check_chunks(metadata: &ParquetMetaData, data_end: u64) -> Result<(), String> {
    for (g, group) in metadata.row_groups().iter().enumerate() {
        if group.num_rows() < 0 {
            return Err(format!(
                "damaged footer: row group {g} has {} rows",
                group.num_rows()
            ));
        }
        for column in group.columns() {
            let start = column
                .dictionary_page_offset()
                .unwrap_or_else(|| column.data_page_offset());
            let len = column.compressed_size();
            let inside = u64::try_from(start)
                .ok()
                .zip(u64::try_from(len).ok())
                .and_then(|(s, l)| Some((s, s.checked_add(l)?)))
                .is_some_and(|(s, e)| s >= 4 && e <= data_end);
            if !inside || column.uncompressed_size() < 0 {
                return Err(format!(
                    "damaged footer: row group {g}, column `{}`: its chunk ({len} bytes at \
                     {start}, {} uncompressed) is not inside the file's data (bytes 4..{data_end})",
                    column.column_path().string(),
                    column.uncompressed_size()
                ));
            }
        }
    }
    Ok(())
}

/// The root columns named (all when `None`) but those in `exclude`, as a projection, with
/// their indices and names.
fn projection(
    arrow: &ArrowReaderMetadata,
    columns: Option<&[String]>,
    exclude: &[String],
) -> Result<(ProjectionMask, Vec<(usize, String)>), String> {
    let schema = arrow.metadata().file_metadata().schema_descr();
    let fields = schema.root_schema().get_fields();
    let names: Vec<&str> = fields.iter().map(|f| f.name()).collect();
    let listed = || {
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(missing) = exclude.iter().find(|c| !names.contains(&c.as_str())) {
        return Err(format!(
            "exclude_cols: no column `{missing}` (the file has {})",
            listed()
        ));
    }
    let roots: Vec<(usize, String)> = match columns {
        None => names
            .iter()
            .enumerate()
            .map(|(i, n)| (i, n.to_string()))
            .collect(),
        Some(columns) => columns
            .iter()
            .map(|c| match names.iter().position(|n| n == c) {
                Some(i) => Ok((i, c.clone())),
                None => Err(format!("no column `{c}` (the file has {})", listed())),
            })
            .collect::<Result<_, _>>()?,
    };
    let roots: Vec<(usize, String)> = roots
        .into_iter()
        .filter(|(_, name)| !exclude.contains(name))
        .collect();
    let mask = ProjectionMask::roots(schema, roots.iter().map(|(i, _)| *i));
    Ok((mask, roots))
}

/// Runs `f`, turning a panic inside the `parquet` crate into an error (a last resort: the
/// checks above are meant to keep damaged lengths from reaching it).
pub(super) fn guard<R, E: std::fmt::Display>(
    f: impl FnOnce() -> Result<R, E>,
) -> Result<R, String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) => Err(e.to_string()),
        Err(payload) => Err(format!(
            "the parquet crate panicked on damaged input (caught): {}",
            crate::error::panic_message(payload.as_ref())
        )),
    }
}

/// Checks the pages of a column chunk (`chunk`, its bytes) before they are decoded: each
/// page header's Thrift lengths against the chunk, its compressed size against what is
/// left of the chunk, its uncompressed size against `uncompressed` (the chunk's total from
/// the footer), and its count of values against `values` (the chunk's, from the footer; a
/// dictionary page's also against its size: a value takes a byte at least), so that the
/// buffers the decoder sizes by these numbers are bounded by numbers written elsewhere.
pub(super) fn check_pages(chunk: &[u8], uncompressed: u64, values: u64) -> Result<(), String> {
    let mut at = 0usize;
    let mut page = 0usize;
    while at < chunk.len() {
        let start = at;
        let (mut compressed, mut size, mut counts) = (None, None, Vec::new());
        check_struct(
            chunk,
            &mut at,
            0,
            0,
            &mut |parent, field, value| match (parent, field) {
                (0, 2) => size = Some(value),
                (0, 3) => compressed = Some(value),
                // `num_values` of the data page (5), dictionary page (7) and data page v2 (8)
                // headers.
                (5 | 7 | 8, 1) => counts.push((parent, value)),
                _ => {}
            },
        )
        .map_err(|e| format!("page {page} at byte {start} of the chunk: damaged header: {e}"))?;
        let damaged = |what: String| {
            format!("page {page} at byte {start} of the chunk: damaged header: {what}")
        };
        let left = (chunk.len() - at) as u64;
        let compressed = compressed
            .and_then(|c| u64::try_from(c).ok())
            .filter(|&c| c <= left)
            .ok_or_else(|| {
                damaged(format!(
                    "compressed size {compressed:?}, with {left} bytes left in the chunk"
                ))
            })?;
        let size = size
            .and_then(|s| u64::try_from(s).ok())
            .filter(|&s| s <= uncompressed)
            .ok_or_else(|| {
                damaged(format!(
                    "uncompressed size {size:?}, more than the chunk's {uncompressed} bytes"
                ))
            })?;
        for (header, count) in counts {
            let most = if header == 7 {
                values.min(size)
            } else {
                values
            };
            if u64::try_from(count).map_or(true, |c| c > most) {
                return Err(damaged(format!(
                    "{count} values, more than the {most} the chunk can hold"
                )));
            }
        }
        at += compressed as usize;
        page += 1;
    }
    Ok(())
}

/// Walks one Thrift compact-protocol struct at `buf[*at..]` without allocating, checking
/// that every length fits in the bytes left; `seen` gets the integer fields of the struct
/// and of the structs in its fields as (the field holding the struct, or 0 for the struct
/// itself; field id; value). `parent` is the field this struct is in (0 at the top).
fn check_struct(
    buf: &[u8],
    at: &mut usize,
    depth: u32,
    parent: i16,
    seen: &mut dyn FnMut(i16, i16, i64),
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err("nested too deep".into());
    }
    let mut last: i16 = 0;
    loop {
        let byte = byte(buf, at)?;
        if byte == 0 {
            return Ok(());
        }
        let kind = byte & 0x0f;
        let delta = byte >> 4;
        let id = if delta == 0 {
            i16::try_from(zigzag(varint(buf, at)?)).map_err(|_| "a field id out of range")?
        } else {
            last.checked_add(i16::from(delta))
                .ok_or("a field id out of range")?
        };
        last = id;
        match kind {
            // Booleans carry their value in the type.
            1 | 2 => {}
            5 | 6 => seen(parent, id, zigzag(varint(buf, at)?)),
            12 if depth == 0 => check_struct(buf, at, depth + 1, id, seen)?,
            _ => check_value(buf, at, kind, depth)?,
        }
    }
}

/// Skips one value of compact-protocol type `kind`, checking its lengths.
fn check_value(buf: &[u8], at: &mut usize, kind: u8, depth: u32) -> Result<(), String> {
    let left = |at: &usize| (buf.len() - *at) as u64;
    match kind {
        // A boolean inside a list is a byte; a byte.
        1..=3 => skip(buf, at, 1),
        4..=6 => varint(buf, at).map(drop),
        7 => skip(buf, at, 8),
        8 => {
            let len = varint(buf, at)?;
            if len > left(at) {
                return Err(format!("a string of {len} bytes with {} left", left(at)));
            }
            skip(buf, at, len as usize)
        }
        9 | 10 => {
            let header = byte(buf, at)?;
            let elements = u64::from(header >> 4);
            let elements = if elements == 15 {
                varint(buf, at)?
            } else {
                elements
            };
            // Every element takes a byte at least.
            if elements > left(at) {
                return Err(format!(
                    "a list of {elements} elements with {} bytes left",
                    left(at)
                ));
            }
            for _ in 0..elements {
                check_value(buf, at, header & 0x0f, depth + 1)?;
            }
            Ok(())
        }
        11 => {
            let entries = varint(buf, at)?;
            if entries == 0 {
                return Ok(());
            }
            let kinds = byte(buf, at)?;
            if entries.saturating_mul(2) > left(at) {
                return Err(format!(
                    "a map of {entries} entries with {} bytes left",
                    left(at)
                ));
            }
            for _ in 0..entries {
                check_value(buf, at, kinds >> 4, depth + 1)?;
                check_value(buf, at, kinds & 0x0f, depth + 1)?;
            }
            Ok(())
        }
        12 => check_struct(buf, at, depth + 1, 0, &mut |_, _, _| {}),
        _ => Err(format!("an unknown Thrift type {kind}")),
    }
}

fn byte(buf: &[u8], at: &mut usize) -> Result<u8, String> {
    let b = *buf.get(*at).ok_or("cut short")?;
    *at += 1;
    Ok(b)
}

fn skip(buf: &[u8], at: &mut usize, n: usize) -> Result<(), String> {
    if buf.len() - *at < n {
        return Err("cut short".into());
    }
    *at += n;
    Ok(())
}

fn varint(buf: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut value = 0u64;
    for shift in (0..70).step_by(7) {
        let b = byte(buf, at)?;
        value |= u64::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("a varint longer than 10 bytes".into())
}

fn zigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// The bytes of `range` out of fetched `(start, bytes)` pieces, when one holds it whole.
pub(super) fn slice_of(pieces: &[(u64, Bytes)], range: std::ops::Range<u64>) -> Option<Bytes> {
    pieces.iter().find_map(|(start, bytes)| {
        let from = range.start.checked_sub(*start)? as usize;
        let to = from + (range.end - range.start) as usize;
        (to <= bytes.len()).then(|| bytes.slice(from..to))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thrift_lengths_past_the_end_are_refused() {
        // A struct with field 1 a binary of 200 bytes, but 3 present.
        let buf = [0x18, 0xc8, 0x01, b'a', b'b', b'c', 0];
        let e = check_struct(&buf, &mut 0, 0, 0, &mut |_, _, _| {}).unwrap_err();
        assert!(e.contains("200 bytes"), "{e}");
        // A list of 2^31 structs in 4 bytes.
        let buf = [0x19, 0xfc, 0x80, 0x80, 0x80, 0x80, 0x08, 0, 0];
        let e = check_struct(&buf, &mut 0, 0, 0, &mut |_, _, _| {}).unwrap_err();
        assert!(e.contains("2147483648 elements"), "{e}");
        // Deep nesting.
        let buf = vec![0x1c; 200];
        assert!(check_struct(&buf, &mut 0, 0, 0, &mut |_, _, _| {}).is_err());
    }

    #[test]
    fn thrift_integers_of_the_top_struct_are_seen() {
        // field 2 (i32) = 100, field 3 (i32) = -1, stop.
        let buf = [0x25, 0xc8, 0x01, 0x15, 0x01, 0];
        let mut seen = Vec::new();
        let mut at = 0;
        check_struct(&buf, &mut at, 0, 0, &mut |p, id, v| seen.push((p, id, v))).unwrap();
        assert_eq!(seen, [(0, 2, 100), (0, 3, -1)]);
        assert_eq!(at, buf.len());
        // field 5, a struct with field 1 (i32) = 7, then the top struct's field 6 = 1.
        let buf = [0x5c, 0x15, 0x0e, 0x00, 0x15, 0x02, 0];
        let mut seen = Vec::new();
        check_struct(&buf, &mut 0, 0, 0, &mut |p, id, v| seen.push((p, id, v))).unwrap();
        assert_eq!(seen, [(5, 1, 7), (0, 6, 1)]);
    }

    #[test]
    fn page_headers_are_checked_against_the_chunk() {
        // A data page header: type 0, uncompressed 4, compressed 4, data_page_header
        // { num_values 3 }, then 4 bytes of data.
        let page = [
            0x15, 0x00, 0x15, 0x08, 0x15, 0x08, 0x2c, 0x15, 0x06, 0x00, 0x00, 1, 2, 3, 4,
        ];
        assert_eq!(check_pages(&page, 4, 3), Ok(()));
        let e = check_pages(&page, 3, 3).unwrap_err();
        assert!(e.contains("uncompressed size Some(4)"), "{e}");
        let e = check_pages(&page, 4, 2).unwrap_err();
        assert!(e.contains("3 values, more than the 2"), "{e}");
        let e = check_pages(&page[..13], 4, 3).unwrap_err();
        assert!(
            e.contains("compressed size Some(4), with 2 bytes left"),
            "{e}"
        );
    }
}

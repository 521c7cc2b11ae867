//! TFRecord files as a [`ShardSource`]: counted by a walk over their headers (cached), read
//! whole or from a record.
//!
//! Where the TFRecord index plugs in: with an index, `count` reads each file's record count
//! from it, `seekable_records` answers `true` and `read` opens the file at the byte offset of
//! `unit.start` (instead of reading and dropping the records before it); `ShardPolicy::Record`
//! is then accepted.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::sync::{Mutex, OnceLock, PoisonError};

use bytes::Bytes;
use futures::future::BoxFuture;

use super::{ShardSource, Unit};
use crate::Dataset;
use crate::format::{Compression, TFRecordDataset};
use crate::storage::Location;

/// Counts by file: (size, modification time in ns) for local files, when counted.
type Cache = HashMap<(String, String), (u64, u128, u64)>;

fn cache() -> &'static Mutex<Cache> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CACHE.get_or_init(Mutex::default)
}

/// Forgets the record counts of TFRecord files counted so far (see
/// [`TFRecordDataset`]'s [`ShardSource::count`]): an object rewritten under the same URL is
/// counted again after this.
pub fn clear_count_cache() {
    cache()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
}

impl ShardSource for TFRecordDataset {
    type Item = Bytes;

    fn names(&self) -> Vec<String> {
        self.parts().0.iter().map(ToString::to_string).collect()
    }

    /// The records of each file, counted once per process and file: a local file that is
    /// not compressed by a walk over its record headers (12 bytes read per record, then a
    /// seek past the payload: the cost of reading the headers, not the data; each length's
    /// CRC is checked, payloads are not), counted again if its size or modification time
    /// changed; an object or a compressed file by reading it whole (the cost of one epoch's
    /// reading of it), counted again only after [`clear_count_cache`].
    fn count(&self) -> BoxFuture<'_, anyhow::Result<Vec<u64>>> {
        Box::pin(async move {
            let (files, compression) = self.parts();
            let mut counts = Vec::with_capacity(files.len());
            for file in files {
                counts.push(count_file(self, file, compression).await?);
            }
            Ok(counts)
        })
    }

    fn read(&self, unit: Unit) -> Dataset<Bytes> {
        let file = self.parts().0[unit.file].clone();
        let records = self.with_files(vec![file]).build();
        let records = if unit.start > 0 {
            // No index: the records before the start are read and dropped.
            records.skip(unit.start as i64)
        } else {
            records
        };
        records.take(unit.len() as i64)
    }
}

async fn count_file(
    source: &TFRecordDataset,
    file: &Location,
    compression: Compression,
) -> anyhow::Result<u64> {
    let key = (file.to_string(), format!("{compression:?}"));
    let plain = compression.for_extension(file.extension()) == Compression::None;
    match file.as_path().filter(|_| plain) {
        Some(path) => {
            let path = path.to_path_buf();
            let task = crate::runtime::spawn_blocking("distribute", move || {
                let meta = std::fs::metadata(&path).map_err(|e| {
                    anyhow::anyhow!("counting the records of {}: {e}", path.display())
                })?;
                let stamp = meta
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos());
                let cached = cache()
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(&key)
                    .copied();
                if let Some((size, at, n)) = cached
                    && size == meta.len()
                    && at == stamp
                {
                    return Ok(n);
                }
                let n = walk_headers(&path)?;
                cache()
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(key, (meta.len(), stamp, n));
                anyhow::Ok(n)
            })?;
            task.await
                .map_err(|e| crate::runtime::join_error("distribute", e))?
        }
        None => {
            let cached = cache()
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&key)
                .map(|c| c.2);
            if let Some(n) = cached {
                return Ok(n);
            }
            let n = source
                .with_files(vec![file.clone()])
                .build()
                .count()
                .await
                .map_err(|e| e.context(format!("counting the records of {file}")))?;
            cache()
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(key, (0, 0, n));
            Ok(n)
        }
    }
}

/// The records of a local TFRecord file, by its headers: each length's CRC checked, each
/// payload skipped. A partial header at the end is the end (as TensorFlow reads it); a
/// record cut short is an error naming the file and the record.
fn walk_headers(path: &Path) -> anyhow::Result<u64> {
    let name = path.display().to_string();
    let mut file = std::fs::File::open(path)
        .map_err(|e| anyhow::anyhow!("counting the records of {name}: {e}"))?;
    let size = file.metadata()?.len();
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, &mut file);
    let (mut at, mut n) = (0u64, 0u64);
    let loss = |record: u64, offset: u64, message: &str| -> anyhow::Error {
        crate::Error::DataLoss {
            path: name.clone(),
            record,
            offset,
            message: message.into(),
            looks_compressed: None,
            skipped: None,
        }
        .into()
    };
    while size - at >= 12 {
        let mut header = [0u8; 12];
        reader.read_exact(&mut header)?;
        let len = u64::from_le_bytes(header[..8].try_into().unwrap_or_default());
        let crc = u32::from_le_bytes(header[8..].try_into().unwrap_or_default());
        if crate::format::masked_crc32c(&header[..8]) != crc {
            return Err(loss(n, at, "corrupted record"));
        }
        let next = at
            .checked_add(12 + 4)
            .and_then(|a| a.checked_add(len))
            .filter(|&next| next <= size)
            .ok_or_else(|| loss(n, at, "truncated record"))?;
        reader.seek_relative((len + 4) as i64)?;
        at = next;
        n += 1;
    }
    Ok(n)
}

/// Files with an index ([`IndexedTFRecords`](crate::format::IndexedTFRecords)): counts from the
/// indexes (no reading), and a unit read from its first record on with ranged reads, so
/// [`ShardPolicy::Record`](super::ShardPolicy::Record) splits files between ranks (and `Auto`
/// picks it when there are fewer files than ranks). The source's own shard and shuffle are
/// not used: the plan decides what each rank reads.
impl ShardSource for crate::format::IndexedTFRecords {
    type Item = Bytes;

    fn names(&self) -> Vec<String> {
        self.file_names()
    }

    fn count(&self) -> BoxFuture<'_, anyhow::Result<Vec<u64>>> {
        Box::pin(async move { Ok(self.file_counts()) })
    }

    fn read(&self, unit: Unit) -> Dataset<Bytes> {
        self.file_run(unit.file, unit.start, unit.end).records()
    }

    fn seekable_records(&self) -> bool {
        true
    }
}

//! A store's objects as zarrs sees them: fetched first, through streamload's storage layer
//! (async reads, local or object storage, retried), then served to zarrs' synchronous
//! decoding from memory on a blocking thread.
//!
//! zarrs reads a chunk that is not in the store as the fill value (the spec's missing chunk);
//! here a key is "in the store" when the store's listing, taken when the store is opened,
//! has it. A chunk listed but not readable is an error, never a fill value.

use std::collections::HashMap;

use bytes::Bytes;
use zarrs::storage::byte_range::{ByteRange, ByteRangeIterator};
use zarrs::storage::{
    MaybeBytes, MaybeBytesIterator, ReadableStorageTraits, StorageError, StoreKey,
};

use crate::storage::{self, Location};

/// Objects fetched ahead of a read, by their key in the store.
#[derive(Debug, Default)]
pub(crate) struct Fetched(pub(crate) HashMap<StoreKey, Bytes>);

impl ReadableStorageTraits for Fetched {
    fn get(&self, key: &StoreKey) -> Result<MaybeBytes, StorageError> {
        Ok(self.0.get(key).cloned())
    }

    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<MaybeBytesIterator<'a>, StorageError> {
        let Some(data) = self.0.get(key).cloned() else {
            return Ok(None);
        };
        let key = key.clone();
        Ok(Some(Box::new(byte_ranges.map(move |range| {
            let len = data.len() as u64;
            // Computed here, not by `ByteRange::start`, which underflows on a suffix longer
            // than the object (a truncated shard shorter than its index).
            let (start, end) = match range {
                ByteRange::FromStart(offset, length) => (
                    offset,
                    length.map_or(len, |length| offset.saturating_add(length)),
                ),
                ByteRange::Suffix(length) => (len.checked_sub(length).unwrap_or(u64::MAX), len),
            };
            if start > end || end > len {
                return Err(StorageError::Other(format!(
                    "`{key}`: bytes {start}..{end} are past its end ({len} bytes): truncated?"
                )));
            }
            Ok(data.slice(start as usize..end as usize))
        }))))
    }

    fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, StorageError> {
        Ok(self.0.get(key).map(|b| b.len() as u64))
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

/// The location of `key` (`/`-separated, relative) under `root`.
pub(crate) fn child(root: &Location, key: &str) -> anyhow::Result<Location> {
    Ok(match root {
        Location::Local(path) => {
            Location::Local(key.split('/').fold(path.clone(), |p, part| p.join(part)))
        }
        Location::Url(url) => {
            let text = format!("{}/{key}", url.as_str().trim_end_matches('/'));
            Location::Url(
                url::Url::parse(&text)
                    .map_err(|e| anyhow::anyhow!("{root}: no URL for `{key}`: {e}"))?,
            )
        }
    })
}

/// The bytes of the object `key` (of `size` bytes, as listed) under `root`.
pub(crate) async fn fetch(root: &Location, key: &str, size: u64) -> anyhow::Result<Bytes> {
    storage::read_range(child(root, key)?, 0..size).await
}

/// A Zarr v2 `.zarray` with a boolean fill value (`"fill_value": false`, as zarr-python
/// writes for `bool` arrays) with it as `0` or `1`: zarrs 0.22 parses v2 fill values as
/// numbers or strings only (and reads `0`/`1` as a bool's fill value). Anything else as is.
pub(crate) fn bool_fill_value(name: &str, bytes: Bytes) -> Bytes {
    if name != ".zarray" {
        return bytes;
    }
    let Ok(mut metadata) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return bytes;
    };
    let Some(serde_json::Value::Bool(fill)) = metadata.get("fill_value") else {
        return bytes;
    };
    metadata["fill_value"] = serde_json::Value::from(u8::from(*fill));
    serde_json::to_vec(&metadata).map_or(bytes, Bytes::from)
}

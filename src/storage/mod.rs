//! Where bytes come from: local paths and object-store URLs, behind one async reader.
//!
//! Every file format reads through [`Location`]s, so the same reader code serves local files
//! and `s3://`, `gs://`, `az://`, `http(s)://`, `file://` and `memory://` URLs.
//!
//! - Local files are read in blocks by positioned reads on blocking threads, several blocks
//!   ahead of the consumer; the format readers cut elements straight out of the blocks.
//! - URLs are served by the `object_store` crate, an object as ranged GETs of
//!   [`ReadOptions::block_size`] with several blocks in flight (read-ahead hides first-byte
//!   latency), retried with backoff and resumed at the byte where a broken body stopped.
//!   A store is built once per bucket from the usual environment variables (`AWS_*`,
//!   `GOOGLE_*`, `AZURE_*`), or registered explicitly with [`register`] /
//!   [`register_with`] (custom endpoints and credentials, read options, `memory://` stores).
//! - Retries: one policy, streamload's ([`ReadOptions`]'s [Retries](ReadOptions#retries));
//!   stores built from URLs and the environment have `object_store`'s own retries off, so
//!   no layer retries inside another. Transient faults (5xx, 408, 429, resets, stalls) back
//!   off with jitter from 100 ms up to 10 s until [`ReadOptions::retry_deadline`] (5 minutes
//!   by default) has passed since the first fault in a row, per request, and a broken body
//!   resumes where it stopped; listings resume after the last key listed. Permanent faults
//!   fail at once, naming the URL: other 4xx answers, missing credentials, and on a first
//!   request a refused connection, an unknown host or a failed TLS handshake (a wrong URL or
//!   endpoint fails in milliseconds, not minutes).
//! - Credentials: where the environment configures none (no `AWS_ACCESS_KEY_ID`, web
//!   identity, container credentials or `AWS_SKIP_SIGNATURE`; likewise for GCS and Azure),
//!   the cloud's metadata service (an instance role) is asked once, for at most 2 s, and a
//!   failure names the variables to set; `AWS_EC2_METADATA_DISABLED=true` skips it. Errors
//!   show each cause once.
//! - Timeouts: a store built from the environment has no whole-request timeout (object_store's
//!   default 30 s covers the whole body, so a slow 8 MiB block would be cut every 30 s), only
//!   a connect timeout; a body that sends no byte for [`ReadOptions::read_timeout`] counts as
//!   broken and is resumed. A store you register keeps the timeouts you built it with (turn
//!   its whole-request timeout off with `ClientOptions::with_timeout_disabled`, and its
//!   retries with `RetryConfig { max_retries: 0, .. }`, so that one retry policy runs).
//! - Credentials never appear when a [`Location`] is shown (`{}` or `{:?}`), and a URL with a
//!   password, a query string (a pre-signed URL, an Azure SAS token) or a fragment is refused
//!   rather than sent: pass credentials through the environment or [`register_with`].
//! - Nor in errors: every error of [`open`], [`read_range`], [`glob()`] and the readers passes
//!   through one redaction, done on the text (so it holds for URLs that fail to parse: a
//!   bad host, port or IPv6 literal), that removes user names and passwords of any scheme,
//!   non-numeric ports, query strings and fragments, and the values of parameters named like
//!   signatures, tokens, secrets, passwords, credentials and keys; in `Display` and `Debug`
//!   of the error and of each of its causes (foreign errors, whose `Debug` may show a
//!   URL's fields, are kept as their redacted message).
//!
//! ```
//! use std::sync::Arc;
//! use futures::StreamExt;
//! use object_store::{ObjectStoreExt, PutPayload, memory::InMemory, path::Path};
//! use streamload::format::TextLineDataset;
//! use streamload::storage;
//!
//! # tokio_test::block_on(async {
//! let store = Arc::new(InMemory::new());
//! store.put(&Path::from("text/a.txt"), PutPayload::from("one\ntwo\n")).await?;
//! storage::register("memory://doc-example", store)?;
//! let files = storage::glob("memory://doc-example/text/*.txt").await?;
//! let lines = TextLineDataset::new(files).build().collect().await?;
//! assert_eq!(lines, ["one", "two"]);
//! # anyhow::Ok(()) }).unwrap();
//! ```

pub(crate) mod blocks;
pub(crate) mod compression;
pub(crate) mod listing;
pub(crate) mod local;
mod ranged;
mod redact;
pub(crate) mod remote;

pub(crate) use blocks::Blocks;
pub(crate) use redact::{redact, redact_error, redact_io};

use std::fmt;

use anyhow::Context as _;
use std::path::{Path, PathBuf};

pub use ranged::ReadOptions;
pub use remote::{glob, register, register_with};

/// A file to read: a local path or an object-store URL.
///
/// Built from `&str`/`String` (a string with `scheme://` is a URL, anything else a path;
/// `file://` URLs become paths) and from `Path`/`PathBuf`.
///
/// Shown (`{}` and `{:?}`) without the user name, password, query string or fragment a URL
/// may carry (a malformed URL, kept as a local path, is shown redacted too), so a location is
/// safe in errors and logs; reading a URL with a user name, a password, a query string (a
/// pre-signed URL, an Azure SAS token) or a fragment is refused, never sent.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Location {
    /// A local file.
    Local(PathBuf),
    /// An object in a store (`s3://bucket/key`, ...).
    Url(url::Url),
}

impl Location {
    /// Parses a path or URL.
    pub fn parse(text: &str) -> Location {
        match url::Url::parse(text) {
            Ok(url) if url.scheme() == "file" => match url.to_file_path() {
                Ok(path) => Location::Local(path),
                Err(()) => Location::Url(url),
            },
            // One-letter schemes are Windows drive letters, not URLs.
            Ok(url) if url.scheme().len() > 1 && text.contains("://") => Location::Url(url),
            _ => Location::Local(PathBuf::from(text)),
        }
    }

    /// The local path, when this is a local file.
    pub fn as_path(&self) -> Option<&Path> {
        match self {
            Location::Local(p) => Some(p),
            Location::Url(_) => None,
        }
    }

    /// The file's extension (for compression by extension).
    pub(crate) fn extension(&self) -> Option<&str> {
        match self {
            Location::Local(p) => p.extension().and_then(|e| e.to_str()),
            Location::Url(u) => u
                .path()
                .rsplit('/')
                .next()?
                .rsplit_once('.')
                .map(|(_, e)| e),
        }
    }
}

impl fmt::Display for Location {
    /// The path, or the URL without any credentials it carried.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // A malformed URL is a local path: shown redacted all the same.
            Location::Local(p) => f.write_str(&redact(&p.display().to_string())),
            Location::Url(u) => {
                let mut shown = u.clone();
                let _ = shown.set_password(None);
                let _ = shown.set_username("");
                shown.set_query(None);
                shown.set_fragment(None);
                f.write_str(&redact(shown.as_str()))
            }
        }
    }
}

impl fmt::Debug for Location {
    /// As [`Display`](fmt::Display): `Url("s3://bucket/key")`, without credentials.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Local(p) => f
                .debug_tuple("Local")
                .field(&format_args!("{}", redact(&format!("{p:?}"))))
                .finish(),
            Location::Url(_) => f
                .debug_tuple("Url")
                .field(&format_args!("{:?}", self.to_string()))
                .finish(),
        }
    }
}

impl From<&str> for Location {
    fn from(text: &str) -> Location {
        Location::parse(text)
    }
}

impl From<String> for Location {
    fn from(text: String) -> Location {
        Location::parse(&text)
    }
}

impl From<&String> for Location {
    fn from(text: &String) -> Location {
        Location::parse(text)
    }
}

impl From<PathBuf> for Location {
    fn from(path: PathBuf) -> Location {
        Location::Local(path)
    }
}

impl From<&PathBuf> for Location {
    fn from(path: &PathBuf) -> Location {
        Location::Local(path.clone())
    }
}

impl From<&Path> for Location {
    fn from(path: &Path) -> Location {
        Location::Local(path.to_path_buf())
    }
}

impl From<url::Url> for Location {
    fn from(url: url::Url) -> Location {
        Location::parse(url.as_str())
    }
}

impl From<&Location> for Location {
    fn from(location: &Location) -> Location {
        location.clone()
    }
}

/// Opens `location` as an async reader of its bytes: a local file read in 1 MiB blocks two
/// ahead on blocking threads; an object as ranged GETs with read-ahead, retries and resumes
/// (its store's [`ReadOptions`]), through `tokio_util`'s `StreamReader`.
///
/// ```
/// use std::sync::Arc;
/// use object_store::{ObjectStoreExt, PutPayload, memory::InMemory, path::Path};
/// use streamload::storage;
/// use tokio::io::AsyncReadExt;
///
/// # tokio_test::block_on(async {
/// let store = Arc::new(InMemory::new());
/// store.put(&Path::from("greeting.txt"), PutPayload::from("hello, world")).await?;
/// storage::register("memory://open-example", store)?;
///
/// let mut reader = storage::open("memory://open-example/greeting.txt").await?;
/// let mut text = String::new();
/// reader.read_to_string(&mut text).await?;
/// assert_eq!(text, "hello, world");
/// # anyhow::Ok(()) }).unwrap();
/// ```
///
/// # Errors
///
/// When the file or object cannot be opened (not found, forbidden, a permanent fault or
/// transient ones past the retry deadline), naming the location; reads fail the same way
/// later.
pub async fn open(
    location: impl Into<Location>,
) -> anyhow::Result<impl tokio::io::AsyncBufRead + Send + Unpin> {
    use futures::TryStreamExt;

    let location = location.into();
    let blocks = open_blocks(&location, local::DEFAULT_BLOCK, local::READ_AHEAD, false, 0)
        .await
        .map_err(|e| redact_error(e.context(format!("opening {location}"))))?
        .blocks;
    let shown = location.to_string();
    let blocks = blocks.map_err(move |e| {
        std::io::Error::new(
            e.kind(),
            redact(&format!("reading {shown}: {e}")).into_owned(),
        )
    });
    Ok(tokio_util::io::StreamReader::new(blocks))
}

/// The bytes of `range` in `location` (a local path or a URL), up to its end: for an object,
/// one ranged GET, retried and resumed like a block (see [`ReadOptions`]).
///
/// ```
/// use std::sync::Arc;
/// use object_store::{ObjectStoreExt, PutPayload, memory::InMemory, path::Path};
/// use streamload::storage;
///
/// # tokio_test::block_on(async {
/// let store = Arc::new(InMemory::new());
/// store.put(&Path::from("greeting.txt"), PutPayload::from("hello, world")).await?;
/// storage::register("memory://range-example", store)?;
///
/// let url = "memory://range-example/greeting.txt";
/// assert_eq!(storage::read_range(url, 7..12).await?, "world");
/// assert_eq!(storage::read_range(url, 7..100).await?, "world", "up to the end");
/// assert!(storage::read_range(url, 100..200).await.is_err(), "past the end");
/// # anyhow::Ok(()) }).unwrap();
/// ```
///
/// # Errors
///
/// A range starting past the end, a missing file or object, a permanent fault or transient
/// ones past the retry deadline, each naming the location.
pub async fn read_range(
    location: impl Into<Location>,
    range: std::ops::Range<u64>,
) -> anyhow::Result<bytes::Bytes> {
    let location = location.into();
    match &location {
        Location::Local(path) => local::read_range(path, range.clone())
            .await
            .map_err(|e| anyhow::anyhow!("reading {location} at {range:?}: {e}")),
        Location::Url(url) => remote::read_range(url, range).await,
    }
    .map_err(redact_error)
}

/// Writes `bytes` as the whole file or object at `location`, replacing what is there: a
/// local file atomically (a temporary file beside it, renamed over it), an object by one PUT
/// (stored whole or not at all; retried on transient faults like a read, see
/// [`ReadOptions`]).
///
/// # Errors
///
/// When it cannot be written (a missing directory, no permission, a permanent fault or
/// transient ones past the retry deadline), naming the location.
pub(crate) async fn put(location: &Location, bytes: bytes::Bytes) -> anyhow::Result<()> {
    match location {
        Location::Local(path) => local::write_atomic(path, bytes)
            .await
            .map_err(|e| anyhow::anyhow!("writing {location}: {e}")),
        Location::Url(url) => remote::put(url, bytes)
            .await
            .map_err(|e| e.context(format!("writing {location}"))),
    }
    .map_err(redact_error)
}

/// What `location` is now: its size and version (a local file's modification time, an
/// object's ETag from a HEAD, retried like a read).
///
/// # Errors
///
/// A missing file or object, not a regular file, or a fault reading its metadata, each
/// naming the location.
// Only the Parquet reader (feature `parquet`) asks for a size before reading.
#[cfg_attr(not(feature = "parquet"), allow(dead_code))]
pub(crate) async fn stat(location: &Location) -> anyhow::Result<Identity> {
    match location {
        Location::Local(path) => {
            let meta = tokio::fs::metadata(path)
                .await
                .with_context(|| format!("reading the size of {location}"))?;
            local::identity(&meta)
                .ok_or_else(|| anyhow::anyhow!("{location} is not a regular file"))
        }
        Location::Url(url) => remote::stat(url).await,
    }
}

/// `e` and its sources as one message, each cause once: a source whose message its error's
/// message already holds (object_store's errors show their source, "Generic S3 error:
/// Error performing GET ... - HTTP error: ...") is not shown again, one that adds something
/// (reqwest's "error sending request" hides "Connection refused") follows after `: `.
///
/// Errors from object stores enter `anyhow` through this, as a message: kept as sources,
/// `{:#}` would show each cause as often as it is repeated down the chain.
///
/// The message is redacted (see [`redact`]): object stores' errors show the URLs they asked.
pub(crate) fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    redact(&describe_raw(e)).into_owned()
}

fn describe_raw(e: &(dyn std::error::Error + 'static)) -> String {
    let mut shown = e.to_string();
    let mut source = e.source();
    while let Some(e) = source {
        let text = e.to_string();
        if !text.is_empty() && !shown.contains(&text) {
            shown.push_str(": ");
            shown.push_str(&text);
        }
        source = e.source();
    }
    shown
}

/// What a file was when it was opened, to tell later whether it changed (a checkpoint names
/// the files it read by it): its size, and its modification time in nanoseconds since 1970
/// (a local file) or a hash of its ETag (an object; without an ETag, its Last-Modified date).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Identity {
    pub(crate) size: u64,
    pub(crate) version: u64,
}

impl Identity {
    /// A short digest of the identity, `1..=16383` (at most two bytes in a checkpoint's
    /// varints): carried in the saved position of each record read from the file, so that
    /// reading a record again by position can tell the file changed (a changed file goes
    /// unnoticed there with a chance of 1 in 16,383; a reader restored at its offset compares
    /// the whole identity).
    pub(crate) fn digest(&self) -> u64 {
        // SplitMix64's finaliser over both words.
        let mut z = self.size ^ self.version.rotate_left(29) ^ 0x9E37_79B9_7F4A_7C15;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % 16383 + 1
    }
}

/// What a local file is now, without waiting (a `stat`); nothing for an object (that takes a
/// round trip). For the state a file reader saves before it has opened its file, so that a
/// resume from that state can tell the file changed.
pub(crate) fn identity_now(location: &Location) -> Option<Identity> {
    let path = location.as_path()?;
    local::identity(&std::fs::metadata(path).ok()?)
}

/// What the file at `location` is now: its size and version (a local file's metadata, an
/// object's HEAD).
pub(crate) async fn identity(location: &Location) -> anyhow::Result<Identity> {
    match location {
        Location::Local(path) => {
            let meta = tokio::fs::metadata(path)
                .await
                .map_err(|e| anyhow::anyhow!("reading the size of {location}: {e}"))?;
            local::identity(&meta).ok_or_else(|| anyhow::anyhow!("{location} is not a file"))
        }
        Location::Url(url) => remote::identity(url)
            .await
            .map_err(|e| e.context(format!("reading the size of {location}"))),
    }
}

/// Every file under the directory (or object-store prefix) `location`, by its path relative
/// to it (`/`-separated), with its size and version, in path order: a local directory walked
/// on a blocking thread, a prefix listed (retried as a read is).
///
/// # Errors
///
/// A directory that cannot be read (a missing one is empty), a failed listing, naming the
/// location.
// Only the Zarr reader (feature `zarr`) lists a store.
#[cfg_attr(not(feature = "zarr"), allow(dead_code))]
pub(crate) async fn list(location: &Location) -> anyhow::Result<Vec<(String, Identity)>> {
    const STAGE: &str = "list";
    match location {
        Location::Local(path) => {
            let path = path.clone();
            let shown = location.clone();
            crate::runtime::spawn_blocking(STAGE, move || {
                let mut found = Vec::new();
                local::walk(&path, "", &mut found)
                    .map_err(|e| anyhow::anyhow!("listing {shown}: {e}"))?;
                found.sort_by(|a, b| a.0.cmp(&b.0));
                anyhow::Ok(found)
            })?
            .await
            .map_err(|e| crate::runtime::join_error(STAGE, e))?
        }
        Location::Url(url) => remote::list(url).await,
    }
    .map_err(redact_error)
}

/// A file opened for reading, as a stream of blocks.
pub(crate) struct OpenedFile {
    pub(crate) blocks: Blocks,
    /// The blocks are windows of the file mapped into memory.
    pub(crate) mapped: bool,
    /// The offset the blocks start at: the offset asked for, or 0 where the file cannot be
    /// read from an offset (a pipe, a device: read from its start).
    pub(crate) start: u64,
    /// What the file was when opened (none for a pipe or a device).
    pub(crate) identity: Option<Identity>,
}

/// Opens `location` for reading from byte `offset`, as a stream of blocks: local files in
/// blocks of `block` bytes with `read_ahead` blocks in flight, read by positioned reads
/// from the offset (with `memory_map`, mapped windows where the file can be mapped); objects
/// as ranged GETs from the offset. A pipe or a device is read from its start
/// ([`OpenedFile::start`] says so).
pub(crate) async fn open_blocks(
    location: &Location,
    block: usize,
    read_ahead: usize,
    memory_map: bool,
    offset: u64,
) -> anyhow::Result<OpenedFile> {
    open_blocks_raw(location, block, read_ahead, memory_map, offset)
        .await
        .map_err(redact_error)
}

async fn open_blocks_raw(
    location: &Location,
    block: usize,
    read_ahead: usize,
    memory_map: bool,
    offset: u64,
) -> anyhow::Result<OpenedFile> {
    use futures::TryStreamExt;
    match location {
        Location::Local(path) if memory_map => {
            Ok(local::map_ahead(path, block, read_ahead, offset).await?)
        }
        Location::Local(path) => Ok(local::read_ahead(path, block, read_ahead, offset).await?),
        Location::Url(url) => {
            let (blocks, identity) = remote::open(url, offset).await?;
            Ok(OpenedFile {
                blocks: Box::pin(blocks.map_err(redact_io)),
                mapped: false,
                start: offset,
                identity: Some(identity),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    /// An error whose message shows its source's, as object_store's do.
    #[derive(Debug)]
    struct Shows(&'static str, Option<Box<Shows>>);

    impl std::fmt::Display for Shows {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            match &self.1 {
                Some(source) => write!(f, "{}: {source}", self.0),
                None => f.write_str(self.0),
            }
        }
    }

    impl std::error::Error for Shows {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|e| e as _)
        }
    }

    #[test]
    fn describe_shows_each_cause_once() {
        let inner = Shows("Account must be specified", None);
        let e = Shows("Generic error", Some(Box::new(inner)));
        assert_eq!(
            super::describe(&e),
            "Generic error: Account must be specified"
        );
        // A source its error does not show follows it.
        let io = std::io::Error::other(Shows("Connection refused", None));
        let e = std::io::Error::other(Wrapped(io));
        assert_eq!(
            super::describe(&e),
            "error sending request: Connection refused"
        );
    }

    /// An error that hides its source's message, as reqwest's do.
    #[derive(Debug)]
    struct Wrapped(std::io::Error);

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("error sending request")
        }
    }

    impl std::error::Error for Wrapped {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
}

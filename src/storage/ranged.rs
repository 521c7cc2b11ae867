//! Reading one object as ranged GETs: read-ahead hides first-byte latency, retries with
//! backoff ride out transient faults, and a broken body resumes at the byte where it stopped.
//!
//! An object is read in blocks of [`ReadOptions::block_size`], each one ranged GET. The
//! first block's response also tells the object's size and ETag (its `Content-Range` and
//! `ETag` headers), so an object no larger than a block costs one round trip, not two (a
//! HEAD, then a GET). The later blocks go out with [`ReadOptions::read_ahead`] blocks in
//! flight at once and at most [`ReadOptions::max_connections`] requests per store. Each
//! block is fetched by a task of its own (stopped when the stream is dropped), so a body is
//! drained and its connection given back even while the consumer reads other objects.
//! Blocks are yielded in order, so the reader above sees one byte stream. When the first GET
//! fails with anything but a permanent fault (an empty object has no byte to range over; a
//! server may be throttling), the size and ETag come from a HEAD instead and every block is
//! fetched as below.
//!
//! Later blocks and resumed bodies never come from another version of the object: they are
//! conditional on the first response's ETag (`If-Match`) or, from a server that sends none,
//! on its `Last-Modified` date (`If-Unmodified-Since`), and each response must show the same
//! size and the same ETag (or, without one, date). From a server that sends neither, nothing
//! can be checked: an object is read only as far as its first response goes unbroken, then
//! fails ("changed or cannot be validated") rather than mix versions.
//!
//! A transient fault (5xx, throttling, a reset connection, a body that stops or stalls past
//! [`ReadOptions::read_timeout`]) is retried with exponential backoff and jitter; the retry
//! asks only for the bytes not yet received, so nothing is lost or read twice. A permanent
//! fault (not found, forbidden, bad credentials, the object changed since its first block)
//! fails at once, naming the URL and never a credential.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use object_store::path::Path as StorePath;
use object_store::{GetOptions, GetRange, GetResult, ObjectMeta, ObjectStore, ObjectStoreExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::Location;
use crate::format::Blocks;
use crate::runtime::{self, Task};

/// How objects are read from a store (see [`register_with`](super::register_with)).
///
/// ```
/// use std::time::Duration;
/// use streamload::storage::ReadOptions;
///
/// let options = ReadOptions::default()
///     .block_size(16 << 20)
///     .read_ahead(2)
///     .max_connections(32)
///     .retries(5)
///     .read_timeout(Duration::from_secs(10));
/// assert_eq!(options.get_block_size(), 16 << 20);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOptions {
    block_size: u64,
    read_ahead: usize,
    max_connections: usize,
    retries: u32,
    backoff: Duration,
    max_backoff: Duration,
    read_timeout: Duration,
}

impl Default for ReadOptions {
    /// 8 MiB blocks, 4 read ahead per object, 64 requests per store, 8 retries from 100 ms
    /// backoff up to 10 s, 30 s without a byte is a stall.
    fn default() -> Self {
        ReadOptions {
            block_size: 8 << 20,
            read_ahead: 4,
            max_connections: 64,
            retries: 8,
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(10),
            read_timeout: Duration::from_secs(30),
        }
    }
}

impl ReadOptions {
    /// Bytes per ranged GET (at least 1).
    pub fn block_size(mut self, bytes: u64) -> Self {
        self.block_size = bytes.max(1);
        self
    }

    /// Blocks of one object requested ahead of the reader (at least 1); memory per open
    /// object is about `read_ahead * block_size`.
    pub fn read_ahead(mut self, blocks: usize) -> Self {
        self.read_ahead = blocks.max(1);
        self
    }

    /// Requests in flight to the store at once, over every object read from it (at least 1).
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = n.max(1);
        self
    }

    /// Retries of a transient fault per block before its error is returned; a try that
    /// brought some bytes before it broke starts the count again.
    pub fn retries(mut self, n: u32) -> Self {
        self.retries = n;
        self
    }

    /// The first retry's delay, doubled per retry up to `max` (each with random jitter).
    pub fn backoff(mut self, first: Duration, max: Duration) -> Self {
        self.backoff = first;
        self.max_backoff = max.max(first);
        self
    }

    /// How long a body may go without a byte before it counts as broken and is resumed (also
    /// how long a response's headers may take). The whole body has no time limit: stores
    /// built from the environment have object_store's whole-request timeout turned off.
    pub fn read_timeout(mut self, timeout: Duration) -> Self {
        self.read_timeout = timeout;
        self
    }

    /// The block size.
    pub fn get_block_size(&self) -> u64 {
        self.block_size
    }
}

/// A store with how it is read and its connection limit.
#[derive(Debug, Clone)]
pub(crate) struct Reader {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) options: ReadOptions,
    pub(crate) connections: Arc<Semaphore>,
}

impl Reader {
    pub(crate) fn new(store: Arc<dyn ObjectStore>, options: ReadOptions) -> Self {
        let connections = Arc::new(Semaphore::new(options.max_connections));
        Reader {
            store,
            options,
            connections,
        }
    }
}

/// The object at `path` as a stream of blocks; `shown` names it in errors.
pub(crate) async fn open(
    reader: Reader,
    path: StorePath,
    shown: Location,
) -> anyhow::Result<Blocks> {
    let block = reader.options.block_size;
    let (meta, first) = match request(&reader, &path, 0..block, None).await {
        Ok((permit, response)) => {
            let meta = response.meta.clone();
            (meta, Some((permit, response.into_stream())))
        }
        // An empty object has no byte to range over: its size comes from a HEAD.
        Err(Fault::Permanent(e)) if status_of_chain(&e) != Some(416) => {
            return Err(anyhow::anyhow!("reading {shown}: {e}"));
        }
        Err(Fault::Changed(message)) => return Err(anyhow::anyhow!("reading {shown}: {message}")),
        Err(fault) => {
            let meta = head(&reader, &path, &shown).await.map_err(|e| {
                let get = match fault {
                    Fault::Transient(message) | Fault::Changed(message) => message,
                    Fault::Permanent(e) => e.to_string(),
                };
                e.context(format!(
                    "reading {shown}: the GET failed ({get}), then the HEAD"
                ))
            })?;
            (meta, None)
        }
    };
    let size = meta.size;
    let read_ahead = reader.options.read_ahead;
    let object = Arc::new(Object {
        reader,
        path,
        first: meta,
        shown,
    });
    // Each block is fetched by a task of its own, so a body is drained (and its connection
    // given back) whether or not the consumer is polling this object just now: otherwise
    // objects read at once could each hold a connection the others wait for.
    let first_block = 0..block.min(size);
    let mut first = first.map(|opened| Fetch::spawn(&object, first_block, Some(opened)));
    let blocks = stream::iter((0..size).step_by(block as usize))
        .map(move |start| {
            let range = start..(start + block).min(size);
            first
                .take()
                .unwrap_or_else(|| Fetch::spawn(&object, range, None))
                .join()
        })
        .buffered(read_ahead)
        .map_ok(|parts| stream::iter(parts.into_iter().map(Ok)))
        .try_flatten();
    Ok(blocks.boxed())
}

/// The bytes of `range` in the object at `path`, up to its end: one ranged GET, retried,
/// and resumed as a block is.
pub(crate) async fn read_range(
    reader: Reader,
    path: StorePath,
    shown: Location,
    range: Range<u64>,
) -> anyhow::Result<Bytes> {
    if range.is_empty() {
        return Ok(Bytes::new());
    }
    // As in `open`: a first GET that fails with anything but a permanent fault (a range
    // past the end is one, for some stores) is followed by a HEAD, for the size.
    let (meta, opened) = match request(&reader, &path, range.clone(), None).await {
        Ok((permit, response)) => {
            let meta = response.meta.clone();
            (meta, Some((permit, response.into_stream())))
        }
        Err(Fault::Permanent(e)) if status_of_chain(&e) != Some(416) => {
            return Err(anyhow::anyhow!("reading {shown}: {e}"));
        }
        Err(_) => (head(&reader, &path, &shown).await?, None),
    };
    anyhow::ensure!(
        range.start <= meta.size,
        "reading {shown} at {range:?}: the range starts past the end ({} bytes)",
        meta.size
    );
    let end = range.end.min(meta.size);
    if range.start == end {
        return Ok(Bytes::new());
    }
    let object = Object {
        reader,
        path,
        first: meta,
        shown,
    };
    let parts = object.fetch(range.start..end, opened).await?;
    Ok(match <[Bytes; 1]>::try_from(parts) {
        Ok([one]) => one,
        Err(parts) => parts.concat().into(),
    })
}

const STAGE: &str = "object storage";

/// A block being fetched by its own task (stopped when dropped).
struct Fetch(std::io::Result<Task<std::io::Result<Vec<Bytes>>>>);

impl Fetch {
    fn spawn(object: &Arc<Object>, range: Range<u64>, opened: Option<Body>) -> Fetch {
        let object = Arc::clone(object);
        let task = runtime::spawn(STAGE, async move { object.fetch(range, opened).await });
        Fetch(task.map_err(std::io::Error::other))
    }

    /// The block's bytes, as the body chunks they arrived in.
    async fn join(self) -> std::io::Result<Vec<Bytes>> {
        match self.0?.await {
            Ok(parts) => parts,
            Err(e) => Err(std::io::Error::other(runtime::join_error(STAGE, e))),
        }
    }
}

/// The object's size and ETag from a HEAD, retried on transient faults.
async fn head(
    reader: &Reader,
    path: &StorePath,
    shown: &Location,
) -> anyhow::Result<object_store::ObjectMeta> {
    let mut failures = 0;
    loop {
        let head = {
            let _permit = reader.connections.acquire().await?;
            reader.store.head(path).await
        };
        match head {
            Ok(meta) => return Ok(meta),
            Err(e) => {
                let delay = retry_or_fail(&reader.options, &mut failures, classify(e), shown)?;
                tokio::time::sleep(delay).await;
            }
        }
    }
}

/// A response whose body is being read, with the connection permit it holds.
type Body = (
    OwnedSemaphorePermit,
    BoxStream<'static, object_store::Result<Bytes>>,
);

/// Starts one ranged GET of `range`, waiting for a connection permit and then for the
/// response's headers (at most the read timeout). With `first` (the object as its first
/// response described it), the GET is conditional on its ETag, or without one on its
/// Last-Modified date, and the response must describe the same object: the same size, and
/// the same ETag (or without one, the same date).
async fn request(
    reader: &Reader,
    path: &StorePath,
    range: Range<u64>,
    first: Option<&ObjectMeta>,
) -> Result<(OwnedSemaphorePermit, GetResult), Fault> {
    let permit = Arc::clone(&reader.connections)
        .acquire_owned()
        .await
        .map_err(|e| Fault::Transient(e.to_string()))?;
    let get = GetOptions {
        range: Some(GetRange::Bounded(range)),
        if_match: first.and_then(|m| m.e_tag.clone()),
        if_unmodified_since: first
            .filter(|m| m.e_tag.is_none() && has_date(m))
            .map(|m| m.last_modified),
        ..Default::default()
    };
    let timeout = reader.options.read_timeout;
    let response = tokio::time::timeout(timeout, reader.store.get_opts(path, get))
        .await
        .map_err(|_| Fault::Transient(format!("no response in {timeout:?}")))?
        .map_err(classify)?;
    if let Some(first) = first {
        let now = &response.meta;
        // The date is the validator only without an ETag (a HEAD and a GET may give it at
        // different precisions).
        let same = now.size == first.size
            && match &first.e_tag {
                Some(tag) => now.e_tag.as_ref() == Some(tag),
                None => !has_date(first) || now.last_modified == first.last_modified,
            };
        if !same {
            return Err(Fault::Changed(format!(
                "the object changed since its first block (size {} then {}, ETag {:?} then \
                 {:?}, Last-Modified {} then {})",
                first.size,
                now.size,
                first.e_tag,
                now.e_tag,
                first.last_modified,
                now.last_modified
            )));
        }
    }
    Ok((permit, response))
}

/// Whether the server sent a Last-Modified date (object_store puts the epoch when not).
fn has_date(meta: &ObjectMeta) -> bool {
    meta.last_modified.timestamp() != 0
}

struct Object {
    reader: Reader,
    path: StorePath,
    /// The object as its first response (or HEAD) described it.
    first: ObjectMeta,
    shown: Location,
}

/// Why a request failed, and whether trying again can help.
enum Fault {
    Transient(String),
    Permanent(object_store::Error),
    /// The object changed since its first response, or cannot be shown not to have.
    Changed(String),
}

impl Object {
    /// The bytes of `range`, as the body chunks they arrived in, reading `opened` first if
    /// the block's GET was already sent; retried and resumed.
    async fn fetch(&self, range: Range<u64>, opened: Option<Body>) -> std::io::Result<Vec<Bytes>> {
        let options = &self.reader.options;
        let mut parts = Vec::new();
        let mut at = range.start;
        let mut failures = 0;
        let mut opened = opened;
        loop {
            let before = at;
            let read = match opened.take() {
                Some(body) => self.drain(body, range.end, &mut parts, &mut at).await,
                None => self.get(at..range.end, &mut parts, &mut at).await,
            };
            let fault = match read {
                Ok(()) if at >= range.end => return Ok(parts),
                Ok(()) => Fault::Transient(format!(
                    "the body ended at byte {at} of {}..{}",
                    range.start, range.end
                )),
                Err(fault) => fault,
            };
            if at > before {
                // Bytes arrived: a long body on a flaky link is not cut off after so many
                // partial reads, only after so many tries in a row that bring nothing.
                failures = 0;
            }
            let delay = retry_or_fail(options, &mut failures, fault, &self.shown)
                .map_err(|e| std::io::Error::other(format!("{e} (at byte {at})")))?;
            tokio::time::sleep(delay).await;
        }
    }

    /// One ranged GET of `range`, appending what arrives to `parts` and advancing `at`.
    async fn get(
        &self,
        range: Range<u64>,
        parts: &mut Vec<Bytes>,
        at: &mut u64,
    ) -> Result<(), Fault> {
        if self.first.e_tag.is_none() && !has_date(&self.first) {
            return Err(Fault::Changed(
                "the object changed or cannot be validated: the server sent neither ETag nor \
                 Last-Modified, so a resumed body or a later block could come from another \
                 version of it"
                    .to_string(),
            ));
        }
        let (permit, response) =
            request(&self.reader, &self.path, range.clone(), Some(&self.first)).await?;
        self.drain((permit, response.into_stream()), range.end, parts, at)
            .await
    }

    /// Reads `body` up to byte `end`, appending what arrives to `parts` and advancing `at`.
    async fn drain(
        &self,
        body: Body,
        end: u64,
        parts: &mut Vec<Bytes>,
        at: &mut u64,
    ) -> Result<(), Fault> {
        let (_permit, mut body) = body;
        let timeout = self.reader.options.read_timeout;
        loop {
            let chunk = tokio::time::timeout(timeout, body.next())
                .await
                .map_err(|_| Fault::Transient(format!("no byte in {timeout:?}")))?;
            match chunk {
                None => return Ok(()),
                Some(Err(e)) => return Err(classify(e)),
                Some(Ok(mut chunk)) => {
                    // Never more than was asked for, whatever the server sends.
                    chunk.truncate((end - *at) as usize);
                    *at += chunk.len() as u64;
                    if !chunk.is_empty() {
                        parts.push(chunk);
                    }
                    if *at >= end {
                        return Ok(());
                    }
                }
            }
        }
    }
}

/// The delay before the next try after `fault`, or the error to give up with.
fn retry_or_fail(
    options: &ReadOptions,
    failures: &mut u32,
    fault: Fault,
    shown: &Location,
) -> anyhow::Result<Duration> {
    match fault {
        Fault::Permanent(e) => Err(anyhow::anyhow!("reading {shown}: {e}")),
        Fault::Changed(message) => Err(anyhow::anyhow!("reading {shown}: {message}")),
        Fault::Transient(message) => {
            *failures += 1;
            if *failures > options.retries {
                return Err(anyhow::anyhow!(
                    "reading {shown}: gave up after {} retries: {message}",
                    options.retries
                ));
            }
            Ok(backoff(options, *failures))
        }
    }
}

/// Not found, forbidden, bad credentials, a changed object, any other 4xx answer but 408
/// (timeout) and 429 (throttling), and a request that could not be built (a bad URL, plain
/// http refused, a configuration error) are permanent; 5xx answers, 408, 429, broken
/// connections and timeouts may pass.
fn classify(e: object_store::Error) -> Fault {
    use object_store::Error as E;
    match e {
        E::NotFound { .. }
        | E::PermissionDenied { .. }
        | E::Unauthenticated { .. }
        | E::Precondition { .. }
        | E::InvalidPath { .. }
        | E::NotSupported { .. }
        | E::NotImplemented { .. }
        | E::UnknownConfigurationKey { .. } => Fault::Permanent(e),
        other if is_permanent(&other) => Fault::Permanent(other),
        other => Fault::Transient(other.to_string()),
    }
}

/// Whether `e`'s chain of sources holds a permanent HTTP status or a request that could
/// not be built.
fn is_permanent(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(e);
    while let Some(e) = current {
        if let Some(status) = status_of(e) {
            return (400..500).contains(&status) && status != 408 && status != 429;
        }
        if let Some(e) = e.downcast_ref::<reqwest::Error>()
            && e.is_builder()
        {
            return true;
        }
        current = e.source();
    }
    false
}

/// The HTTP status somewhere in `e`'s chain of sources.
fn status_of_chain(e: &(dyn std::error::Error + 'static)) -> Option<u16> {
    let mut current = Some(e);
    while let Some(e) = current {
        if let Some(status) = status_of(e) {
            return Some(status);
        }
        current = e.source();
    }
    None
}

/// The HTTP status a store's request failed with, when `e` is that failure.
///
/// object_store 0.14 keeps its `RetryError` (which has `status()`) private, so the status
/// is read from its message, "... Server returned non-2xx status code: 400 Bad Request: ...".
fn status_of(e: &(dyn std::error::Error + 'static)) -> Option<u16> {
    const MARK: &str = "non-2xx status code: ";
    let text = e.to_string();
    let at = text.find(MARK)? + MARK.len();
    text.get(at..at + 3)?.parse().ok()
}

/// The delay before retry `n` (1-based): exponential, capped, with full jitter in its
/// upper half so parallel readers do not retry in lockstep.
fn backoff(options: &ReadOptions, n: u32) -> Duration {
    let exp = options
        .backoff
        .saturating_mul(1u32 << (n - 1).min(16))
        .min(options.max_backoff);
    exp / 2 + exp.mul_f64(rand::random::<f64>() / 2.0)
}

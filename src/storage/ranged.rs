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
//! fails with a transient fault or a 416 (an empty object has no byte to range over; a
//! server may be throttling), the size and ETag come from a HEAD instead and every block is
//! fetched as below; a first GET that fails with a permanent fault is the error, with no HEAD.
//!
//! Later blocks and resumed bodies never come from another version of the object: they are
//! conditional on the first response's ETag (`If-Match`) or, from a server that sends none,
//! on its `Last-Modified` date (`If-Unmodified-Since`), and each response must show the same
//! size and the same ETag (or, without one, date). From a server that sends neither, nothing
//! can be checked: an object is read only as far as its first response goes unbroken, then
//! fails ("changed or cannot be validated") rather than mix versions.
//!
//! This is the one retry policy of the stores streamload reads (see [`ReadOptions`]): a
//! transient fault (5xx, 408, 429, a reset or dropped connection, a body that stops or stalls
//! past [`ReadOptions::read_timeout`]) is retried with exponential backoff and jitter until
//! [`ReadOptions::retry_deadline`] has passed since the first fault in a row; the retry asks
//! only for the bytes not yet received, so nothing is lost or read twice. A permanent fault
//! fails at once, naming the URL and never a credential: not found, forbidden, bad or missing
//! credentials, any other 4xx, a request that cannot be built, the object changed since its
//! first block, and a connection that cannot be made on an object's first request (refused,
//! an unknown host, a failed TLS handshake: a wrong URL or endpoint, which waiting does not
//! mend; once the object has answered, a failed connection is transient).

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use object_store::path::Path as StorePath;
use object_store::{GetOptions, GetRange, GetResult, ObjectMeta, ObjectStore, ObjectStoreExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::Blocks;
use super::Location;
use crate::runtime::{self, Task};

/// How objects are read from a store (see [`register_with`](super::register_with)), and
/// how their faults are retried.
///
/// # Retries
///
/// This is streamload's one retry policy for object stores. Stores built from URLs and the
/// environment have `object_store`'s own retries turned off (`RetryConfig::max_retries` 0), so
/// nothing retries underneath it; turn them off in a store you [`register`](super::register)
/// too, or both layers retry, one inside the other.
///
/// - A *transient* fault (a 5xx answer, 408, 429, a reset or dropped connection, no response
///   or no byte for [`read_timeout`](ReadOptions::read_timeout)) is retried after a delay
///   that starts at the first [`backoff`](ReadOptions::backoff) (100 ms) and doubles up to
///   its maximum (10 s), with random jitter, until
///   [`retry_deadline`](ReadOptions::retry_deadline) (5 minutes) has passed since the first
///   fault in a row: throttling storms of minutes are ridden out. The deadline counts per
///   request (the HEAD or GET that opens an object, each block's GET); a try that brought
///   bytes ends the row, and the retry resumes the body where it stopped. Past the deadline
///   the error says how long it retried, how many tries, and the last fault (its HTTP status).
/// - A *permanent* fault fails at once: 4xx answers but 408 and 429 (not found, forbidden,
///   bad credentials, a range past the end), missing credentials, a request that cannot be
///   built, a changed object, and a connection that cannot be made on an object's first
///   request (refused, an unknown host, a failed TLS handshake); after the object has
///   answered once, a failed connection is transient.
///
/// ```
/// use std::time::{Duration, Instant};
/// use streamload::storage::ReadOptions;
///
/// let options = ReadOptions::default()
///     .block_size(16 << 20)
///     .read_ahead(2)
///     .max_connections(32)
///     .backoff(Duration::from_millis(50), Duration::from_secs(5))
///     .retry_deadline(Duration::from_secs(600))
///     .read_timeout(Duration::from_secs(10));
/// assert_eq!(options.get_block_size(), 16 << 20);
/// assert_eq!(options.get_retry_deadline(), Duration::from_secs(600));
/// assert_eq!(ReadOptions::default().get_retry_deadline(), Duration::from_secs(300));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOptions {
    block_size: u64,
    read_ahead: usize,
    max_connections: usize,
    backoff: Duration,
    max_backoff: Duration,
    retry_deadline: Duration,
    read_timeout: Duration,
}

impl Default for ReadOptions {
    /// 8 MiB blocks, 4 read ahead per object, 64 requests per store, transient faults retried
    /// from 100 ms backoff up to 10 s for up to 5 minutes, 30 s without a byte is a stall.
    fn default() -> Self {
        ReadOptions {
            block_size: 8 << 20,
            read_ahead: 4,
            max_connections: 64,
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(10),
            retry_deadline: Duration::from_secs(5 * 60),
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

    /// How long transient faults of one request (an object's HEAD or first GET, a block's
    /// GET and its resumes) are retried, from the first fault in a row, before its error is
    /// returned (default 5 minutes; zero: no retry). A try that brought some bytes before it
    /// broke ends the row. See [Retries](ReadOptions#retries).
    pub fn retry_deadline(mut self, deadline: Duration) -> Self {
        self.retry_deadline = deadline;
        self
    }

    /// The first retry's delay, doubled per retry up to `max` (each with random jitter in its
    /// upper half, so readers do not retry in lockstep).
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

    /// The retry deadline (see [`retry_deadline`](ReadOptions::retry_deadline)).
    pub fn get_retry_deadline(&self) -> Duration {
        self.retry_deadline
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

/// The object at `path` from byte `start` on, as a stream of blocks, and what the object
/// was when opened; `shown` names it in the errors of its reads (the caller names it in an
/// error opening it).
///
/// From an offset, the first GET asks for one byte more, the one before `start`, and drops
/// it: so the first range is never past the end of an object that was read to its end (a
/// reader restored there), and needs no HEAD to find that out.
pub(crate) async fn open(
    reader: Reader,
    path: StorePath,
    shown: Location,
    start: u64,
) -> anyhow::Result<(Blocks, super::Identity)> {
    let block = reader.options.block_size;
    let lead = u64::from(start > 0);
    let first_range = (start - lead)..start.saturating_add(block);
    let (meta, first) = match request(&reader, &path, first_range.clone(), None).await {
        Ok((permit, response)) => {
            let meta = response.meta.clone();
            (meta, Some((permit, response.into_stream())))
        }
        // An empty object has no byte to range over: its size comes from a HEAD.
        Err(fault) => (head_after(&reader, &path, fault).await?, None),
    };
    let size = meta.size;
    // A body for a range past the end (a server that ignored the range) is not used.
    let first = first.filter(|_| first_range.start < size);
    let identity = identity(&meta);
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
    let first_block = first_range.start..first_range.end.min(size);
    let mut first = first.map(|opened| Fetch::spawn(&object, first_block, Some(opened)));
    let blocks = stream::iter((start..size).step_by(block as usize))
        .map(move |at| {
            let range = at..(at + block).min(size);
            match first.take() {
                Some(fetch) => fetch.join(lead),
                None => Fetch::spawn(&object, range, None).join(0),
            }
        })
        .buffered(read_ahead)
        .map_ok(|parts| stream::iter(parts.into_iter().map(Ok)))
        .try_flatten();
    Ok((blocks.boxed(), identity))
}

/// An object's size and version (a hash of its ETag, or without one its Last-Modified date).
pub(crate) fn identity(meta: &ObjectMeta) -> super::Identity {
    let version = match &meta.e_tag {
        Some(tag) => crate::hash::mix64(tag.bytes().fold(0xCBF2_9CE4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3)
        })),
        None => meta
            .last_modified
            .timestamp_nanos_opt()
            .map_or(0, |n| n as u64),
    };
    super::Identity {
        size: meta.size,
        version,
    }
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
    // As in `open`: a first GET that fails with a transient fault or a 416 (a range past
    // the end, for some stores) is followed by a HEAD, for the size.
    let (meta, opened) = match request(&reader, &path, range.clone(), None).await {
        Ok((permit, response)) => {
            let meta = response.meta.clone();
            (meta, Some((permit, response.into_stream())))
        }
        Err(fault) => {
            let meta = head_after(&reader, &path, fault).await;
            (
                meta.with_context(|| format!("reading {shown} at {range:?}"))?,
                None,
            )
        }
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
    let parts = object
        .fetch(range.start..end, opened)
        .await
        .map_err(|e| anyhow::anyhow!("reading {} at {range:?}: {e}", object.shown))?;
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

    /// The block's bytes, as the body chunks they arrived in, without the first `skip`.
    async fn join(self, skip: u64) -> std::io::Result<Vec<Bytes>> {
        let mut parts = match self.0?.await {
            Ok(parts) => parts?,
            Err(e) => return Err(std::io::Error::other(runtime::join_error(STAGE, e))),
        };
        let mut skip = skip;
        while skip > 0 && !parts.is_empty() {
            let n = (parts[0].len() as u64).min(skip);
            bytes::Buf::advance(&mut parts[0], n as usize);
            skip -= n;
            if parts[0].is_empty() {
                parts.remove(0);
            }
        }
        Ok(parts)
    }
}

/// The object's size and version from a HEAD, retried on transient faults within the
/// deadline that begins with the first of them.
pub(crate) async fn head(reader: &Reader, path: &StorePath) -> anyhow::Result<super::Identity> {
    let mut retrying = Retrying::default();
    loop {
        let head = {
            let _permit = reader.connections.acquire().await?;
            reader.store.head(path).await
        };
        let delay = match head {
            Ok(meta) => return Ok(identity(&meta)),
            Err(e) => match classify(e, false) {
                Fault::Transient(message) => retrying.fault(&reader.options, message),
                Fault::Permanent(message) | Fault::Changed(message) => {
                    Err(anyhow::anyhow!(message))
                }
            },
        };
        tokio::time::sleep(delay?).await;
    }
}

/// Stores `bytes` as the whole object at `path` by one PUT (an object is stored whole or not
/// at all), retried on transient faults within the deadline that begins with the first of
/// them (a PUT of a whole object can be repeated).
pub(crate) async fn put(reader: &Reader, path: &StorePath, bytes: Bytes) -> anyhow::Result<()> {
    let mut retrying = Retrying::default();
    loop {
        let put = {
            let _permit = reader.connections.acquire().await?;
            reader
                .store
                .put(path, object_store::PutPayload::from(bytes.clone()))
                .await
        };
        let delay = match put {
            Ok(_) => return Ok(()),
            Err(e) => match classify(e, false) {
                Fault::Transient(message) => retrying.fault(&reader.options, message),
                Fault::Permanent(message) | Fault::Changed(message) => {
                    Err(anyhow::anyhow!(message))
                }
            },
        };
        tokio::time::sleep(delay?).await;
    }
}

/// After the object's first GET failed with `fault`: the error, when the fault is permanent
/// (but a 416, a range over an empty object); otherwise the object's size and ETag from a
/// HEAD, retried on transient faults within the deadline that began with the GET's fault.
async fn head_after(reader: &Reader, path: &StorePath, fault: Fault) -> anyhow::Result<ObjectMeta> {
    let mut retrying = Retrying::default();
    let get = match fault {
        Fault::Permanent(e) if status_of(&e) != Some(416) => {
            return Err(anyhow::anyhow!(e));
        }
        Fault::Changed(message) => return Err(anyhow::anyhow!(message)),
        Fault::Permanent(message) => message,
        Fault::Transient(message) => {
            // The GET's fault starts the deadline; the HEAD is its retry, after the backoff.
            tokio::time::sleep(retrying.fault(&reader.options, message.clone())?).await;
            message
        }
    };
    let failed = |e: anyhow::Error| e.context(format!("the GET failed ({get}), then the HEAD"));
    loop {
        let head = {
            let _permit = reader
                .connections
                .acquire()
                .await
                .map_err(|e| failed(e.into()))?;
            reader.store.head(path).await
        };
        let delay = match head {
            Ok(meta) => return Ok(meta),
            // The object answered the GET: a failed connection now is transient.
            Err(e) => match classify(e, true) {
                Fault::Transient(message) => retrying.fault(&reader.options, message),
                Fault::Permanent(message) | Fault::Changed(message) => {
                    Err(anyhow::anyhow!(message))
                }
            },
        };
        tokio::time::sleep(delay.map_err(failed)?).await;
    }
}

/// The object's size and version (see [`super::Identity`]) from a HEAD, retried on transient
/// faults until the retry deadline; `shown` names it in the error.
// Only the Parquet reader (feature `parquet`) asks for a size before reading.
#[cfg_attr(not(feature = "parquet"), allow(dead_code))]
pub(crate) async fn stat(
    reader: Reader,
    path: StorePath,
    shown: Location,
) -> anyhow::Result<super::Identity> {
    let mut retrying = Retrying::default();
    loop {
        let head = {
            let _permit = reader.connections.acquire().await?;
            reader.store.head(&path).await
        };
        // As a first request: a connection that cannot be made is permanent.
        let delay = match head {
            Ok(meta) => return Ok(identity(&meta)),
            Err(e) => match classify(e, false) {
                Fault::Transient(message) => retrying.fault(&reader.options, message),
                Fault::Permanent(message) | Fault::Changed(message) => {
                    Err(anyhow::anyhow!(message))
                }
            },
        };
        let delay = delay.with_context(|| format!("reading the size of {shown}"))?;
        tokio::time::sleep(delay).await;
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
/// the same ETag (or without one, the same date). Without `first` (the object has not
/// answered yet), a connection that cannot be made is a permanent fault.
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
        // A range to the end (`..u64::MAX`, a whole object) is asked as one: some servers
        // refuse a last byte past 2^63.
        range: Some(if range.end == u64::MAX {
            GetRange::Offset(range.start)
        } else {
            GetRange::Bounded(range)
        }),
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
        .map_err(|e| classify(e, first.is_some()))?;
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

/// Why a request failed, and whether trying again can help; each with the failure's
/// message (every cause of its chain once, see [`describe`](super::describe)).
pub(crate) enum Fault {
    Transient(String),
    Permanent(String),
    /// The object changed since its first response, or cannot be shown not to have.
    Changed(String),
}

impl Object {
    /// The bytes of `range`, as the body chunks they arrived in, reading `opened` first if
    /// the block's GET was already sent; retried and resumed. Errors say what failed and at
    /// which byte, not the object (the reader above names it).
    async fn fetch(&self, range: Range<u64>, opened: Option<Body>) -> std::io::Result<Vec<Bytes>> {
        let options = &self.reader.options;
        let mut parts = Vec::new();
        let mut at = range.start;
        let mut retrying = Retrying::default();
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
                // Bytes arrived: a long body on a flaky link is not cut off after so long in
                // partial reads, only after the deadline of tries in a row that bring nothing.
                retrying = Retrying::default();
            }
            let delay = match fault {
                Fault::Transient(message) => retrying.fault(options, message),
                Fault::Permanent(message) | Fault::Changed(message) => {
                    Err(anyhow::anyhow!(message))
                }
            };
            let delay =
                delay.map_err(|e| std::io::Error::other(format!("{e:#} (at byte {at})")))?;
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
                Some(Err(e)) => return Err(classify(e, true)),
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

/// The transient faults of one request in a row: when the first came, how many, and the
/// last one's message.
#[derive(Default)]
pub(crate) struct Retrying {
    since: Option<Instant>,
    faults: u32,
}

impl Retrying {
    /// After the transient fault `message`: the delay before the next try, or (past the
    /// deadline) the error to give up with, saying how long and how often it was tried (the
    /// caller names the object).
    pub(crate) fn fault(
        &mut self,
        options: &ReadOptions,
        message: String,
    ) -> anyhow::Result<Duration> {
        let since = *self.since.get_or_insert_with(Instant::now);
        self.faults += 1;
        let elapsed = since.elapsed();
        if elapsed >= options.retry_deadline {
            let status = match status_of(&message) {
                Some(status) => format!("the last with HTTP status {status}"),
                None => "the last".to_string(),
            };
            return Err(anyhow::anyhow!(
                "gave up after {} of transient faults ({} tries, retry \
                 deadline {:?}); {status}: {message}",
                Seconds(elapsed),
                self.faults,
                options.retry_deadline,
            ));
        }
        // The last try comes at the deadline, not a backoff past it.
        Ok(backoff(options, self.faults).min(options.retry_deadline - elapsed))
    }
}

/// A duration shown in seconds, to a tenth (`12.3 s`).
struct Seconds(Duration);

impl std::fmt::Display for Seconds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.1} s", self.0.as_secs_f64())
    }
}

/// Why `e` failed and whether trying again can help; `reached`: whether the object has
/// answered a request before (then a connection that cannot be made is transient: the
/// network or the server failed mid-read; before, it is a wrong URL or endpoint).
///
/// Permanent: not found, forbidden, bad or missing credentials, a changed object, any other
/// 4xx answer but 408 (timeout) and 429 (throttling), a request that could not be built (a
/// bad URL, plain http refused, a configuration error), and before `reached`, a connection
/// refused, an unknown host or a failed TLS handshake. Transient: 5xx answers, 408, 429,
/// broken connections and timeouts.
pub(crate) fn classify(e: object_store::Error, reached: bool) -> Fault {
    use object_store::Error as E;
    let permanent = matches!(
        e,
        E::NotFound { .. }
            | E::PermissionDenied { .. }
            | E::Unauthenticated { .. }
            | E::Precondition { .. }
            | E::InvalidPath { .. }
            | E::NotSupported { .. }
            | E::NotImplemented { .. }
            | E::UnknownConfigurationKey { .. }
    );
    if permanent || is_permanent(&e) {
        return Fault::Permanent(super::describe(&e));
    }
    if !reached && cannot_connect(&e) {
        return Fault::Permanent(format!(
            "cannot connect (not retried: on the first request, a refused connection, an \
             unknown host or a failed TLS handshake means a wrong URL or endpoint): {}",
            super::describe(&e)
        ));
    }
    Fault::Transient(super::describe(&e))
}

/// The sources of `e`, from `e` itself.
fn chain<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(e), |e| e.source())
}

/// Whether `e`'s chain of sources holds a permanent HTTP status, a request that could not
/// be built, or missing credentials.
fn is_permanent(e: &(dyn std::error::Error + 'static)) -> bool {
    for e in chain(e) {
        if let Some(status) = status_of(&e.to_string()) {
            return (400..500).contains(&status) && status != 408 && status != 429;
        }
        if e.downcast_ref::<reqwest::Error>()
            .is_some_and(reqwest::Error::is_builder)
            || e.is::<super::remote::MissingCredentials>()
        {
            return true;
        }
    }
    false
}

/// Whether `e` is a connection that could not be made: refused, an unknown host (DNS), a
/// failed TLS handshake (object_store's `HttpErrorKind::Connect`, reqwest's `is_connect`), but
/// not a connect timeout (transient).
fn cannot_connect(e: &(dyn std::error::Error + 'static)) -> bool {
    use object_store::client::{HttpError, HttpErrorKind};
    chain(e).any(|e| {
        e.downcast_ref::<HttpError>()
            .is_some_and(|e| e.kind() == HttpErrorKind::Connect)
            || e.downcast_ref::<reqwest::Error>()
                .is_some_and(|e| e.is_connect() && !e.is_timeout())
    })
}

/// The HTTP status in a store's error message.
///
/// object_store 0.14 keeps its `RetryError` (which has `status()`) private, so the status
/// is read from its message, "... Server returned non-2xx status code: 400 Bad Request: ...".
fn status_of(message: &str) -> Option<u16> {
    const MARK: &str = "non-2xx status code: ";
    let at = message.find(MARK)? + MARK.len();
    message.get(at..at + 3)?.parse().ok()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An error as object_store's HTTP client gives a failed connection.
    fn refused() -> object_store::Error {
        use object_store::client::{HttpError, HttpErrorKind};
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        object_store::Error::Generic {
            store: "test",
            source: Box::new(HttpError::new(HttpErrorKind::Connect, io)),
        }
    }

    #[test]
    fn a_failed_connection_is_permanent_only_before_the_object_answered() {
        assert!(matches!(classify(refused(), false), Fault::Permanent(_)));
        assert!(matches!(classify(refused(), true), Fault::Transient(_)));
    }

    #[test]
    fn past_the_deadline_the_error_says_how_long_how_often_and_the_last_status() {
        let options = ReadOptions::default()
            .backoff(Duration::from_millis(1), Duration::from_millis(4))
            .retry_deadline(Duration::from_millis(30));
        let mut retrying = Retrying::default();
        let status = "Server returned non-2xx status code: 503 Service Unavailable: ";
        let err = loop {
            match retrying.fault(&options, status.to_string()) {
                Ok(delay) => {
                    assert!(delay <= Duration::from_millis(4));
                    std::thread::sleep(delay);
                }
                Err(e) => break e.to_string(),
            }
        };
        assert!(retrying.faults > 1, "{err}");
        assert!(err.starts_with("gave up after 0."), "{err}");
        assert!(err.contains("HTTP status 503") && err.contains("retry deadline 30ms"));
        // No deadline: no retry.
        let none = ReadOptions::default().retry_deadline(Duration::ZERO);
        assert!(Retrying::default().fault(&none, String::new()).is_err());
    }
}

//! Real S3 servers on 127.0.0.1 (s3s, SigV4 checked): over a folder (s3s-fs), or over a map
//! of objects in memory ([`MemoryS3`], bodies served without copies) for benchmarks; and a
//! TCP proxy in front of either that injects the faults and latency of real object storage:
//! a delay before each response's first byte, 503 answers, connections cut in the middle of
//! a body. Shared by the storage tests, the `s3_stream` example and the W8 workload.

#![allow(dead_code, unreachable_pub)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use futures::TryStreamExt;
use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;
use s3s::dto::*;
use s3s::{S3, S3Request, S3Response, S3Result, s3_error};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Starts an S3 server over `root` (one folder per bucket) with one key pair.
pub async fn s3_server(root: &std::path::Path, key: &str, secret: &str) -> SocketAddr {
    let fs = s3s_fs::FileSystem::new(root).expect("s3s-fs over the folder");
    serve(fs, key, secret).await
}

/// Starts an S3 server over `objects` (see [`MemoryS3`]) with one key pair.
pub async fn memory_s3_server(objects: MemoryS3, key: &str, secret: &str) -> SocketAddr {
    serve(objects, key, secret).await
}

async fn serve(backend: impl S3, key: &str, secret: &str) -> SocketAddr {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::server::conn::auto::Builder;

    let mut builder = s3s::service::S3ServiceBuilder::new(backend);
    builder.set_auth(s3s::auth::SimpleAuth::from_single(key, secret));
    let service = builder.build();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                continue;
            };
            let _ = socket.set_nodelay(true);
            let service = service.clone();
            tokio::spawn(async move {
                let _ = Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(socket), service)
                    .await;
            });
        }
    });
    addr
}

/// One stored object.
#[derive(Debug, Clone)]
struct Stored {
    data: Bytes,
    e_tag: String,
    modified: SystemTime,
}

/// An S3 backend over objects in memory: buckets, `PutObject`, `GetObject` (with `Range`,
/// `If-Match` and `If-None-Match`), `HeadObject`, `ListObjectsV2` (prefix, delimiter,
/// pagination) and `DeleteObject`. A body is the stored `Bytes` itself, never copied on
/// the server's side. Clones share the objects and the request counters.
#[derive(Debug, Clone, Default)]
pub struct MemoryS3 {
    objects: Arc<RwLock<BTreeMap<(String, String), Stored>>>,
    buckets: Arc<RwLock<BTreeSet<String>>>,
    /// `GetObject` requests served (a body or an error).
    pub gets: Arc<AtomicUsize>,
    /// `HeadObject` requests served.
    pub heads: Arc<AtomicUsize>,
}

impl MemoryS3 {
    /// Stores `data` as `bucket/key` (creating the bucket), as a `PutObject` would.
    pub fn insert(&self, bucket: &str, key: &str, data: Bytes) {
        // The ETag is opaque to clients; a CRC-32C of the content (quick) is enough to
        // change whenever the content does.
        let e_tag = format!("{:08x}{:016x}", crc32c::crc32c(&data), data.len());
        let stored = Stored {
            data,
            e_tag,
            modified: SystemTime::now(),
        };
        self.buckets
            .write()
            .expect("buckets")
            .insert(bucket.to_string());
        self.objects
            .write()
            .expect("objects")
            .insert((bucket.to_string(), key.to_string()), stored);
    }

    fn get(&self, bucket: &str, key: &str) -> S3Result<Stored> {
        let objects = self.objects.read().expect("objects");
        match objects.get(&(bucket.to_string(), key.to_string())) {
            Some(stored) => Ok(stored.clone()),
            None if self.buckets.read().expect("buckets").contains(bucket) => {
                Err(s3_error!(NoSuchKey))
            }
            None => Err(s3_error!(NoSuchBucket)),
        }
    }
}

fn matches(condition: &ETagCondition, e_tag: &str) -> bool {
    match condition {
        ETagCondition::Any => true,
        ETagCondition::ETag(tag) => tag.value() == e_tag,
    }
}

#[async_trait::async_trait]
impl S3 for MemoryS3 {
    async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        let input = req.input;
        let stored = self.get(&input.bucket, &input.key)?;
        if let Some(condition) = &input.if_match
            && !matches(condition, &stored.e_tag)
        {
            return Err(s3_error!(PreconditionFailed, "ETag does not match"));
        }
        if let Some(condition) = &input.if_none_match
            && matches(condition, &stored.e_tag)
        {
            return Err(s3_error!(NotModified));
        }
        let size = stored.data.len() as u64;
        let (body, content_range) = match input.range {
            None => (stored.data, None),
            Some(range) => {
                let r = range.check(size)?;
                let content_range = format!("bytes {}-{}/{size}", r.start, r.end - 1);
                let body = stored.data.slice(r.start as usize..r.end as usize);
                (body, Some(content_range))
            }
        };
        let output = GetObjectOutput {
            content_length: Some(body.len() as i64),
            body: Some(StreamingBlob::from(s3s::Body::from(body))),
            content_range,
            accept_ranges: Some("bytes".to_string()),
            e_tag: Some(ETag::Strong(stored.e_tag)),
            last_modified: Some(Timestamp::from(stored.modified)),
            ..Default::default()
        };
        Ok(S3Response::new(output))
    }

    async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        self.heads.fetch_add(1, Ordering::SeqCst);
        let input = req.input;
        let stored = self.get(&input.bucket, &input.key)?;
        let output = HeadObjectOutput {
            content_length: Some(stored.data.len() as i64),
            accept_ranges: Some("bytes".to_string()),
            e_tag: Some(ETag::Strong(stored.e_tag)),
            last_modified: Some(Timestamp::from(stored.modified)),
            ..Default::default()
        };
        Ok(S3Response::new(output))
    }

    async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        if self
            .buckets
            .read()
            .expect("buckets")
            .contains(&req.input.bucket)
        {
            Ok(S3Response::new(HeadBucketOutput::default()))
        } else {
            Err(s3_error!(NoSuchBucket))
        }
    }

    async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        let input = req.input;
        let Some(body) = input.body else {
            return Err(s3_error!(IncompleteBody));
        };
        let data: BytesMut = body
            .try_fold(BytesMut::new(), |mut all, chunk| async move {
                all.extend_from_slice(&chunk);
                Ok(all)
            })
            .await
            .map_err(|e| s3_error!(IncompleteBody, "{e}"))?;
        let size = data.len() as i64;
        self.insert(&input.bucket, &input.key, data.freeze());
        let stored = self.get(&input.bucket, &input.key)?;
        Ok(S3Response::new(PutObjectOutput {
            e_tag: Some(ETag::Strong(stored.e_tag)),
            size: Some(size),
            ..Default::default()
        }))
    }

    async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        let input = req.input;
        self.objects
            .write()
            .expect("objects")
            .remove(&(input.bucket, input.key));
        Ok(S3Response::new(DeleteObjectOutput::default()))
    }

    async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        let input = req.input;
        if !self
            .buckets
            .read()
            .expect("buckets")
            .contains(&input.bucket)
        {
            return Err(s3_error!(NoSuchBucket));
        }
        let prefix = input.prefix.clone().unwrap_or_default();
        let after = match (&input.continuation_token, &input.start_after) {
            (Some(token), _) => token.clone(),
            (None, Some(after)) => after.clone(),
            (None, None) => String::new(),
        };
        let max_keys = input.max_keys.unwrap_or(1000).max(0) as usize;
        let mut contents = Vec::new();
        let mut prefixes = BTreeSet::new();
        let mut last = None;
        let mut truncated = false;
        let objects = self.objects.read().expect("objects");
        for ((bucket, key), stored) in objects.iter() {
            if *bucket != input.bucket || !key.starts_with(&prefix) || *key <= after {
                continue;
            }
            // With a delimiter, keys past it below the prefix roll up into one prefix.
            let common = input.delimiter.as_deref().and_then(|d| {
                key[prefix.len()..]
                    .find(d)
                    .map(|i| key[..prefix.len() + i + d.len()].to_string())
            });
            if let Some(common) = &common
                && prefixes.contains(common)
            {
                continue;
            }
            if contents.len() + prefixes.len() == max_keys {
                truncated = true;
                break;
            }
            match common {
                Some(common) => {
                    // The next page starts after every key under this prefix.
                    last = Some(format!("{common}{}", char::MAX));
                    prefixes.insert(common);
                }
                None => {
                    last = Some(key.clone());
                    contents.push(Object {
                        key: Some(key.clone()),
                        size: Some(stored.data.len() as i64),
                        e_tag: Some(ETag::Strong(stored.e_tag.clone())),
                        last_modified: Some(Timestamp::from(stored.modified)),
                        ..Default::default()
                    });
                }
            }
        }
        let key_count = (contents.len() + prefixes.len()) as i32;
        let output = ListObjectsV2Output {
            name: Some(input.bucket),
            prefix: input.prefix,
            delimiter: input.delimiter,
            max_keys: Some(max_keys as i32),
            key_count: Some(key_count),
            is_truncated: Some(truncated),
            continuation_token: input.continuation_token,
            next_continuation_token: if truncated { last } else { None },
            start_after: input.start_after,
            contents: (!contents.is_empty()).then_some(contents),
            common_prefixes: (!prefixes.is_empty()).then(|| {
                prefixes
                    .into_iter()
                    .map(|p| CommonPrefix { prefix: Some(p) })
                    .collect()
            }),
            ..Default::default()
        };
        Ok(S3Response::new(output))
    }
}

/// An `object_store` S3 client for `bucket` at `addr`, everything explicit (no environment,
/// no instance metadata: nothing leaves 127.0.0.1).
pub fn s3_store(addr: SocketAddr, bucket: &str, key: &str, secret: &str) -> Arc<dyn ObjectStore> {
    s3_store_retrying(addr, bucket, key, secret, 5)
}

/// [`s3_store`] with `max_retries` of object_store's own (0: none, so that streamload's
/// retries and resumes do all the work, as the fault tests need).
pub fn s3_store_retrying(
    addr: SocketAddr,
    bucket: &str,
    key: &str,
    secret: &str,
    max_retries: usize,
) -> Arc<dyn ObjectStore> {
    let retry = object_store::RetryConfig {
        backoff: object_store::BackoffConfig {
            init_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(200),
            base: 2.0,
        },
        max_retries,
        retry_timeout: Duration::from_secs(30),
    };
    Arc::new(
        AmazonS3Builder::new()
            .with_endpoint(format!("http://{addr}"))
            .with_allow_http(true)
            .with_bucket_name(bucket)
            .with_region("us-east-1")
            .with_access_key_id(key)
            .with_secret_access_key(secret)
            .with_virtual_hosted_style_request(false)
            .with_retry(retry)
            .build()
            .expect("S3 store"),
    )
}

/// What the proxy does to the traffic. Counters are budgets: each injected fault uses one.
#[derive(Debug, Default)]
pub struct Faults {
    /// Waited before forwarding the first byte of each response.
    pub first_byte_delay: Duration,
    /// Connections answered `503 Slow Down` (then closed) instead of being forwarded.
    pub slow_downs: AtomicUsize,
    /// Connections closed cleanly (FIN) after `cut_after` bytes of responses.
    pub cuts: AtomicUsize,
    pub cut_after: usize,
    /// Connections reset (RST: `SO_LINGER` 0, no shutdown) after `cut_after` bytes of
    /// responses.
    pub resets: AtomicUsize,
    /// Connections that stop sending (without closing) after `cut_after` bytes of responses.
    pub stalls: AtomicUsize,
    /// Connections accepted.
    pub connections: AtomicUsize,
    /// Cuts, resets and stalls that happened (a connection given one may end before its
    /// limit).
    pub fired: AtomicUsize,
    /// While set (see [`Faults::start_storm`]), every connection is answered `503 Slow Down`.
    pub storming: AtomicBool,
    /// Connections answered 503 during storms.
    pub storm_answers: AtomicUsize,
    /// Cuts every open connection when a storm starts (public only so that `Faults { ..,
    /// ..Default::default() }` can be written).
    pub storm_starts: tokio::sync::Notify,
}

impl Faults {
    /// Starts a throttling storm: every open connection is cut, and every connection made
    /// until [`Faults::end_storm`] is answered `503 Slow Down`, as S3 does under load.
    pub fn start_storm(&self) {
        self.storming.store(true, Ordering::SeqCst);
        self.storm_starts.notify_waiters();
    }

    /// Ends the storm: connections are forwarded again.
    pub fn end_storm(&self) {
        self.storming.store(false, Ordering::SeqCst);
    }

    fn take(budget: &AtomicUsize) -> bool {
        budget
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}

/// Starts a proxy on 127.0.0.1 in front of `upstream`.
pub async fn fault_proxy(upstream: SocketAddr, faults: Arc<Faults>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((client, _)) = listener.accept().await else {
                continue;
            };
            faults.connections.fetch_add(1, Ordering::SeqCst);
            let faults = Arc::clone(&faults);
            tokio::spawn(async move {
                let _ = relay(client, upstream, faults).await;
            });
        }
    });
    addr
}

async fn relay(
    mut client: TcpStream,
    upstream: SocketAddr,
    faults: Arc<Faults>,
) -> std::io::Result<()> {
    client.set_nodelay(true)?;
    // Created first, so a storm starting from here on cuts this connection.
    let storm = faults.storm_starts.notified();
    let storming = faults.storming.load(Ordering::SeqCst);
    if storming {
        faults.storm_answers.fetch_add(1, Ordering::SeqCst);
    }
    if storming || Faults::take(&faults.slow_downs) {
        // Read the request, answer 503 as S3 does when throttling, and close.
        let mut buf = [0u8; 4096];
        let _ = client.read(&mut buf).await?;
        let body = "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>";
        let response = format!(
            "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        client.write_all(response.as_bytes()).await?;
        return client.shutdown().await;
    }
    let cut_after = Faults::take(&faults.cuts).then_some(faults.cut_after);
    let reset_after = Faults::take(&faults.resets).then_some(faults.cut_after);
    let stall_after = Faults::take(&faults.stalls).then_some(faults.cut_after);
    let server = TcpStream::connect(upstream).await?;
    server.set_nodelay(true)?;
    let (mut client_rx, mut client_tx) = client.into_split();
    let (server_rx, mut server_tx) = server.into_split();
    // Set when a request went up and its response has not started yet.
    let awaiting = Arc::new(AtomicBool::new(false));
    let requests = {
        let awaiting = Arc::clone(&awaiting);
        async move {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = client_rx.read(&mut buf).await?;
                if n == 0 {
                    return server_tx.shutdown().await;
                }
                awaiting.store(true, Ordering::SeqCst);
                server_tx.write_all(&buf[..n]).await?;
            }
        }
    };
    let delay = faults.first_byte_delay;
    let fired = &faults.fired;
    let responses = async move {
        let mut mover = Mover::new()?;
        let limit = cut_after.or(reset_after).or(stall_after);
        let mut sent = 0usize;
        loop {
            let max = limit.map_or(mover.capacity(), |l| (l - sent).min(mover.capacity()));
            let n = mover.take(server_rx.as_ref(), max).await?;
            if n == 0 && max > 0 {
                return client_tx.shutdown().await;
            }
            if awaiting.swap(false, Ordering::SeqCst) && !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            mover.give(client_tx.as_ref(), n).await?;
            sent += n;
            if limit.is_some_and(|l| sent >= l) {
                fired.fetch_add(1, Ordering::SeqCst);
                if cut_after.is_some() {
                    // Cut: close both directions mid-response (FIN).
                    return Err(std::io::Error::other("cut"));
                }
                if reset_after.is_some() {
                    // Reset: with a zero linger and no shutdown, closing the socket (when
                    // the read half goes too) sends RST, as a broken network does.
                    client_tx.as_ref().set_zero_linger()?;
                    client_tx.forget();
                    return Err(std::io::Error::other("reset"));
                }
                // Stall: the connection stays open and silent.
                std::future::pending::<()>().await;
            }
        }
    };
    // Either side ending (or a cut, or a storm) ends the connection.
    tokio::select! {
        r = requests => r,
        r = responses => r,
        () = storm => Err(std::io::Error::other("a storm began")),
    }
}

/// Moves response bytes from the server's socket to the client's. On Linux through a pipe
/// with `splice(2)`: the bytes stay in the kernel, so the proxy costs the benchmarks it sits
/// in almost no CPU, as the network between a client and object storage costs the client
/// none. Elsewhere through a buffer.
struct Mover {
    #[cfg(target_os = "linux")]
    pipe: Pipe,
    #[cfg(not(target_os = "linux"))]
    buf: Vec<u8>,
}

impl Mover {
    #[cfg(not(target_os = "linux"))]
    fn new() -> std::io::Result<Self> {
        Ok(Mover {
            buf: vec![0; 256 * 1024],
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// Takes up to `max` bytes `from` the socket (0 at its end), once some have arrived.
    #[cfg(not(target_os = "linux"))]
    async fn take(&mut self, from: &TcpStream, max: usize) -> std::io::Result<usize> {
        loop {
            from.readable().await?;
            match from.try_read(&mut self.buf[..max]) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                read => return read,
            }
        }
    }

    /// Gives the `n` bytes taken `to` the socket.
    #[cfg(not(target_os = "linux"))]
    async fn give(&mut self, to: &TcpStream, n: usize) -> std::io::Result<()> {
        let mut at = 0;
        while at < n {
            to.writable().await?;
            match to.try_write(&self.buf[at..n]) {
                Ok(m) => at += m,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    #[cfg(target_os = "linux")]
    fn new() -> std::io::Result<Self> {
        Ok(Mover { pipe: Pipe::new()? })
    }

    #[cfg(target_os = "linux")]
    fn capacity(&self) -> usize {
        self.pipe.size
    }

    /// Takes up to `max` bytes `from` the socket into the (empty) pipe, 0 at its end.
    #[cfg(target_os = "linux")]
    async fn take(&mut self, from: &TcpStream, max: usize) -> std::io::Result<usize> {
        use std::os::fd::AsRawFd;
        if max == 0 {
            return Ok(0);
        }
        loop {
            from.readable().await?;
            let spliced = from.try_io(tokio::io::Interest::READABLE, || {
                splice(from.as_raw_fd(), self.pipe.write.as_raw_fd(), max)
            });
            match spliced {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                spliced => return spliced,
            }
        }
    }

    /// Gives the `n` bytes in the pipe `to` the socket.
    #[cfg(target_os = "linux")]
    async fn give(&mut self, to: &TcpStream, n: usize) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        let mut left = n;
        while left > 0 {
            to.writable().await?;
            let spliced = to.try_io(tokio::io::Interest::WRITABLE, || {
                splice(self.pipe.read.as_raw_fd(), to.as_raw_fd(), left)
            });
            match spliced {
                Ok(m) => left -= m,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// A non-blocking pipe, as large as the system lets it be (up to 1 MiB).
#[cfg(target_os = "linux")]
struct Pipe {
    read: std::os::fd::OwnedFd,
    write: std::os::fd::OwnedFd,
    size: usize,
}

#[cfg(target_os = "linux")]
impl Pipe {
    fn new() -> std::io::Result<Self> {
        use std::os::fd::FromRawFd;
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two new file descriptors into the array it is given.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both descriptors are open and owned by nothing else.
        let (read, write) = unsafe {
            (
                std::os::fd::OwnedFd::from_raw_fd(fds[0]),
                std::os::fd::OwnedFd::from_raw_fd(fds[1]),
            )
        };
        // SAFETY: fcntl on a descriptor we own; a refused size leaves the default.
        let size = unsafe {
            libc::fcntl(fds[1], libc::F_SETPIPE_SZ, 1 << 20);
            libc::fcntl(fds[1], libc::F_GETPIPE_SZ)
        };
        if size <= 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Pipe {
            read,
            write,
            size: size as usize,
        })
    }
}

/// One non-blocking `splice(2)` of up to `len` bytes from `from` to `to` (one is a pipe).
#[cfg(target_os = "linux")]
fn splice(from: std::os::fd::RawFd, to: std::os::fd::RawFd, len: usize) -> std::io::Result<usize> {
    // SAFETY: splice reads and writes only the two descriptors; null offsets mean "the
    // current position", as sockets and pipes require.
    let n = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// One version of an object served by [`http_server`]: its bytes and the validators it is
/// sent with (`ETag`, `Last-Modified`), either of which may be left out.
#[derive(Debug, Clone)]
pub struct HttpObject {
    pub data: Bytes,
    pub e_tag: Option<String>,
    pub last_modified: Option<SystemTime>,
}

/// The objects of a plain HTTP server (`GET` with `Range`, `HEAD`, `If-Match`,
/// `If-Unmodified-Since`), as object_store's `HttpStore` reads them, and its faults.
#[derive(Debug, Default)]
pub struct HttpFiles {
    objects: RwLock<BTreeMap<String, HttpObject>>,
    /// Versions put in place of an object when one of its bodies is cut.
    after_cut: RwLock<BTreeMap<String, HttpObject>>,
    /// Requests answered (`GET` and `HEAD`, any status).
    pub requests: AtomicUsize,
    /// When not 0, every request is answered with this status and no object.
    pub status: std::sync::atomic::AtomicU16,
    /// `GET` bodies cut (the connection dropped) after `cut_after` bytes: a budget.
    pub cuts: AtomicUsize,
    pub cut_after: usize,
    /// Cuts that happened.
    pub fired: AtomicUsize,
}

impl HttpFiles {
    /// No objects yet; bodies given a cut (see [`HttpFiles::cuts`]) stop after `bytes`.
    pub fn cutting_after(bytes: usize) -> Self {
        HttpFiles {
            cut_after: bytes,
            ..Default::default()
        }
    }

    /// Serves `object` at `path` (`/dir/name.txt`).
    pub fn insert(&self, path: &str, object: HttpObject) {
        self.objects
            .write()
            .expect("objects")
            .insert(path.to_string(), object);
    }

    /// Serves `object` at `path` from the first time a body of `path` is cut.
    pub fn replace_after_cut(&self, path: &str, object: HttpObject) {
        self.after_cut
            .write()
            .expect("objects")
            .insert(path.to_string(), object);
    }

    fn answer(
        &self,
        req: &hyper::Request<hyper::body::Incoming>,
    ) -> hyper::Response<http_body_util::combinators::UnsyncBoxBody<Bytes, std::io::Error>> {
        use futures::StreamExt;
        use http_body_util::BodyExt;
        use hyper::{Method, StatusCode, header};

        let empty = |status: StatusCode| {
            let mut response = hyper::Response::new(
                http_body_util::Empty::new()
                    .map_err(|never| match never {})
                    .boxed_unsync(),
            );
            *response.status_mut() = status;
            response
        };
        self.requests.fetch_add(1, Ordering::SeqCst);
        let status = self.status.load(Ordering::SeqCst);
        if status != 0 {
            return empty(StatusCode::from_u16(status).expect("a status"));
        }
        let Some(object) = self
            .objects
            .read()
            .expect("objects")
            .get(req.uri().path())
            .cloned()
        else {
            return empty(StatusCode::NOT_FOUND);
        };
        let headers = req.headers();
        let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
        if let Some(tag) = text(header::IF_MATCH)
            && tag != "*"
            && object.e_tag.as_deref() != Some(tag.trim_matches('"'))
        {
            return empty(StatusCode::PRECONDITION_FAILED);
        }
        if let Some(since) =
            text(header::IF_UNMODIFIED_SINCE).and_then(|t| httpdate::parse_http_date(t).ok())
            && object
                .last_modified
                .is_some_and(|m| seconds(m) > seconds(since))
        {
            return empty(StatusCode::PRECONDITION_FAILED);
        }
        let size = object.data.len();
        let range = match text(header::RANGE).and_then(|r| r.strip_prefix("bytes=")) {
            None => None,
            Some(spec) => {
                let (a, b) = spec.split_once('-').unwrap_or((spec, ""));
                let range = match (a.parse::<usize>(), b.parse::<usize>()) {
                    (Ok(a), Ok(b)) => a..(b + 1).min(size),
                    (Ok(a), Err(_)) => a..size,
                    (Err(_), Ok(n)) => size.saturating_sub(n)..size,
                    _ => return empty(StatusCode::BAD_REQUEST),
                };
                if range.start >= size {
                    return empty(StatusCode::RANGE_NOT_SATISFIABLE);
                }
                Some(range)
            }
        };
        let body = match &range {
            Some(r) => object.data.slice(r.clone()),
            None => object.data.clone(),
        };
        let mut builder = hyper::Response::builder()
            .header(header::CONTENT_LENGTH, body.len())
            .header(header::ACCEPT_RANGES, "bytes");
        if let Some(tag) = &object.e_tag {
            builder = builder.header(header::ETAG, format!("\"{tag}\""));
        }
        if let Some(modified) = object.last_modified {
            builder = builder.header(header::LAST_MODIFIED, httpdate::fmt_http_date(modified));
        }
        builder = match &range {
            Some(r) => builder.status(StatusCode::PARTIAL_CONTENT).header(
                header::CONTENT_RANGE,
                format!("bytes {}-{}/{size}", r.start, r.end - 1),
            ),
            None => builder.status(StatusCode::OK),
        };
        let cut =
            req.method() == Method::GET && body.len() > self.cut_after && Faults::take(&self.cuts);
        let body = if req.method() == Method::HEAD {
            http_body_util::Empty::new()
                .map_err(|never| match never {})
                .boxed_unsync()
        } else if cut {
            // The first bytes, then an error: hyper drops the connection mid-body.
            self.fired.fetch_add(1, Ordering::SeqCst);
            if let Some(next) = self
                .after_cut
                .write()
                .expect("objects")
                .remove(req.uri().path())
            {
                self.insert(req.uri().path(), next);
            }
            let head = body.slice(..self.cut_after);
            let frames = futures::stream::once(async move { Ok(hyper::body::Frame::data(head)) })
                .chain(futures::stream::once(async {
                    // Once the first bytes are surely on their way.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    Err(std::io::Error::other("cut"))
                }));
            http_body_util::StreamBody::new(frames).boxed_unsync()
        } else {
            http_body_util::Full::new(body)
                .map_err(|never| match never {})
                .boxed_unsync()
        };
        builder.body(body).expect("a response")
    }
}

/// Whole seconds since the epoch (HTTP dates have no finer grain).
fn seconds(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Starts a plain HTTP server on 127.0.0.1 serving `files`.
pub async fn http_server(files: Arc<HttpFiles>) -> SocketAddr {
    use hyper_util::rt::TokioIo;

    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                continue;
            };
            let files = Arc::clone(&files);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let response = files.answer(&req);
                    async move { Ok::<_, std::convert::Infallible>(response) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(socket), service)
                    .await;
            });
        }
    });
    addr
}

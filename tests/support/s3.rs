//! A real S3 server on 127.0.0.1 (s3s + s3s-fs over a folder, SigV4 checked), and a TCP
//! proxy in front of it that injects the faults and latency of real object storage: a delay
//! before each response's first byte, 503 answers, connections cut in the middle of a body.
//! Shared by the storage tests, the `s3_stream` example and the W8 workload.

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Starts an S3 server over `root` (one folder per bucket) with one key pair.
pub async fn s3_server(root: &std::path::Path, key: &str, secret: &str) -> SocketAddr {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::server::conn::auto::Builder;

    let fs = s3s_fs::FileSystem::new(root).expect("s3s-fs over the folder");
    let mut builder = s3s::service::S3ServiceBuilder::new(fs);
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

/// An `object_store` S3 client for `bucket` at `addr`, everything explicit (no environment,
/// no instance metadata: nothing leaves 127.0.0.1).
pub fn s3_store(addr: SocketAddr, bucket: &str, key: &str, secret: &str) -> Arc<dyn ObjectStore> {
    let retry = object_store::RetryConfig {
        backoff: object_store::BackoffConfig {
            init_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(200),
            base: 2.0,
        },
        max_retries: 5,
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
    /// Connections cut after `cut_after` bytes of responses.
    pub cuts: AtomicUsize,
    pub cut_after: usize,
    /// Connections that stop sending (without closing) after `cut_after` bytes of responses.
    pub stalls: AtomicUsize,
    /// Connections accepted.
    pub connections: AtomicUsize,
    /// Cuts and stalls that happened (a connection given one may end before its limit).
    pub fired: AtomicUsize,
}

impl Faults {
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
    if Faults::take(&faults.slow_downs) {
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
    let stall_after = Faults::take(&faults.stalls).then_some(faults.cut_after);
    let server = TcpStream::connect(upstream).await?;
    server.set_nodelay(true)?;
    let (mut client_rx, mut client_tx) = client.into_split();
    let (mut server_rx, mut server_tx) = server.into_split();
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
        let mut buf = vec![0u8; 256 * 1024];
        let mut sent = 0usize;
        loop {
            let n = server_rx.read(&mut buf).await?;
            if n == 0 {
                return client_tx.shutdown().await;
            }
            if awaiting.swap(false, Ordering::SeqCst) && !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let mut n = n;
            if let Some(limit) = cut_after {
                if sent + n >= limit {
                    n = limit - sent;
                    client_tx.write_all(&buf[..n]).await?;
                    fired.fetch_add(1, Ordering::SeqCst);
                    // Cut: drop both directions mid-response.
                    return Err(std::io::Error::other("cut"));
                }
            }
            if let Some(limit) = stall_after {
                if sent + n >= limit {
                    n = limit - sent;
                    client_tx.write_all(&buf[..n]).await?;
                    fired.fetch_add(1, Ordering::SeqCst);
                    // Stall: the connection stays open and silent.
                    std::future::pending::<()>().await;
                }
            }
            client_tx.write_all(&buf[..n]).await?;
            sent += n;
        }
    };
    // Either side ending (or a cut) ends the connection.
    tokio::select! {
        r = requests => r,
        r = responses => r,
    }
}

//! Credentials never appear in an error: every error path of storage (`open`, `read_range`,
//! `glob`, `list_files` and every reader) driven with URLs that carry a marker secret as a
//! password, a token user, a query (with or without `=`) or a fragment, well-formed and
//! malformed (bad host, port, IPv6 literal), against in-process S3 and HTTP servers and
//! closed ports; the marker must not appear in `{e:#}`, `{e:?}`, nor in the `Display` or
//! `Debug` of any cause in the chain.

use std::sync::Arc;

use futures::future::BoxFuture;
use streamload::Dataset;
use streamload::format::{
    Column, CsvDataset, FixedLengthRecordDataset, TFRecordDataset, TextLineDataset,
};
use streamload::storage;
use tokio::io::AsyncReadExt;

#[path = "support/s3.rs"]
mod s3;
use s3::{HttpFiles, HttpObject, MemoryS3, http_server, memory_s3_server, s3_store_retrying};

const MARK: &str = "SEKRET42";

/// Every way an error about `url` can be made: each entry point, each reader.
fn entry_points(url: &str) -> Vec<(&'static str, BoxFuture<'static, anyhow::Result<()>>)> {
    let u = url.to_string();
    let pattern = match url.rfind(".txt") {
        Some(i) => format!("{}*{}", &url[..i], &url[i..]),
        None => format!("{url}*"),
    };
    let p = pattern.clone();
    let mut calls: Vec<(&'static str, BoxFuture<'static, anyhow::Result<()>>)> = Vec::new();
    let v = u.clone();
    calls.push((
        "open",
        Box::pin(async move {
            let mut reader = storage::open(v.as_str()).await?;
            let mut out = Vec::new();
            reader.read_to_end(&mut out).await?;
            Ok(())
        }),
    ));
    let v = u.clone();
    calls.push((
        "read_range",
        Box::pin(async move {
            storage::read_range(v.as_str(), 0..4).await?;
            Ok(())
        }),
    ));
    let v = u.clone();
    calls.push((
        "read_range past the end",
        Box::pin(async move {
            storage::read_range(v.as_str(), 1 << 40..1 << 41).await?;
            Ok(())
        }),
    ));
    let v = p.clone();
    calls.push((
        "glob",
        Box::pin(async move {
            storage::glob(&v).await?;
            Ok(())
        }),
    ));
    let v = u.clone();
    calls.push((
        "glob (no wildcard)",
        Box::pin(async move {
            storage::glob(&v).await?;
            Ok(())
        }),
    ));
    let v = p.clone();
    calls.push((
        "list_files",
        Box::pin(async move {
            Dataset::list_files(&v, None).collect().await?;
            Ok(())
        }),
    ));
    let v = u.clone();
    calls.push((
        "TFRecordDataset",
        Box::pin(async move {
            TFRecordDataset::new([v]).build().collect().await?;
            Ok(())
        }),
    ));
    let v = u.clone();
    calls.push((
        "TextLineDataset",
        Box::pin(async move {
            TextLineDataset::new([v]).build().collect().await?;
            Ok(())
        }),
    ));
    let v = u.clone();
    calls.push((
        "CsvDataset",
        Box::pin(async move {
            CsvDataset::new([v], [Column::int64()])
                .build()
                .collect()
                .await?;
            Ok(())
        }),
    ));
    let v = u.clone();
    calls.push((
        "FixedLengthRecordDataset",
        Box::pin(async move {
            FixedLengthRecordDataset::new([v], 3)
                .build()
                .collect()
                .await?;
            Ok(())
        }),
    ));
    calls
}

/// Every way `err` can be shown: the chain as `{:#}` and `{:?}`, and each cause alone.
fn every_rendering(err: &anyhow::Error) -> Vec<String> {
    let mut shown = vec![
        format!("{err}"),
        format!("{err:#}"),
        format!("{err:?}"),
        format!("{err:#?}"),
    ];
    for cause in err.chain() {
        shown.push(format!("{cause}"));
        shown.push(format!("{cause:?}"));
        shown.push(format!("{cause:#?}"));
    }
    shown
}

fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

#[test]
fn no_error_of_any_storage_path_shows_a_secret() {
    // One test in this binary: the environment is set before any thread starts. Stores built
    // from the environment for unregistered buckets talk to a closed port, signing nothing,
    // and never ask an instance metadata service.
    let closed = closed_port();
    // SAFETY: no other thread runs yet (the runtime is built below).
    unsafe {
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy().into_owned();
            if ["AWS_", "GOOGLE_", "AZURE_"]
                .iter()
                .any(|p| key.starts_with(p))
            {
                std::env::remove_var(key);
            }
        }
        std::env::set_var("AWS_ENDPOINT", format!("http://127.0.0.1:{closed}"));
        std::env::set_var("AWS_ALLOW_HTTP", "true");
        std::env::set_var("AWS_SKIP_SIGNATURE", "true");
        std::env::set_var("AWS_REGION", "us-east-1");
        std::env::set_var("AWS_EC2_METADATA_DISABLED", "true");
        std::env::set_var("GOOGLE_SKIP_SIGNATURE", "true");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(drive_every_path(closed));
}

async fn drive_every_path(closed: u16) {
    let objects = MemoryS3::default();
    objects.insert("red", "data/a.txt", bytes::Bytes::from_static(b"1\n2\n"));
    let s3 = memory_s3_server(objects, "AKIDRED", "red-secret-key").await;
    let store = s3_store_retrying(s3, "red", "AKIDRED", "red-secret-key", 0);
    storage::register("s3://red", store).expect("register");

    let files = Arc::new(HttpFiles::default());
    files.insert(
        "/data/a.txt",
        HttpObject {
            data: bytes::Bytes::from_static(b"1\n2\n"),
            e_tag: Some("v1".into()),
            last_modified: Some(std::time::SystemTime::now()),
        },
    );
    let http = http_server(files).await;

    let mut urls = Vec::new();
    // No case needs a DNS lookup (the machine may have no resolver): names are the
    // registered bucket `red`, `localhost` and IP literals.
    for scheme in ["s3", "http", "https", "memory", "ftp"] {
        let red = match scheme {
            "http" | "https" => "localhost",
            _ => "red",
        };
        let secret = format!("user:{MARK}@");
        for authority in [
            format!("{secret}{red}"),
            format!("{secret}{http}"),
            format!("{secret}127.0.0.1:{closed}"),
            format!("{MARK}@{http}"),
            format!("{MARK}@{red}"),
            // Malformed: a bad port, a port out of range, a broken IPv6 literal, a bad host.
            format!("{secret}{red}:port"),
            format!("{secret}{red}:99999"),
            format!("{secret}[::1"),
            format!("{secret}[::zz]:80"),
            format!("{secret}bad host"),
            format!("{secret}bad%host"),
            format!("user:{MARK}@"),
            format!("user:{MARK}"),
        ] {
            urls.push(format!("{scheme}://{authority}/data/a.txt"));
            urls.push(format!("{scheme}://{authority}/data/missing.txt"));
        }
        for authority in [red.to_string(), http.to_string()] {
            for tail in [
                format!("?{MARK}"),
                format!("?X-Amz-Signature={MARK}"),
                format!("?sv=2024&sig={MARK}&se=1"),
                format!("#{MARK}"),
                format!("?a=b#{MARK}"),
                format!("?{MARK}#frag"),
            ] {
                urls.push(format!("{scheme}://{authority}/data/a.txt{tail}"));
                urls.push(format!("{scheme}://{authority}/data/missing.txt{tail}"));
            }
        }
    }
    // A 404 through a token user, over plain HTTP.
    urls.push(format!("http://{MARK}@{http}/data/missing.txt"));
    urls.push(format!(
        "http://{MARK}:x-oauth-basic@{http}/data/missing.txt"
    ));

    let mut leaks = Vec::new();
    let mut errors = 0;
    for url in &urls {
        for (entry, call) in entry_points(url) {
            let Ok(outcome) = tokio::time::timeout(std::time::Duration::from_secs(20), call).await
            else {
                leaks.push(format!("{entry} of {url}: no answer in 20 s"));
                continue;
            };
            let Err(err) = outcome else { continue };
            errors += 1;
            for shown in every_rendering(&err) {
                if shown.contains(MARK) {
                    leaks.push(format!("{entry} of {url}:\n    {shown}"));
                    break;
                }
            }
        }
    }
    assert!(errors > 500, "only {errors} errors: the cases do not fail");
    assert!(
        leaks.is_empty(),
        "{} of {errors} errors show the secret:\n{}",
        leaks.len(),
        leaks.join("\n")
    );
}

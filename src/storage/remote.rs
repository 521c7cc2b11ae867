//! Object stores (`object_store`): a registry of stores by URL prefix, built from the
//! environment on first use unless registered, and their objects as async readers.

use std::sync::{Arc, LazyLock, RwLock};

use futures::TryStreamExt;
use object_store::path::Path as StorePath;
use object_store::{ClientConfigKey, ClientOptions, ObjectStore};
use url::Url;

use super::Location;
use super::ranged::{ReadOptions, Reader};
use crate::Error;

/// Stores by URL prefix (`scheme://authority/optional/path/`), longest prefix first.
type Registry = RwLock<Vec<(String, Reader)>>;
static STORES: LazyLock<Registry> = LazyLock::new(|| RwLock::new(Vec::new()));

fn normalize(prefix: &str) -> String {
    let mut p = prefix.to_string();
    if !p.ends_with('/') {
        p.push('/');
    }
    p
}

/// Serves every URL under `url_prefix` (e.g. `s3://bucket`, `memory://test`) from `store`,
/// with paths relative to the prefix, read with the default [`ReadOptions`]. Use it for
/// explicit endpoints and credentials (build the store with `object_store`'s builders) and
/// for `memory://` stores; it replaces a store registered before under the same prefix.
///
/// # Errors
///
/// When `url_prefix` is not a URL.
pub fn register(url_prefix: &str, store: Arc<dyn ObjectStore>) -> anyhow::Result<()> {
    register_with(url_prefix, store, ReadOptions::default())
}

/// [`register`] with how objects are read from the store: block size, read-ahead depth,
/// connection limit, retries and timeouts.
///
/// # Errors
///
/// When `url_prefix` is not a URL.
pub fn register_with(
    url_prefix: &str,
    store: Arc<dyn ObjectStore>,
    options: ReadOptions,
) -> anyhow::Result<()> {
    Url::parse(url_prefix)
        // Not shown: a prefix that fails to parse cannot be stripped of credentials.
        .map_err(|e| Error::InvalidArgument(format!("the store's prefix is not a URL: {e}")))?;
    insert(normalize(url_prefix), Reader::new(store, options));
    Ok(())
}

/// Puts `reader` in the registry under `prefix` (normalized), replacing any before it.
fn insert(prefix: String, reader: Reader) {
    let mut stores = STORES.write().unwrap_or_else(|e| e.into_inner());
    stores.retain(|(p, _)| *p != prefix);
    stores.push((prefix, reader));
    stores.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
}

/// Refuses a URL carrying a password or a query string (a pre-signed URL's signature, an
/// Azure SAS token): it would be sent as part of the object's path, and could end up in an
/// error; the message shows the URL without them.
fn refuse_credentials(url: &Url) -> anyhow::Result<()> {
    if url.query().is_some() || url.password().is_some() {
        return Err(Error::InvalidArgument(format!(
            "query strings (pre-signed URLs, SAS tokens) and passwords in URLs are not \
             supported: {}; pass credentials through the environment or register_with",
            Location::Url(url.clone())
        ))
        .into());
    }
    Ok(())
}

/// The store serving `url`, the store's base URL, and the object's path in it.
fn resolve(url: &Url) -> anyhow::Result<(Reader, String, StorePath)> {
    refuse_credentials(url)?;
    let text = url.as_str();
    let found = {
        let stores = STORES.read().unwrap_or_else(|e| e.into_inner());
        stores
            .iter()
            .find(|(p, _)| text.starts_with(p.as_str()) || normalize(text) == *p)
            .map(|(p, s)| (p.clone(), s.clone()))
    };
    let (base, store) = match found {
        Some(found) => found,
        None => {
            let base = format!("{}://{}/", url.scheme(), url.authority());
            // One reader, so every object of the bucket shares one connection limit.
            let store = Reader::new(from_env(url, &base)?, ReadOptions::default());
            insert(base.clone(), store.clone());
            (base, store)
        }
    };
    let rest = text.get(base.len()..).unwrap_or("");
    let path = StorePath::from_url_path(rest).map_err(|e| {
        Error::InvalidArgument(format!(
            "{}: bad object path: {e}",
            Location::Url(url.clone())
        ))
    })?;
    Ok((store, base, path))
}

/// A store for `url`'s bucket, configured from the environment.
fn from_env(url: &Url, base: &str) -> anyhow::Result<Arc<dyn ObjectStore>> {
    let shown = Location::Url(url.clone());
    let store: Arc<dyn ObjectStore> = match url.scheme() {
        "s3" | "s3a" => {
            use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
            let builder = AmazonS3Builder::from_env().with_url(base);
            let client = streaming(|key| builder.get_config_value(&AmazonS3ConfigKey::Client(key)));
            Arc::new(builder.with_client_options(client).build()?)
        }
        "gs" => {
            use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
            let builder = GoogleCloudStorageBuilder::from_env().with_url(base);
            let client = streaming(|key| builder.get_config_value(&GoogleConfigKey::Client(key)));
            Arc::new(builder.with_client_options(client).build()?)
        }
        "az" | "adl" | "azure" | "abfs" | "abfss" => {
            use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
            let builder = MicrosoftAzureBuilder::from_env().with_url(base);
            let client = streaming(|key| builder.get_config_value(&AzureConfigKey::Client(key)));
            Arc::new(builder.with_client_options(client).build()?)
        }
        "http" | "https" => Arc::new(
            object_store::http::HttpBuilder::new()
                .with_url(base.trim_end_matches('/'))
                // object_store refuses plain http unless told: an `http://` URL asks for it.
                .with_client_options(streaming(|_| None).with_allow_http(url.scheme() == "http"))
                .build()?,
        ),
        "memory" => {
            return Err(Error::InvalidArgument(format!(
                "{shown}: no store registered for it (register an InMemory store with \
                 streamload::storage::register)"
            ))
            .into());
        }
        other => {
            return Err(Error::InvalidArgument(format!(
                "{shown}: unsupported scheme {other:?} (s3, gs, az, http(s), file, memory)"
            ))
            .into());
        }
    };
    Ok(store)
}

/// HTTP client options for streaming bodies: those `configured` (from the environment, by
/// key), without the whole-request timeout (object_store's default 30 s covers the whole
/// body, so a slow 8 MiB block would be cut every 30 s); the connect timeout stays, and a
/// body that sends no byte for [`ReadOptions::read_timeout`] counts as broken.
fn streaming(configured: impl Fn(ClientConfigKey) -> Option<String>) -> ClientOptions {
    use ClientConfigKey as K;
    let keys = [
        K::AllowHttp,
        K::AllowInvalidCertificates,
        K::NoSystemCertificates,
        K::ConnectTimeout,
        K::DefaultContentType,
        K::Http1Only,
        K::Http2Only,
        K::Http2KeepAliveInterval,
        K::Http2KeepAliveTimeout,
        K::Http2KeepAliveWhileIdle,
        K::Http2MaxFrameSize,
        K::PoolIdleTimeout,
        K::PoolMaxIdlePerHost,
        K::ProxyUrl,
        K::ProxyCaCertificate,
        K::ProxyExcludes,
        K::RandomizeAddresses,
        K::ReadTimeout,
        K::UserAgent,
    ];
    keys.into_iter()
        .fold(ClientOptions::new(), |options, key| match configured(key) {
            Some(value) => options.with_config(key, value),
            None => options,
        })
        .with_timeout_disabled()
}

/// The object at `url` as a stream of blocks (ranged GETs with read-ahead and retries).
pub(crate) async fn open(url: &Url) -> anyhow::Result<crate::format::Blocks> {
    let (reader, _, path) = resolve(url)?;
    // The caller names the location in its error context.
    super::ranged::open(reader, path, Location::Url(url.clone())).await
}

/// The bytes of `range` in the object at `url`, up to its end.
pub(crate) async fn read_range(
    url: &Url,
    range: std::ops::Range<u64>,
) -> anyhow::Result<bytes::Bytes> {
    let (reader, _, path) = resolve(url)?;
    super::ranged::read_range(reader, path, Location::Url(url.clone()), range).await
}

/// The files matching `pattern`, sorted: a local glob (`data/train-*.tfrecord`) or a URL
/// whose path has glob characters (`s3://bucket/train/part-*.tfrecord`), listed with the
/// longest literal prefix and matched with `glob`'s rules. In a URL, a `?` is a wildcard
/// like `*` (not the start of a query string).
///
/// # Errors
///
/// An invalid pattern, a failed listing (naming the URL), no match at all, or a URL with a
/// password or a query string (`?key=value`: a pre-signed URL, a SAS token). Messages never
/// show a password or a query.
pub async fn glob(pattern: &str) -> anyhow::Result<Vec<Location>> {
    let mut url = match Url::parse(pattern) {
        Ok(url) if url.scheme() == "file" => url,
        _ => match Location::parse(pattern) {
            Location::Local(_) => return local_glob(pattern).await,
            Location::Url(url) => url,
        },
    };
    // A `?` is a wildcard here: what follows it is part of the pattern, not a query, unless
    // it looks like one (`key=value`, as in pre-signed URLs and SAS tokens: refused).
    if let Some(rest) = url.query().filter(|q| !q.contains('=')) {
        let path = format!("{}%3F{}", url.path(), rest.replace('?', "%3F"));
        url.set_query(None);
        url.set_path(&path);
    }
    if url.scheme() == "file" {
        let path = url.to_file_path().map_err(|()| {
            Error::InvalidArgument(format!("not a local path: {}", Location::Url(url.clone())))
        })?;
        let path = path.to_str().ok_or_else(|| {
            Error::InvalidArgument(format!("not a UTF-8 path: {}", path.display()))
        })?;
        return local_glob(path).await;
    }
    // Messages show the pattern without credentials.
    let shown = Location::Url(url.clone()).to_string();
    let (reader, base, _) = resolve(&url)?;
    let store = reader.store;
    let key_pattern = url.as_str().get(base.len()..).unwrap_or("");
    let key_pattern = percent_decode(key_pattern);
    let matcher = glob::Pattern::new(&key_pattern)
        .map_err(|e| Error::InvalidArgument(format!("invalid pattern {shown}: {e}")))?;
    let literal = key_pattern
        .find(['*', '?', '['])
        .map_or(key_pattern.as_str(), |i| &key_pattern[..i]);
    let dir = literal.rfind('/').map_or("", |i| &literal[..i]);
    let prefix = (!dir.is_empty()).then(|| StorePath::from(dir));
    let options = glob::MatchOptions {
        require_literal_separator: true,
        ..Default::default()
    };
    let mut found: Vec<Location> = store
        .list(prefix.as_ref())
        .map_err(|e| anyhow::Error::new(e).context(format!("listing {shown}")))
        .try_filter_map(|meta| {
            let key = meta.location.to_string();
            let hit = matcher.matches_with(&key, options);
            let url = Url::parse(&format!("{base}{}", meta.location.as_ref()));
            futures::future::ready(match (hit, url) {
                (true, Ok(url)) => Ok(Some(Location::Url(url))),
                (true, Err(e)) => Err(anyhow::anyhow!("listing {shown}: {e}")),
                (false, _) => Ok(None),
            })
        })
        .try_collect()
        .await?;
    found.sort();
    anyhow::ensure!(!found.is_empty(), "no files matched pattern {shown}");
    Ok(found)
}

/// The local files matching `pattern`, as locations.
/// A local glob, listed on a blocking thread (a directory walk would stall an async worker),
/// or right here outside a tokio runtime.
async fn local_glob(pattern: &str) -> anyhow::Result<Vec<Location>> {
    const STAGE: &str = "glob";
    let list = |pattern: &str| -> anyhow::Result<Vec<Location>> {
        let files = crate::format::list_files(pattern)?;
        Ok(files.into_iter().map(Location::Local).collect())
    };
    if tokio::runtime::Handle::try_current().is_err() {
        return list(pattern);
    }
    let pattern = pattern.to_string();
    crate::runtime::spawn_blocking(STAGE, move || list(&pattern))?
        .await
        .map_err(|e| crate::runtime::join_error(STAGE, e))?
}

/// A URL's path as the object key it names (`%20` is a space; `&` and `+` are themselves).
fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_from_the_environment_stream_without_a_whole_request_timeout() {
        let options = streaming(|key| match key {
            ClientConfigKey::AllowHttp => Some("true".to_string()),
            ClientConfigKey::ConnectTimeout => Some("7s".to_string()),
            _ => None,
        });
        assert_eq!(options.get_config_value(&ClientConfigKey::Timeout), None);
        assert_eq!(
            options.get_config_value(&ClientConfigKey::ConnectTimeout),
            Some("7s".to_string())
        );
        assert_eq!(
            options.get_config_value(&ClientConfigKey::AllowHttp),
            Some("true".to_string())
        );
        // The default connect timeout stays when none is configured.
        let options = streaming(|_| None);
        assert_eq!(options.get_config_value(&ClientConfigKey::Timeout), None);
        assert!(
            options
                .get_config_value(&ClientConfigKey::ConnectTimeout)
                .is_some()
        );
    }
}

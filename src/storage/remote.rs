//! Object stores (`object_store`): a registry of stores by URL prefix, built from the
//! environment on first use unless registered, and their objects as async readers.

use std::sync::{Arc, LazyLock, RwLock};

use futures::StreamExt;
use object_store::path::Path as StorePath;
use object_store::{ClientConfigKey, ClientOptions, ObjectMeta, ObjectStore};
use url::Url;

use super::Location;
use super::ranged::{Fault, ReadOptions, Reader, Retrying, classify};
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
/// streamload retries and resumes reads itself (see [`ReadOptions`]): build the store with
/// `object_store`'s own retries off (`with_retry(RetryConfig { max_retries: 0, .. })`), or
/// each of streamload's tries is retried again inside by the store.
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

/// Refuses a URL carrying a user name or password (a token user), a query string (a pre-signed URL's signature, an
/// Azure SAS token) or a fragment: it would be sent as part of the object's path, and could
/// end up in an error; the message shows the URL without them.
fn refuse_credentials(url: &Url) -> anyhow::Result<()> {
    let user = !url.username().is_empty() || url.password().is_some();
    if user || url.query().is_some() || url.fragment().is_some() {
        return Err(Error::InvalidArgument(format!(
            "query strings (pre-signed URLs, SAS tokens), fragments (write a `#` in a key as \
             %23) and user names or passwords in URLs are not supported: {}; pass credentials through the \
             environment or register_with",
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

/// A store for `url`'s bucket, configured from the environment, with `object_store`'s own
/// retries off (streamload's are the one retry policy, see [`ReadOptions`]). Where no
/// credentials are configured, the cloud's metadata service is asked once for them, for at
/// most [`METADATA_WAIT`], and a failure names the variables to set.
fn from_env(url: &Url, base: &str) -> anyhow::Result<Arc<dyn ObjectStore>> {
    let shown = Location::Url(url.clone());
    let built = |e: object_store::Error, hint: &str| {
        anyhow::anyhow!("{shown}: {}{hint}", super::describe(&e))
    };
    let store: Arc<dyn ObjectStore> = match url.scheme() {
        "s3" | "s3a" => {
            use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey as K};
            let builder = AmazonS3Builder::from_env().with_url(base);
            let client = streaming(|key| builder.get_config_value(&K::Client(key)));
            let builder = builder.with_client_options(client).with_retry(no_retries());
            let env = |name: &str| std::env::var(name).ok();
            let builder = match aws_credentials(&|key| builder.get_config_value(&key), &env) {
                Credentials::Configured => builder,
                Credentials::Metadata { hint } => {
                    let metadata = builder
                        .clone()
                        .with_client_options(metadata_client(|key| {
                            builder.get_config_value(&K::Client(key))
                        }))
                        .build()
                        .map_err(|e| built(e, AWS_HINT))?;
                    let provider = FromMetadata::new("S3", metadata.credentials(), hint);
                    builder.with_credentials(Arc::new(provider))
                }
                Credentials::Missing { hint } => {
                    return Err(anyhow::Error::new(MissingCredentials(hint))
                        .context(format!("{shown}: no credentials")));
                }
            };
            Arc::new(builder.build().map_err(|e| built(e, AWS_HINT))?)
        }
        "gs" => {
            use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey as K};
            let builder = GoogleCloudStorageBuilder::from_env().with_url(base);
            let client = streaming(|key| builder.get_config_value(&K::Client(key)));
            let builder = builder.with_client_options(client).with_retry(no_retries());
            let builder = match gcp_credentials(&|key| builder.get_config_value(&key)) {
                Credentials::Metadata { hint } => {
                    let metadata = builder
                        .clone()
                        .with_client_options(metadata_client(|key| {
                            builder.get_config_value(&K::Client(key))
                        }))
                        .build()
                        .map_err(|e| built(e, GCP_HINT))?;
                    let provider = FromMetadata::new("GCS", metadata.credentials(), hint);
                    builder.with_credentials(Arc::new(provider))
                }
                _ => builder,
            };
            Arc::new(builder.build().map_err(|e| built(e, GCP_HINT))?)
        }
        "az" | "adl" | "azure" | "abfs" | "abfss" => {
            use object_store::azure::{AzureConfigKey as K, MicrosoftAzureBuilder};
            let builder = MicrosoftAzureBuilder::from_env().with_url(base);
            let client = streaming(|key| builder.get_config_value(&K::Client(key)));
            let builder = builder.with_client_options(client).with_retry(no_retries());
            let builder = match azure_credentials(&|key| builder.get_config_value(&key)) {
                Credentials::Metadata { hint } => {
                    let metadata = builder
                        .clone()
                        .with_client_options(metadata_client(|key| {
                            builder.get_config_value(&K::Client(key))
                        }))
                        .build()
                        .map_err(|e| built(e, AZURE_HINT))?;
                    let provider =
                        FromMetadata::new("MicrosoftAzure", metadata.credentials(), hint);
                    builder.with_credentials(Arc::new(provider))
                }
                _ => builder,
            };
            Arc::new(builder.build().map_err(|e| built(e, AZURE_HINT))?)
        }
        "http" | "https" => Arc::new(
            object_store::http::HttpBuilder::new()
                .with_url(base.trim_end_matches('/'))
                // object_store refuses plain http unless told: an `http://` URL asks for it.
                .with_client_options(streaming(|_| None).with_allow_http(url.scheme() == "http"))
                .with_retry(no_retries())
                .build()
                .map_err(|e| built(e, ""))?,
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

/// `object_store`'s retries off: streamload's own policy (see [`ReadOptions`]) is the one
/// layer of retries, not a second one inside it.
fn no_retries() -> object_store::RetryConfig {
    object_store::RetryConfig {
        max_retries: 0,
        retry_timeout: std::time::Duration::ZERO,
        ..Default::default()
    }
}

/// How long the cloud's metadata service (an EC2 instance role, a GCE service account, an
/// Azure managed identity) may take to give the first credentials, when no others are
/// configured: on a cloud machine it answers in milliseconds; elsewhere nobody answers.
pub(crate) const METADATA_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// What the environment says about a store's credentials.
#[derive(Debug, PartialEq, Eq)]
enum Credentials {
    /// Keys, tokens, a role, anonymous access: object_store uses them.
    Configured,
    /// None: the metadata service is asked (for [`METADATA_WAIT`]); `hint` names what to
    /// set, should it fail.
    Metadata { hint: String },
    /// None, and the metadata service is turned off (`AWS_EC2_METADATA_DISABLED`).
    Missing { hint: String },
}

const AWS_HINT: &str = " (S3 stores are configured by AWS_ACCESS_KEY_ID, \
    AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, AWS_ENDPOINT, AWS_ALLOW_HTTP, \
    AWS_SKIP_SIGNATURE, or an AmazonS3Builder given to streamload::storage::register_with)";
const GCP_HINT: &str = " (GCS stores are configured by GOOGLE_SERVICE_ACCOUNT (a service \
    account file), GOOGLE_SERVICE_ACCOUNT_KEY, GOOGLE_APPLICATION_CREDENTIALS, \
    GOOGLE_SKIP_SIGNATURE, or a GoogleCloudStorageBuilder given to \
    streamload::storage::register_with)";
const AZURE_HINT: &str = " (Azure stores are configured by AZURE_STORAGE_ACCOUNT_NAME (the \
    account; required), AZURE_STORAGE_ACCOUNT_KEY, AZURE_STORAGE_SAS_KEY, \
    AZURE_STORAGE_CLIENT_ID with AZURE_STORAGE_CLIENT_SECRET and AZURE_STORAGE_TENANT_ID, \
    AZURE_USE_AZURE_CLI, AZURE_SKIP_SIGNATURE, or a MicrosoftAzureBuilder given to \
    streamload::storage::register_with)";

/// Whether `value` is a configured boolean's true.
fn is_true(value: Option<String>) -> bool {
    value.is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes"))
}

/// The credentials an S3 builder has, by its configuration (`value` by key), as
/// `AmazonS3Builder::build` picks them; and by the environment (`env`),
/// `AWS_EC2_METADATA_DISABLED` and `AWS_PROFILE` (which object_store does not read).
fn aws_credentials(
    value: &dyn Fn(object_store::aws::AmazonS3ConfigKey) -> Option<String>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Credentials {
    use object_store::aws::AmazonS3ConfigKey as K;
    let has = |key| value(key).is_some();
    let configured = has(K::AccessKeyId)
        || has(K::SecretAccessKey)
        || (has(K::WebIdentityTokenFile) && has(K::RoleArn))
        || has(K::ContainerCredentialsRelativeUri)
        || (has(K::ContainerCredentialsFullUri) && has(K::ContainerAuthorizationTokenFile))
        || is_true(value(K::SkipSignature));
    if configured {
        return Credentials::Configured;
    }
    let endpoint = value(K::MetadataEndpoint).unwrap_or_else(|| "http://169.254.169.254".into());
    let profile = match env("AWS_PROFILE") {
        Some(_) => " (AWS_PROFILE is set, but profiles in ~/.aws are not read)",
        None => "",
    };
    let hint = format!(
        "no AWS credentials are configured{profile}: set AWS_ACCESS_KEY_ID and \
         AWS_SECRET_ACCESS_KEY (with AWS_SESSION_TOKEN for temporary ones), AWS_REGION, and \
         AWS_ENDPOINT (with AWS_ALLOW_HTTP=true for http://) for a server other than AWS; \
         or AWS_SKIP_SIGNATURE=true for a public bucket; or register_with a store built with \
         AmazonS3Builder"
    );
    if is_true(env("AWS_EC2_METADATA_DISABLED")) {
        return Credentials::Missing {
            hint: format!(
                "{hint}; the instance metadata service is off (AWS_EC2_METADATA_DISABLED)"
            ),
        };
    }
    Credentials::Metadata {
        hint: format!(
            "{hint}; and the instance metadata service ({endpoint}, for an EC2 instance role) \
             gave none (asked once, for at most {METADATA_WAIT:?})"
        ),
    }
}

/// The credentials a GCS builder has, by its configuration, as
/// `GoogleCloudStorageBuilder::build` picks them (an application default credentials file
/// where gcloud writes it counts).
fn gcp_credentials(
    value: &dyn Fn(object_store::gcp::GoogleConfigKey) -> Option<String>,
) -> Credentials {
    use object_store::gcp::GoogleConfigKey as K;
    let gcloud = std::env::var_os("HOME").map(|home| {
        std::path::Path::new(&home).join(".config/gcloud/application_default_credentials.json")
    });
    let configured = [
        K::ServiceAccount,
        K::ServiceAccountKey,
        K::ApplicationCredentials,
        K::BearerToken,
    ]
    .into_iter()
    .any(|key| value(key).is_some())
        || is_true(value(K::SkipSignature))
        || gcloud.is_some_and(|path| path.exists());
    match configured {
        true => Credentials::Configured,
        false => Credentials::Metadata {
            hint: format!(
                "no Google Cloud credentials are configured: set GOOGLE_SERVICE_ACCOUNT (a \
                 service account file) or GOOGLE_SERVICE_ACCOUNT_KEY (its contents), or \
                 GOOGLE_APPLICATION_CREDENTIALS; or GOOGLE_SKIP_SIGNATURE=true for a public \
                 bucket; or register_with a store built with GoogleCloudStorageBuilder; and \
                 the metadata service (for a GCE service account) gave none (asked once, \
                 for at most {METADATA_WAIT:?})"
            ),
        },
    }
}

/// The credentials an Azure builder has, by its configuration, as
/// `MicrosoftAzureBuilder::build` picks them.
fn azure_credentials(
    value: &dyn Fn(object_store::azure::AzureConfigKey) -> Option<String>,
) -> Credentials {
    use object_store::azure::AzureConfigKey as K;
    let configured = [
        K::AccessKey,
        K::SasKey,
        K::Token,
        K::ClientSecret,
        K::FederatedTokenFile,
        K::FabricTokenServiceUrl,
        K::CredentialType,
    ]
    .into_iter()
    .any(|key| value(key).is_some())
        || [K::UseAzureCli, K::SkipSignature, K::UseEmulator]
            .into_iter()
            .any(|key| is_true(value(key)));
    match configured {
        true => Credentials::Configured,
        false => Credentials::Metadata {
            hint: format!(
                "no Azure credentials are configured: set AZURE_STORAGE_ACCOUNT_KEY, or \
                 AZURE_STORAGE_SAS_KEY, or AZURE_STORAGE_CLIENT_ID with \
                 AZURE_STORAGE_CLIENT_SECRET and AZURE_STORAGE_TENANT_ID, or \
                 AZURE_USE_AZURE_CLI=true; or AZURE_SKIP_SIGNATURE=true for a public \
                 container; or register_with a store built with MicrosoftAzureBuilder; and \
                 the managed identity endpoint gave none (asked once, for at most \
                 {METADATA_WAIT:?})"
            ),
        },
    }
}

/// Client options for the metadata service: those `configured`, with a 1 s connect timeout
/// and [`METADATA_WAIT`] for the whole request.
fn metadata_client(configured: impl Fn(ClientConfigKey) -> Option<String>) -> ClientOptions {
    streaming(configured)
        .with_connect_timeout(std::time::Duration::from_secs(1))
        .with_timeout(METADATA_WAIT)
}

/// No credentials, and where to set them: a permanent fault (never retried).
#[derive(Debug)]
pub(crate) struct MissingCredentials(String);

impl std::fmt::Display for MissingCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MissingCredentials {}

/// Credentials from the cloud's metadata service, where none are configured: the first
/// must come within [`METADATA_WAIT`], at the first try, or the store's requests fail with
/// [`MissingCredentials`] naming what to set (a laptop never waits on the metadata address).
/// Once some came, a failed refresh is the store's usual fault (retried when transient).
#[derive(Debug)]
struct FromMetadata<C> {
    store: &'static str,
    inner: Arc<dyn object_store::CredentialProvider<Credential = C>>,
    hint: String,
    fetched: std::sync::atomic::AtomicBool,
}

impl<C> FromMetadata<C> {
    fn new(
        store: &'static str,
        inner: &Arc<dyn object_store::CredentialProvider<Credential = C>>,
        hint: String,
    ) -> Self {
        FromMetadata {
            store,
            inner: Arc::clone(inner),
            hint,
            fetched: false.into(),
        }
    }
}

#[async_trait::async_trait]
impl<C: std::fmt::Debug + Send + Sync> object_store::CredentialProvider for FromMetadata<C> {
    type Credential = C;

    async fn get_credential(&self) -> object_store::Result<Arc<C>> {
        use std::sync::atomic::Ordering::Relaxed;
        if self.fetched.load(Relaxed) {
            return self.inner.get_credential().await;
        }
        let cause = match tokio::time::timeout(METADATA_WAIT, self.inner.get_credential()).await {
            Ok(Ok(credential)) => {
                self.fetched.store(true, Relaxed);
                return Ok(credential);
            }
            Ok(Err(e)) => super::describe(&e),
            Err(_) => "no answer".to_string(),
        };
        Err(object_store::Error::Generic {
            store: self.store,
            source: Box::new(MissingCredentials(format!("{}: {cause}", self.hint))),
        })
    }
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

/// The object at `url` from byte `offset` on, as a stream of blocks (ranged GETs with
/// read-ahead and retries), and what the object was when opened.
pub(crate) async fn open(
    url: &Url,
    offset: u64,
) -> anyhow::Result<(super::Blocks, super::Identity)> {
    let (reader, _, path) = resolve(url)?;
    // The caller names the location in its error context.
    super::ranged::open(reader, path, Location::Url(url.clone()), offset).await
}

/// A writer of the object at `url`: object_store's buffered writer (one PUT for a small
/// object, a multipart upload for a large one), complete once shut down.
pub(crate) fn create(url: &Url) -> anyhow::Result<object_store::buffered::BufWriter> {
    let (reader, _, path) = resolve(url)?;
    Ok(object_store::buffered::BufWriter::new(
        Arc::clone(&reader.store),
        path,
    ))
}

/// Stores `bytes` as the whole object at `url` (one PUT, retried on transient faults).
pub(crate) async fn put(url: &Url, bytes: bytes::Bytes) -> anyhow::Result<()> {
    let (reader, _, path) = resolve(url)?;
    super::ranged::put(&reader, &path, bytes).await
}

/// What the object at `url` is now (its size and version), from a HEAD.
pub(crate) async fn identity(url: &Url) -> anyhow::Result<super::Identity> {
    let (reader, _, path) = resolve(url)?;
    super::ranged::head(&reader, &path).await
}

/// The bytes of `range` in the object at `url`, up to its end.
pub(crate) async fn read_range(
    url: &Url,
    range: std::ops::Range<u64>,
) -> anyhow::Result<bytes::Bytes> {
    let (reader, _, path) = resolve(url)?;
    super::ranged::read_range(reader, path, Location::Url(url.clone()), range).await
}

/// The size and version of the object at `url` (a HEAD, retried).
// Only the Parquet reader (feature `parquet`) asks for a size before reading.
#[cfg_attr(not(feature = "parquet"), allow(dead_code))]
pub(crate) async fn stat(url: &Url) -> anyhow::Result<super::Identity> {
    let (reader, _, path) = resolve(url)?;
    super::ranged::stat(reader, path, Location::Url(url.clone())).await
}

/// The files matching `pattern`, sorted: a local glob (`data/train-*.tfrecord`) or a URL
/// whose path has glob characters (`s3://bucket/train/part-*.tfrecord`), listed with the
/// longest literal prefix and matched with `glob`'s rules. In a URL, a `?` is a wildcard
/// like `*` (not the start of a query string).
///
/// # Errors
///
/// An invalid pattern, a failed listing (naming the URL), no match at all, or a URL with a
/// user name, a password, a query string (`?key=value`: a pre-signed URL, a SAS token) or a
/// fragment. Messages never show credentials: a pattern is shown up to its first `?`.
pub async fn glob(pattern: &str) -> anyhow::Result<Vec<Location>> {
    glob_raw(pattern).await.map_err(super::redact_error)
}

async fn glob_raw(pattern: &str) -> anyhow::Result<Vec<Location>> {
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
    let mut found = Vec::new();
    let listed = list_objects(&reader, prefix.as_ref(), &shown, |meta| {
        if matcher.matches_with(meta.location.as_ref(), options) {
            let url = Url::parse(&format!("{base}{}", meta.location.as_ref()))
                .map_err(|e| anyhow::anyhow!("listing {shown}: {e}"))?;
            found.push(Location::Url(url));
        }
        Ok(())
    });
    listed.await?;
    found.sort();
    anyhow::ensure!(!found.is_empty(), "no files matched pattern {shown}");
    Ok(found)
}

/// Every object under `prefix`, given to `each` in key order: retried as a read is (one
/// policy, see `ReadOptions`), resumed after the last key listed (stores list in key order).
async fn list_objects(
    reader: &Reader,
    prefix: Option<&StorePath>,
    shown: &str,
    mut each: impl FnMut(ObjectMeta) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let store = &reader.store;
    let mut last: Option<StorePath> = None;
    let mut retrying = Retrying::default();
    loop {
        let mut listing = match &last {
            None => store.list(prefix),
            Some(key) => store.list_with_offset(prefix, key),
        };
        let fault = loop {
            let meta = match listing.next().await {
                None => break None,
                Some(Err(e)) => break Some(e),
                Some(Ok(meta)) => meta,
            };
            retrying = Retrying::default();
            let key = meta.location.clone();
            each(meta)?;
            last = Some(key);
        };
        let Some(e) = fault else { return Ok(()) };
        // Before the store's first answer, a failed connection is a wrong URL or endpoint.
        let delay = match classify(e, last.is_some()) {
            Fault::Transient(message) => retrying.fault(&reader.options, message),
            Fault::Permanent(message) | Fault::Changed(message) => Err(anyhow::anyhow!(message)),
        };
        tokio::time::sleep(delay.map_err(|e| e.context(format!("listing {shown}")))?).await;
    }
}

/// Every object under the "directory" `url` (its path as a prefix ending at a `/`), by key
/// relative to it, with its size and version, in key order.
// Only the Zarr reader (feature `zarr`) lists a prefix.
#[cfg_attr(not(feature = "zarr"), allow(dead_code))]
pub(crate) async fn list(url: &Url) -> anyhow::Result<Vec<(String, super::Identity)>> {
    let shown = Location::Url(url.clone()).to_string();
    let (reader, _, path) = resolve(url)?;
    let prefix = (!path.as_ref().is_empty()).then_some(path);
    let skip = prefix.as_ref().map_or(0, |p| p.as_ref().len() + 1);
    let mut found = Vec::new();
    list_objects(&reader, prefix.as_ref(), &shown, |meta| {
        let key = meta.location.as_ref().get(skip..).unwrap_or_default();
        found.push((key.to_string(), super::ranged::identity(&meta)));
        Ok(())
    })
    .await?;
    Ok(found)
}

/// The local files matching `pattern`, as locations.
/// A local glob, listed on a blocking thread (a directory walk would stall an async worker),
/// or right here outside a tokio runtime.
async fn local_glob(pattern: &str) -> anyhow::Result<Vec<Location>> {
    const STAGE: &str = "glob";
    let list = |pattern: &str| -> anyhow::Result<Vec<Location>> {
        let files = super::listing::list_files(pattern)?;
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
pub(crate) fn percent_decode(text: &str) -> String {
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

    #[test]
    fn credentials_are_configured_or_asked_of_the_metadata_service() {
        use object_store::aws::AmazonS3ConfigKey as K;
        let none = |_: &str| None;
        let given = |keys: &'static [K]| move |key: K| keys.contains(&key).then(String::new);
        let configured = [
            &[K::AccessKeyId, K::SecretAccessKey][..],
            &[K::WebIdentityTokenFile, K::RoleArn],
            &[K::ContainerCredentialsRelativeUri],
        ];
        for keys in configured {
            assert_eq!(
                aws_credentials(&given(keys), &none),
                Credentials::Configured
            );
        }
        let public = |key: K| (key == K::SkipSignature).then(|| "true".to_string());
        assert_eq!(aws_credentials(&public, &none), Credentials::Configured);
        // A region and an endpoint are no credentials; a role without its token file either.
        let nothing = given(&[K::Region, K::Endpoint, K::RoleArn]);
        let Credentials::Metadata { hint } = aws_credentials(&nothing, &none) else {
            panic!("the metadata service is asked");
        };
        assert!(hint.contains("AWS_ACCESS_KEY_ID") && hint.contains("169.254.169.254"));
        let off = |name: &str| (name == "AWS_EC2_METADATA_DISABLED").then(|| "true".into());
        assert!(matches!(
            aws_credentials(&nothing, &off),
            Credentials::Missing { .. }
        ));

        use object_store::azure::AzureConfigKey as A;
        let key = |key: A| (key == A::AccessKey).then(String::new);
        assert_eq!(azure_credentials(&key), Credentials::Configured);
        let account = |key: A| (key == A::AccountName).then(String::new);
        assert!(matches!(
            azure_credentials(&account),
            Credentials::Metadata { .. }
        ));
        use object_store::gcp::GoogleConfigKey as G;
        let file = |key: G| (key == G::ServiceAccount).then(String::new);
        assert_eq!(gcp_credentials(&file), Credentials::Configured);
    }
}

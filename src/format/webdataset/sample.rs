//! A WebDataset sample: the files of a tar shard that share a key, by extension.

use std::sync::Arc;

use anyhow::Context as _;
use bytes::Bytes;

/// One sample of a WebDataset shard: the consecutive tar members that share a key, as a map
/// from extension (lower-cased) to bytes, in the order the members came in.
///
/// The `webdataset` package's sample dict, with its `__key__` and `__url__` entries as
/// [`key`](Sample::key) and [`url`](Sample::url). Typed accessors decode the usual fields the
/// way its default decoders do: [`cls`](Sample::cls) (an integer written as decimal text),
/// [`txt`](Sample::txt) (UTF-8), [`json`](Sample::json) and, with the `image` feature,
/// [`image`](Sample::image) (a JPEG or PNG, through [`crate::image::decode_image`]).
///
/// ```
/// use streamload::format::Sample;
/// let sample = Sample::new("images/000017")
///     .with("jpg", vec![0xff, 0xd8])
///     .with("cls", "3")
///     .with("json", r#"{"caption": "a cat"}"#);
/// assert_eq!(sample.key(), "images/000017");
/// assert_eq!(sample.cls()?, 3);
/// assert_eq!(sample.json()?["caption"], "a cat");
/// assert_eq!(sample.get("jpg").map(|b| b.len()), Some(2));
/// assert_eq!(sample.extensions().collect::<Vec<_>>(), ["jpg", "cls", "json"]);
/// assert_eq!(
///     format!("{sample:?}"),
///     r#"Sample { key: "images/000017", url: "", fields: {"jpg": "2 bytes", "cls": "1 bytes", "json": "20 bytes"} }"#
/// );
/// # anyhow::Ok(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Sample {
    key: String,
    url: Arc<str>,
    fields: Vec<(String, Bytes)>,
}

/// The key, the URL and each field's extension and size (not its bytes: a JPEG in a panic
/// message helps no one).
impl std::fmt::Debug for Sample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        struct Sizes<'a>(&'a [(String, Bytes)]);
        impl std::fmt::Debug for Sizes<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_map()
                    .entries(
                        self.0
                            .iter()
                            .map(|(e, b)| (e, format!("{} bytes", b.len()))),
                    )
                    .finish()
            }
        }
        f.debug_struct("Sample")
            .field("key", &self.key)
            .field("url", &&*self.url)
            .field("fields", &Sizes(&self.fields))
            .finish()
    }
}

impl Sample {
    /// An empty sample with this key (and no URL), to fill with [`with`](Sample::with) and
    /// write with a [`ShardWriter`](super::ShardWriter).
    pub fn new(key: impl Into<String>) -> Sample {
        Sample {
            key: key.into(),
            url: Arc::from(""),
            fields: Vec::new(),
        }
    }

    pub(crate) fn read(key: String, url: Arc<str>) -> Sample {
        Sample {
            key,
            url,
            fields: Vec::new(),
        }
    }

    /// This sample with `data` under the extension `ext` (replacing what it held).
    pub fn with(mut self, ext: impl Into<String>, data: impl Into<Bytes>) -> Sample {
        self.insert(ext, data);
        self
    }

    /// Puts `data` under the extension `ext`; returns what it held.
    pub fn insert(&mut self, ext: impl Into<String>, data: impl Into<Bytes>) -> Option<Bytes> {
        let (ext, data) = (ext.into(), data.into());
        match self.fields.iter_mut().find(|(e, _)| *e == ext) {
            Some((_, old)) => Some(std::mem::replace(old, data)),
            None => {
                self.fields.push((ext, data));
                None
            }
        }
    }

    /// Adds a field read from a shard: `false` if the extension is there already.
    pub(crate) fn push(&mut self, ext: String, data: Bytes) -> bool {
        if self.fields.iter().any(|(e, _)| *e == ext) {
            return false;
        }
        self.fields.push((ext, data));
        true
    }

    /// The key (`__key__`): the member path up to the first `.` of its file name.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The shard it was read from (`__url__`): its path or URL as given; empty for a sample
    /// made with [`new`](Sample::new).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The bytes of the member with this extension (e.g. `"jpg"`, `"seg.png"`).
    pub fn get(&self, ext: &str) -> Option<&Bytes> {
        self.fields.iter().find(|(e, _)| e == ext).map(|(_, b)| b)
    }

    /// The extensions, in the order the members came in.
    pub fn extensions(&self) -> impl Iterator<Item = &str> {
        self.fields.iter().map(|(e, _)| e.as_str())
    }

    /// The fields (extension and bytes), in the order the members came in.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &Bytes)> {
        self.fields.iter().map(|(e, b)| (e.as_str(), b))
    }

    /// How many fields (members) it has.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// Whether it has no fields.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The bytes under `ext`, or an error naming the sample.
    fn field(&self, ext: &str) -> anyhow::Result<&Bytes> {
        self.get(ext).with_context(|| {
            format!(
                "sample `{}` of {} has no `{ext}` field (it has: {})",
                self.key,
                self.shown_url(),
                self.extensions().collect::<Vec<_>>().join(", ")
            )
        })
    }

    fn shown_url(&self) -> &str {
        if self.url.is_empty() {
            "(no shard)"
        } else {
            &self.url
        }
    }

    /// The `cls` field as an integer: decimal text, surrounding whitespace allowed (what the
    /// `webdataset` package's decoder reads with `int(...)`).
    ///
    /// # Errors
    ///
    /// If there is no `cls` field or it is not a decimal integer; the error names the sample
    /// and the shard.
    pub fn cls(&self) -> anyhow::Result<i64> {
        let data = self.field("cls")?;
        std::str::from_utf8(data)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .with_context(|| {
                format!(
                    "sample `{}` of {}: `cls` is not a decimal integer ({:?})",
                    self.key,
                    self.shown_url(),
                    String::from_utf8_lossy(&data[..data.len().min(40)])
                )
            })
    }

    /// The `txt` field as text.
    ///
    /// # Errors
    ///
    /// If there is no `txt` field or it is not UTF-8; the error names the sample and the shard.
    pub fn txt(&self) -> anyhow::Result<&str> {
        let data = self.field("txt")?;
        std::str::from_utf8(data).with_context(|| {
            format!(
                "sample `{}` of {}: `txt` is not UTF-8",
                self.key,
                self.shown_url()
            )
        })
    }

    /// The `json` field, parsed.
    ///
    /// # Errors
    ///
    /// If there is no `json` field or it is not JSON; the error names the sample and the shard.
    pub fn json(&self) -> anyhow::Result<serde_json::Value> {
        let data = self.field("json")?;
        serde_json::from_slice(data).with_context(|| {
            format!(
                "sample `{}` of {}: `json` is not JSON",
                self.key,
                self.shown_url()
            )
        })
    }

    /// The image under `ext` (a JPEG or a PNG, told apart by its bytes) decoded to
    /// height x width x 3 bytes, as [`decode_image`](crate::image::decode_image) does. CPU
    /// work: call it in [`map_parallel`](crate::Dataset::map_parallel).
    ///
    /// # Errors
    ///
    /// If there is no such field, or it is not a JPEG or PNG the decoders read; the error
    /// names the sample and the shard.
    #[cfg(feature = "image")]
    pub fn image(&self, ext: &str) -> anyhow::Result<ndarray::Array3<u8>> {
        let data = self.field(ext)?;
        crate::image::decode_image(data).with_context(|| {
            format!(
                "decoding `{ext}` of sample `{}` of {}",
                self.key,
                self.shown_url()
            )
        })
    }
}

/// A member name's key and extension, as the `webdataset` package splits them
/// (`base_plus_ext`: the regular expression `^((?:.*/|)[^.]+)[.]([^/]*)$`): the key runs up to
/// the first `.` of the file name, the extension is the rest. `None` (the member is skipped)
/// when the file name has no `.`, or when the text before it, back to the previous `.` or the
/// start, is empty or only the `/` that starts the file name.
pub(crate) fn base_plus_ext(name: &str) -> Option<(&str, &str)> {
    let base_start = name.rfind('/').map_or(0, |i| i + 1);
    let dot = base_start + name[base_start..].find('.')?;
    // The regular expression's `[^.]+` runs from the start or just after some `/`, to the
    // dot, with no `.`; `.*/` before it takes any text. So: some `/` (or the start) after the
    // last `.` before this dot, with at least one character between it and the dot.
    let before = &name[..dot];
    let from = before.rfind('.').map_or(0, |i| i + 1);
    let ok = (from == 0 && dot > 0)
        || before[from..]
            .char_indices()
            .any(|(i, c)| c == '/' && from + i + 1 < dot);
    ok.then(|| (&name[..dot], &name[dot + 1..]))
}

/// Metadata members the `webdataset` package skips: a name without `/` that starts and ends
/// with `__`, or whose first path component is `__...__` (the expression `__[^/]*__($|/)`).
pub(crate) fn is_meta(name: &str) -> bool {
    if !name.contains('/') && name.starts_with("__") && name.ends_with("__") {
        return true;
    }
    let first = name.split('/').next().unwrap_or("");
    first.len() >= 4 && first.starts_with("__") && first.ends_with("__")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_extensions_as_base_plus_ext() {
        let cases: &[(&str, Option<(&str, &str)>)] = &[
            ("a.jpg", Some(("a", "jpg"))),
            ("dir/a.seg.PNG", Some(("dir/a", "seg.PNG"))),
            ("d.x/a.b", Some(("d.x/a", "b"))),
            ("x/.a", Some(("x/", "a"))),
            ("x.y/.a", None),
            (".a", None),
            ("noext", None),
            ("a.", Some(("a", ""))),
            ("a//.x", Some(("a//", "x"))),
            ("/.a", Some(("/", "a"))),
            ("a/b/.c.d", Some(("a/b/", "c.d"))),
            ("d.x/y/.a", Some(("d.x/y/", "a"))),
        ];
        for (name, want) in cases {
            assert_eq!(base_plus_ext(name), *want, "{name}");
        }
    }

    #[test]
    fn metadata_names() {
        for name in ["__key__", "__", "___", "__meta__/x.json", "__a__b__"] {
            assert!(is_meta(name), "{name}");
        }
        for name in ["__key__.txt", "__x", "a/__b__", "__/x.y", "_a_"] {
            assert!(!is_meta(name), "{name}");
        }
    }
}

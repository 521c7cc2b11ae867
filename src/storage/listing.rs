//! Local glob listings ([`list_files`]).

use std::path::PathBuf;

/// The paths matching a glob `pattern` (`data/train-*.tfrecord`), sorted by their bytes
/// (tf.data's `list_files` with `shuffle=False`). As in TensorFlow, `*` and `?` match names
/// starting with a dot too, and directories that match are listed with the files.
///
/// This is the synchronous, local-only listing. For tf.data's `Dataset.list_files`, a
/// dataset of the files listed afresh each epoch, local paths and URLs alike, optionally
/// reshuffled each epoch from a seed, use
/// [`Dataset::list_files`](crate::Dataset::list_files).
///
/// # Errors
///
/// When the pattern is invalid, a matching path cannot be read, or nothing matches
/// (TensorFlow's "No files matched pattern: PATTERN").
///
/// ```
/// # fn main() -> anyhow::Result<()> {
/// let dir = tempfile::tempdir()?;
/// for name in ["b.txt", "a.txt", "c.csv"] {
///     std::fs::write(dir.path().join(name), "x\n")?;
/// }
/// let files = streamload::format::list_files(&format!("{}/*.txt", dir.path().display()))?;
/// assert_eq!(files.iter().map(|f| f.file_name().unwrap()).collect::<Vec<_>>(), ["a.txt", "b.txt"]);
/// assert!(streamload::format::list_files(&format!("{}/*.parquet", dir.path().display())).is_err());
/// # Ok(()) }
/// ```
pub fn list_files(pattern: &str) -> anyhow::Result<Vec<PathBuf>> {
    let paths = glob::glob(pattern)
        .map_err(|e| anyhow::anyhow!("invalid file pattern {pattern:?}: {e}"))?;
    let mut files = paths
        .map(|p| p.map_err(|e| anyhow::anyhow!("listing {pattern:?}: {e}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if files.is_empty() {
        // TensorFlow's `InvalidArgumentError`.
        return Err(
            crate::Error::InvalidArgument(format!("No files matched pattern: {pattern}")).into(),
        );
    }
    // By the bytes of the whole path, as TensorFlow sorts (`a-b/x` before `a/x`).
    files.sort_by(|a, b| {
        a.as_os_str()
            .as_encoded_bytes()
            .cmp(b.as_os_str().as_encoded_bytes())
    });
    Ok(files)
}

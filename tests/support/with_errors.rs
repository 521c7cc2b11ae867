//! Exact resume over an epoch whose elements may be errors, shared by the checkpoint, array
//! and distribute tests.

use std::fmt::Debug;

use futures::StreamExt;
use streamload::{Checkpoint, Dataset};

/// For every `k` in `points` (past the epoch's end: its end, once): takes `k` elements,
/// checkpoints (through bytes), resumes from a freshly built recipe, and checks the whole
/// against the uninterrupted epoch, errors compared by their message (`{e:#}`). Returns how
/// many errors the uninterrupted epoch has.
pub(crate) fn assert_exact_with_errors<T, F>(
    make: F,
    points: impl IntoIterator<Item = usize>,
) -> impl std::future::Future<Output = usize> + Send
where
    T: PartialEq + Debug + Send + 'static,
    F: Fn() -> Dataset<T> + Send,
{
    let points: Vec<usize> = points.into_iter().collect();
    async move {
        let as_text = |x: anyhow::Result<T>| x.map_err(|e| format!("{e:#}"));
        let full: Vec<_> = make().iter().map(as_text).collect().await;
        let mut done = None;
        for k in points {
            let k = k.min(full.len());
            if done.replace(k) == Some(k) {
                continue;
            }
            let mut epoch = make().iter();
            let mut seen = Vec::new();
            for _ in 0..k {
                seen.push(as_text(epoch.next().await.expect("an element")));
            }
            let bytes = epoch.checkpoint().expect("checkpoint").to_bytes();
            let cp = Checkpoint::from_bytes(&bytes).expect("from_bytes");
            drop(epoch);
            let rest: Vec<_> = make()
                .iter_from(&cp)
                .expect("iter_from")
                .map(as_text)
                .collect()
                .await;
            seen.extend(rest);
            assert_eq!(seen, full, "resumed at {k}");
        }
        full.iter().filter(|x| x.is_err()).count()
    }
}

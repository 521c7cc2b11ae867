//! The interrupt-and-resume step the distribute tests share: take `k` elements of `first`'s
//! epoch, checkpoint it (through its bytes, as a restarted process would), and go on from
//! that checkpoint with `again`, a fresh copy of the same recipe.

use futures::StreamExt;
use streamload::{Checkpoint, Dataset};

/// The `k` elements taken before the checkpoint followed by all the resumed epoch gave, and
/// the checkpoint (to try on other recipes).
pub(crate) async fn take_then_resume<T: Send + 'static>(
    first: Dataset<T>,
    again: Dataset<T>,
    k: usize,
) -> (Vec<T>, Checkpoint) {
    let mut epoch = first.iter();
    let mut seen = Vec::new();
    for _ in 0..k {
        seen.push(epoch.next().await.expect("an element").expect("no error"));
    }
    let bytes = epoch.checkpoint().expect("checkpoint").to_bytes();
    drop(epoch);
    let checkpoint = Checkpoint::from_bytes(&bytes).expect("the checkpoint's bytes");
    let mut resumed = again.iter_from(&checkpoint).expect("resume");
    while let Some(x) = resumed.next().await {
        seen.push(x.expect("no error in the resumed epoch"));
    }
    (seen, checkpoint)
}

/// What a rank read before it stopped: the first `take` elements of epoch 0 of `plan` (fewer
/// if the epoch ends), as the coverage the rank saves beside its checkpoint, through its
/// bytes.
pub(crate) async fn covered<S: streamload::distribute::ShardSource>(
    plan: &streamload::distribute::ShardPlan<S>,
    take: usize,
) -> streamload::distribute::Coverage {
    let mut coverage = plan.coverage(0);
    let mut epoch = plan.dataset().iter();
    for _ in 0..take {
        match epoch.next().await {
            Some(d) => coverage.add(&d.expect("no error")),
            None => break,
        }
    }
    let bytes = serde_json::to_vec(&coverage).expect("coverage to JSON");
    serde_json::from_slice(&bytes).expect("coverage from JSON")
}

/// Checks an elastic resume: the new ranks (`(batches, coverage)` each) took the same number
/// of batches, and with the old ranks' coverage they read the `total` elements of the epoch
/// once each (disjoint, complete; dropped ones counted).
pub(crate) fn assert_exact_resume(
    what: &str,
    old: &[streamload::distribute::Coverage],
    new: impl IntoIterator<Item = (u64, streamload::distribute::Coverage)>,
    total: u64,
) {
    let (counts, coverage): (std::collections::BTreeSet<u64>, Vec<_>) = new.into_iter().unzip();
    assert_eq!(counts.len(), 1, "{what}: batch counts differ: {counts:?}");
    let mut all = old.to_vec();
    all.extend(coverage);
    let report = streamload::distribute::CoverageReport::merge(&all).expect("merge");
    assert!(report.disjoint(), "{what}: {report}");
    assert!(report.complete(), "{what}: {report}");
    assert_eq!(report.elements + report.dropped, total, "{what}: {report}");
}

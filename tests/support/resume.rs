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

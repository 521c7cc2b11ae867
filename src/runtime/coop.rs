//! Cooperation with tokio's task budget for sources that are always ready.

use std::task::{Context, Poll};

/// Every `EVERY` items, spend one unit of tokio's task budget, so an always-ready source
/// (a range, a vector) yields to the scheduler now and then instead of starving other tasks
/// on its worker (DataFusion's `coop.rs` does the same).
#[derive(Debug, Default)]
pub(crate) struct Coop {
    since: u32,
}

const EVERY: u32 = 32;

impl Coop {
    #[inline]
    pub(crate) fn poll_proceed(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.since += 1;
        if self.since < EVERY {
            return Poll::Ready(());
        }
        self.since = 0;
        match tokio::task::coop::poll_proceed(cx) {
            Poll::Ready(restore) => {
                restore.made_progress();
                Poll::Ready(())
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

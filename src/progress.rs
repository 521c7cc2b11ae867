//! A progress bar for a consumer loop ([indicatif](https://docs.rs/indicatif)).

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::{FusedStream, Stream};
use indicatif::{ProgressBar, ProgressStyle};

use crate::engine::{Cardinality, Dataset, Epoch};

/// An [`Epoch`] that advances a progress bar for every element it yields; made by
/// [`Dataset::iter_with_progress`]. The bar has a length when the dataset's cardinality is
/// known, and is a spinner otherwise; it is finished when the epoch ends.
#[must_use = "streams do nothing unless polled"]
#[derive(Debug)]
pub struct Progress<T> {
    epoch: Epoch<T>,
    bar: ProgressBar,
}

impl<T> Progress<T> {
    /// The bar, e.g. to set a message or to hide it.
    pub fn bar(&self) -> &ProgressBar {
        &self.bar
    }

    /// The epoch being driven (for its [`stats`](Epoch::stats)).
    pub fn epoch(&self) -> &Epoch<T> {
        &self.epoch
    }
}

impl<T: Send + 'static> Dataset<T> {
    /// Starts an epoch (like [`iter`](Dataset::iter)) whose elements advance a progress bar
    /// labelled `label`, sized by the [`cardinality`](Dataset::cardinality) when it is known.
    ///
    /// ```
    /// use futures::StreamExt;
    /// use streamload::Dataset;
    /// # tokio_test::block_on(async {
    /// let mut epoch = Dataset::range(0, 1000).batch(100).iter_with_progress("train");
    /// epoch.bar().set_draw_target(indicatif::ProgressDrawTarget::hidden());
    /// let mut n = 0;
    /// while let Some(batch) = epoch.next().await {
    ///     n += batch?.len();
    /// }
    /// assert_eq!((n, epoch.bar().position(), epoch.bar().length()), (1000, 10, Some(10)));
    /// # anyhow::Ok(()) }).unwrap();
    /// ```
    pub fn iter_with_progress(&self, label: &str) -> Progress<T> {
        let bar = match self.cardinality() {
            Cardinality::Finite(n) => {
                let bar = ProgressBar::new(n);
                bar.set_style(
                    ProgressStyle::with_template(
                        "{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} ({per_sec}, eta {eta})",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
                );
                bar
            }
            _ => {
                let bar = ProgressBar::new_spinner();
                bar.set_style(
                    ProgressStyle::with_template(
                        "{prefix} {spinner} [{elapsed_precise}] {pos} ({per_sec})",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                bar
            }
        };
        bar.set_prefix(label.to_string());
        Progress {
            epoch: self.iter(),
            bar,
        }
    }
}

impl<T> Stream for Progress<T> {
    type Item = anyhow::Result<T>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let item = ready!(Pin::new(&mut self.epoch).poll_next(cx));
        match &item {
            Some(_) => self.bar.inc(1),
            None => self.bar.finish(),
        }
        Poll::Ready(item)
    }
}

impl<T> FusedStream for Progress<T> {
    fn is_terminated(&self) -> bool {
        self.epoch.is_terminated()
    }
}

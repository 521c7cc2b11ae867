//! `range` and `counter`.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::stream::{FusedStream, Stream};

use crate::dataset::{Cardinality, Dataset};
use crate::runtime::Coop;

pub(crate) fn dataset(start: i64, stop: i64, step: i64) -> Dataset<i64> {
    assert!(step != 0, "range: step must be a non-zero integer");
    let len = range_len(start, stop, step);
    Dataset::source("range", Cardinality::Finite(len), move |_| {
        Range::new(start, step, Some(len))
    })
}

pub(crate) fn counter(start: i64, step: i64) -> Dataset<i64> {
    Dataset::source("counter", Cardinality::Infinite, move |_| {
        Range::new(start, step, None)
    })
}

fn range_len(start: i64, stop: i64, step: i64) -> u64 {
    let (span, step) = if step > 0 {
        (i128::from(stop) - i128::from(start), i128::from(step))
    } else {
        (i128::from(start) - i128::from(stop), -i128::from(step))
    };
    if span <= 0 {
        0
    } else {
        ((span + step - 1) / step) as u64
    }
}

/// Stream for [`Dataset::range`] and [`Dataset::counter`].
#[derive(Debug)]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Range {
    next: i64,
    step: i64,
    /// Elements left; `None` counts forever.
    remaining: Option<u64>,
    coop: Coop,
}

impl Range {
    fn new(start: i64, step: i64, len: Option<u64>) -> Self {
        Range {
            next: start,
            step,
            remaining: len,
            coop: Coop::default(),
        }
    }
}

impl Stream for Range {
    type Item = anyhow::Result<i64>;

    #[inline]
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(left) = this.remaining.as_mut() {
            if *left == 0 {
                return Poll::Ready(None);
            }
            *left -= 1;
        }
        if this.coop.poll_proceed(cx).is_pending() {
            if let Some(left) = this.remaining.as_mut() {
                *left += 1;
            }
            return Poll::Pending;
        }
        let x = this.next;
        this.next = x.wrapping_add(this.step);
        Poll::Ready(Some(Ok(x)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self.remaining {
            Some(n) => (n as usize, Some(n as usize)),
            None => (usize::MAX, None),
        }
    }
}

impl FusedStream for Range {
    fn is_terminated(&self) -> bool {
        self.remaining == Some(0)
    }
}

#[cfg(test)]
mod tests {
    use super::range_len;

    #[test]
    fn lengths_match_tf() {
        assert_eq!(range_len(0, 5, 1), 5);
        assert_eq!(range_len(2, 12, 3), 4);
        assert_eq!(range_len(3, -4, -2), 4);
        assert_eq!(range_len(10, 0, -3), 4);
        assert_eq!(range_len(5, 5, 1), 0);
        assert_eq!(range_len(5, 0, 1), 0);
        assert_eq!(range_len(i64::MIN, i64::MAX, i64::MAX), 3);
    }
}

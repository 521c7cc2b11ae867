//! `range` and `counter`.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::{FusedStream, Stream};

use crate::engine::{
    BoxStream, Cardinality, Counting, Ctx, ReplaySource, Source, Start, unsupported,
};
use crate::runtime::Coop;
use crate::stats::StageCounters;

/// The [`range`](crate::Dataset::range) source.
#[derive(Hash)]
pub(crate) struct Range {
    pub(crate) start: i64,
    pub(crate) stop: i64,
    pub(crate) step: i64,
}

impl Source for Range {
    type Out = i64;
    type Stream = BoxStream<i64>;
    const NAME: &'static str = "range";

    /// It counts itself, in laps.
    fn counting(&self) -> Counting {
        Counting::ByStage
    }

    fn cardinality(&self) -> Cardinality {
        Cardinality::Finite(range_len(self.start, self.stop, self.step))
    }

    /// Saved state: `[elements yielded]`; a position is an element's index.
    fn open(&self, ctx: &Ctx, start: Start<'_>) -> anyhow::Result<BoxStream<i64>> {
        let len = range_len(self.start, self.stop, self.step);
        open(ctx, start, self.start, self.step, Some(len))
    }
}

/// The [`counter`](crate::Dataset::counter) source.
#[derive(Hash)]
pub(crate) struct Counter {
    pub(crate) start: i64,
    pub(crate) step: i64,
}

impl Source for Counter {
    type Out = i64;
    type Stream = BoxStream<i64>;
    const NAME: &'static str = "counter";

    /// It counts itself, in laps; with a step of 0 (the same number forever) the distance
    /// walked says nothing about how many were yielded, so a wrapper counts them.
    fn counting(&self) -> Counting {
        if self.step == 0 {
            Counting::Wrapped
        } else {
            Counting::ByStage
        }
    }

    fn cardinality(&self) -> Cardinality {
        Cardinality::Infinite
    }

    /// Saved state: `[elements yielded]`; a position is an element's index.
    fn open(&self, ctx: &Ctx, start: Start<'_>) -> anyhow::Result<BoxStream<i64>> {
        if self.step != 0 {
            return open(ctx, start, self.start, self.step, None);
        }
        let value = self.start;
        Ok(match start {
            Start::Replay(provs) => {
                Box::pin(ReplaySource::new(Arc::clone(provs), "counter", move |_| {
                    Ok(value)
                }))
            }
            Start::Restore(state) => Box::pin(Constant {
                value,
                done: state.word(0)?,
                coop: Coop::default(),
            }),
            Start::Fresh => Box::pin(Constant {
                value,
                done: 0,
                coop: Coop::default(),
            }),
        })
    }
}

/// A range or counter for one epoch: fresh, restored, or replaying saved positions.
fn open(
    ctx: &Ctx,
    start: Start<'_>,
    first: i64,
    step: i64,
    len: Option<u64>,
) -> anyhow::Result<BoxStream<i64>> {
    let value = move |i: u64| first.wrapping_add((i as i64).wrapping_mul(step));
    let mut range = RangeStream::new(first, step, len, ctx.own_counters());
    match start {
        Start::Fresh => {}
        Start::Restore(state) => {
            let done = state.word(0)?;
            range.resume_at(done, value(done));
        }
        Start::Replay(provs) => {
            let stage = range.stage;
            return Ok(Box::pin(ReplaySource::new(
                Arc::clone(provs),
                stage,
                move |i| match len {
                    Some(n) if i >= n => {
                        Err(unsupported(stage, "a saved position is past its end"))
                    }
                    _ => Ok(value(i)),
                },
            )));
        }
    }
    Ok(Box::pin(range))
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
pub(crate) struct RangeStream {
    next: i64,
    step: i64,
    /// Elements left; `None` counts forever.
    remaining: Option<u64>,
    coop: Coop,
    /// The stage's statistics, when the range counts itself: the elements yielded (worked
    /// out from where it stands) are added up at the end of every cooperation lap, at the end
    /// and when dropped, so yielding an element costs nothing more.
    counters: Option<Arc<StageCounters>>,
    start: i64,
    flushed: u64,
    /// Elements of the whole range before `start` (after a restore); with the distance
    /// walked from `start`, the position checkpoints save (nothing counted per element).
    base: u64,
    /// `range` or `counter`.
    stage: &'static str,
}

impl RangeStream {
    fn new(start: i64, step: i64, len: Option<u64>, counters: Option<Arc<StageCounters>>) -> Self {
        RangeStream {
            next: start,
            step,
            remaining: len,
            coop: Coop::default(),
            counters,
            start,
            flushed: 0,
            base: 0,
            stage: if len.is_some() { "range" } else { "counter" },
        }
    }

    /// Goes on after `done` elements, at `next`.
    fn resume_at(&mut self, done: u64, next: i64) {
        self.next = next;
        self.start = next;
        self.base = done;
        if let Some(left) = self.remaining.as_mut() {
            *left = left.saturating_sub(done);
        }
    }

    /// The elements yielded since `start`: the distance walked, in u64 (exact for any range;
    /// a counter wraps after 2^64 steps, which no epoch reaches). A step of 0 is a
    /// [`Constant`].
    fn walked(&self) -> u64 {
        if self.step > 0 {
            self.next.wrapping_sub(self.start) as u64 / self.step as u64
        } else {
            self.start.wrapping_sub(self.next) as u64 / self.step.unsigned_abs().max(1)
        }
    }

    /// Elements of the whole range yielded (its saved position).
    fn done(&self) -> u64 {
        self.base.wrapping_add(self.walked())
    }

    #[cold]
    #[inline(never)]
    fn flush(&mut self) {
        if let Some(counters) = &self.counters {
            let yielded = self.walked();
            counters.add_elements(yielded.saturating_sub(self.flushed));
            self.flushed = yielded;
        }
    }
}

impl Drop for RangeStream {
    fn drop(&mut self) {
        self.flush();
    }
}

impl Stream for RangeStream {
    type Item = anyhow::Result<i64>;

    #[inline]
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(left) = this.remaining.as_mut() {
            if *left == 0 {
                this.flush();
                return Poll::Ready(None);
            }
            *left -= 1;
        }
        let Poll::Ready(lapped) = this.coop.poll_lap(cx) else {
            if let Some(left) = this.remaining.as_mut() {
                *left += 1;
            }
            return Poll::Pending;
        };
        let x = this.next;
        this.next = x.wrapping_add(this.step);
        if lapped {
            this.flush();
        }
        Poll::Ready(Some(Ok(x)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self.remaining {
            Some(n) => (n as usize, Some(n as usize)),
            None => (usize::MAX, None),
        }
    }
}

crate::engine::numbered_source!(impl[] RangeStream, |s| s.stage, s.done());

/// A `counter` with a step of 0: the same number forever, counting what it yielded (its
/// saved position).
struct Constant {
    value: i64,
    done: u64,
    coop: Coop,
}

impl Stream for Constant {
    type Item = anyhow::Result<i64>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let Poll::Ready(_) = this.coop.poll_lap(cx) else {
            return Poll::Pending;
        };
        this.done += 1;
        Poll::Ready(Some(Ok(this.value)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (usize::MAX, None)
    }
}

crate::engine::numbered_source!(impl[] Constant, |s| "counter", s.done);

impl FusedStream for RangeStream {
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

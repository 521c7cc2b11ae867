//! Bounded channels that hand elements over in chunks.
//!
//! Sending one element at a time costs a thread wake-up per element: the consumer wakes for
//! every element when it is faster, the producer when it is slower. Here elements travel in
//! chunks, so both sides sleep and wake once per chunk, while a slow producer still delivers
//! each element without delay:
//!
//! - [`forward`] (async producers) sends whatever the upstream has ready *now*, up to
//!   `max_chunk`: one element when the upstream is slow, full chunks when it is fast.
//! - [`ChunkSender::blocking_send`] (blocking generators, whose items are always "ready")
//!   sends a chunk when it is full, or when its first element has waited [`MAX_DELAY`].
//!
//! Bound: one chunk waiting in the channel and one being gathered or sent, each at most
//! `max_chunk`, plus what is left of the chunk the consumer is reading.

use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use std::sync::Arc;

use futures::FutureExt;
use futures::stream::{Stream, StreamExt};
use tokio::sync::mpsc;

use crate::stats::StageCounters;

/// The longest a blocking producer holds an element back to fill a chunk.
pub(crate) const MAX_DELAY: Duration = Duration::from_micros(200);

/// The consumer has gone.
#[derive(Debug)]
pub(crate) struct Closed;

/// The consumer side.
#[derive(Debug)]
pub(crate) struct ChunkReceiver<T> {
    rx: mpsc::Receiver<Vec<T>>,
    current: std::vec::IntoIter<T>,
    gauge: Option<Arc<StageCounters>>,
}

/// A chunked channel: at most `max_chunk` elements per chunk, one chunk in the channel.
pub(crate) fn chunk_channel<T>(max_chunk: usize) -> (ChunkSender<T>, ChunkReceiver<T>) {
    let (tx, rx) = mpsc::channel(1);
    (
        ChunkSender {
            tx,
            pending: Vec::new(),
            first_at: None,
            max_chunk: max_chunk.max(1),
            gauge: None,
            work: None,
        },
        ChunkReceiver {
            rx,
            current: Vec::new().into_iter(),
            gauge: None,
        },
    )
}

/// A chunked channel holding at most `buffer` elements (chunks of half of it) that reports
/// its fill and its producer's waits for room to `gauge` (a stage's statistics).
pub(crate) fn gauged_chunk_channel<T>(
    buffer: usize,
    gauge: Option<Arc<StageCounters>>,
) -> (ChunkSender<T>, ChunkReceiver<T>) {
    let (mut tx, mut rx) = chunk_channel(buffer.div_ceil(2));
    tx.gauge.clone_from(&gauge);
    rx.gauge = gauge;
    (tx, rx)
}

/// Forwards `input` into `tx` in chunks: each chunk holds what is ready at once (up to the
/// chunk size), so a fast input is handed over in few wake-ups and a slow one without delay.
pub(crate) async fn forward<S>(mut input: S, mut tx: ChunkSender<S::Item>)
where
    S: Stream + Unpin,
{
    loop {
        let Some(first) = input.next().await else {
            return;
        };
        let max_chunk = tx.max_chunk;
        let mut chunk = Vec::with_capacity(max_chunk.min(64));
        chunk.push(first);
        let mut ended = false;
        while chunk.len() < max_chunk {
            match input.next().now_or_never() {
                Some(Some(item)) => chunk.push(item),
                Some(None) => {
                    ended = true;
                    break;
                }
                None => break, // nothing more ready now: hand over what there is
            }
        }
        if tx.send_chunk(chunk).await.is_err() || ended {
            return;
        }
    }
}

/// The producer side, for [`forward`] or for a blocking thread.
#[derive(Debug)]
pub(crate) struct ChunkSender<T> {
    tx: mpsc::Sender<Vec<T>>,
    pending: Vec<T>,
    /// When the oldest pending element arrived.
    first_at: Option<Instant>,
    max_chunk: usize,
    gauge: Option<Arc<StageCounters>>,
    /// A blocking producer's stage, and since when its thread has worked unaccounted.
    work: Option<(Arc<StageCounters>, Instant)>,
}

impl<T> ChunkSender<T> {
    /// Hands over a whole chunk, waiting for room; `Err` once the receiver is gone. The
    /// chunk's elements count in the gauge while they wait (as [`forward`]'s do).
    pub(crate) async fn send_chunk(&mut self, chunk: Vec<T>) -> Result<(), Closed> {
        let len = chunk.len();
        let full_since = match &self.gauge {
            Some(gauge) => {
                gauge.add_buffered(len);
                (self.tx.capacity() == 0).then(Instant::now)
            }
            None => None,
        };
        self.tx.send(chunk).await.map_err(|_| Closed)?;
        if let (Some(since), Some(gauge)) = (full_since, &self.gauge) {
            gauge.add_full_wait(since.elapsed());
        }
        Ok(())
    }

    /// Counts the calling thread's time, from now on, as `stage`'s worker time, less the
    /// time it waits for room in the channel: a blocking producer's busy time (the clock
    /// is read twice per chunk, never per element).
    pub(crate) fn time_work(&mut self, stage: Arc<StageCounters>) {
        self.work = Some((stage, Instant::now()));
    }

    /// Adds `item` from a blocking thread (never from async code); sends the gathered chunk
    /// when it is full or its first element has waited [`MAX_DELAY`], waiting for room.
    pub(crate) fn blocking_send(&mut self, item: T) -> Result<(), Closed> {
        self.pending.push(item);
        let first_at = *self.first_at.get_or_insert_with(Instant::now);
        if self.pending.len() >= self.max_chunk || first_at.elapsed() >= MAX_DELAY {
            self.blocking_flush()?;
        }
        Ok(())
    }

    /// Sends what is gathered (from a blocking thread), waiting for room.
    pub(crate) fn blocking_flush(&mut self) -> Result<(), Closed> {
        self.first_at = None;
        if let Some((stage, since)) = &mut self.work {
            let now = Instant::now();
            stage.add_worker_time(now - *since);
            *since = now;
        }
        if self.pending.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::take(&mut self.pending);
        let sent = self.tx.blocking_send(chunk).map_err(|_| Closed);
        if let Some((_, since)) = &mut self.work {
            *since = Instant::now();
        }
        sent
    }
}

impl<T> ChunkReceiver<T> {
    /// The next element, `None` once the sender is gone and everything was received.
    pub(crate) fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        loop {
            if let Some(item) = self.current.next() {
                return Poll::Ready(Some(item));
            }
            match ready!(self.rx.poll_recv(cx)) {
                Some(chunk) => {
                    if let Some(gauge) = &self.gauge {
                        gauge.sub_buffered(chunk.len());
                    }
                    self.current = chunk.into_iter();
                }
                None => return Poll::Ready(None),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn drain(mut rx: ChunkReceiver<u32>) -> Vec<u32> {
        let mut got = Vec::new();
        while let Some(x) = std::future::poll_fn(|cx| rx.poll_recv(cx)).await {
            got.push(x);
        }
        got
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn forward_delivers_everything_in_order() {
        let (tx, rx) = chunk_channel::<u32>(4);
        let producer = tokio::spawn(forward(futures::stream::iter(0..1000), tx));
        assert_eq!(drain(rx).await, (0..1000).collect::<Vec<_>>());
        assert!(producer.await.is_ok());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn blocking_sends_deliver_everything_in_order() {
        let (mut tx, rx) = chunk_channel::<u32>(4);
        let producer = tokio::task::spawn_blocking(move || {
            for i in 0..1000 {
                tx.blocking_send(i).map_err(|_| "closed")?;
            }
            tx.blocking_flush().map_err(|_| "closed")
        });
        assert_eq!(drain(rx).await, (0..1000).collect::<Vec<_>>());
        assert!(producer.await.is_ok_and(|r| r.is_ok()));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn forward_holds_at_most_two_chunks_ahead() {
        let produced = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = std::sync::Arc::clone(&produced);
        let input = futures::stream::iter(0..1000u32).inspect(move |_| {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
        let (tx, rx) = chunk_channel::<u32>(4);
        let _producer = tokio::spawn(forward(input, tx));
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Nobody received: one chunk in the channel, one waiting to be sent.
        assert!(produced.load(std::sync::atomic::Ordering::SeqCst) <= 8);
        drop(rx);
    }

    #[tokio::test]
    async fn blocking_send_fails_once_the_receiver_is_gone() {
        let (mut tx, rx) = chunk_channel::<u32>(1);
        drop(rx);
        assert!(
            tokio::task::spawn_blocking(move || tx.blocking_send(1))
                .await
                .is_ok_and(|r| r.is_err())
        );
    }
}

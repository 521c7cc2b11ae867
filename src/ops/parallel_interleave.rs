use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::{Fuse, FusedStream, Stream, StreamExt};

use crate::dataset::{BoxStream, Ctx, Dataset};
use crate::ops::interleave::{Cycle, Slot, open};
use crate::ops::prefetch::poll_task_end;
use crate::runtime::{self, ChunkReceiver, Task, forward, gauged_chunk_channel};
use crate::stats::StageCounters;

const STAGE: &str = "parallel_interleave";

/// The knobs of one parallel interleave.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Config {
    pub(crate) cycle_length: usize,
    pub(crate) block_length: usize,
    /// Inner datasets opened ahead of the cursor, beyond the cycle.
    pub(crate) prefetch_input_elements: usize,
    /// Elements a reader task may hold ready ahead of the consumer.
    pub(crate) buffer_output_elements: usize,
    pub(crate) deterministic: bool,
}

/// One inner dataset, driven by a task of its own that hands over chunks of ready elements.
struct Reader<U> {
    rx: ChunkReceiver<anyhow::Result<U>>,
    /// `Some` until the task has been joined.
    task: Option<Task<()>>,
}

impl<U: Send + 'static> Reader<U> {
    /// Holds at most `buffer` elements ahead of the consumer, handed over in chunks of up to
    /// `buffer / 2` (see `runtime::chunks`), plus what is left of the chunk being read. The
    /// elements it holds count in `gauge` (the stage's buffer fill, summed over its readers).
    fn spawn(
        inner: BoxStream<U>,
        buffer: usize,
        gauge: Option<Arc<StageCounters>>,
    ) -> anyhow::Result<Self> {
        let (tx, rx) = gauged_chunk_channel(buffer, gauge);
        let task = runtime::spawn(STAGE, forward(inner, tx))?;
        Ok(Reader {
            rx,
            task: Some(task),
        })
    }

    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<anyhow::Result<U>>> {
        if let Some(item) = ready!(self.rx.poll_recv(cx)) {
            return Poll::Ready(Some(item));
        }
        // The task ended: cleanly, or by a panic that must not pass for an end.
        let Some(task) = self.task.as_mut() else {
            return Poll::Ready(None);
        };
        let end = ready!(poll_task_end(task, STAGE, cx));
        self.task = None;
        Poll::Ready(end.map(Err))
    }
}

impl<U> Slot<U> for Reader<U>
where
    U: Send + 'static,
{
    fn poll_slot(&mut self, cx: &mut Context<'_>) -> Poll<Option<anyhow::Result<U>>> {
        self.poll_next(cx)
    }
}

/// The input side: turns input elements into reader tasks, some of them ahead of the cursor.
struct Opener<T, U, F> {
    input: Fuse<BoxStream<T>>,
    f: Arc<F>,
    ctx: Ctx,
    config: Config,
    /// Readers opened ahead of the cursor, in input order (or the error met opening one).
    ahead: VecDeque<anyhow::Result<Reader<U>>>,
}

impl<T, U, F> Opener<T, U, F>
where
    T: Send + 'static,
    U: Send + 'static,
    F: Fn(T) -> Dataset<U>,
{
    fn inputs_left(&self) -> bool {
        !self.input.is_terminated() || !self.ahead.is_empty()
    }

    fn start(&self, x: T) -> anyhow::Result<Reader<U>> {
        Reader::spawn(
            open(&*self.f, x, &self.ctx, STAGE)?,
            self.config.buffer_output_elements,
            self.ctx.stats_handle(),
        )
    }

    /// Opens inner datasets ahead of the cursor, as far as the input has elements ready.
    fn fill_ahead(&mut self, cx: &mut Context<'_>) {
        while self.ahead.len() < self.config.prefetch_input_elements && !self.input.is_terminated()
        {
            match self.input.poll_next_unpin(cx) {
                Poll::Ready(Some(x)) => {
                    let reader = x.and_then(|x| self.start(x));
                    self.ahead.push_back(reader);
                }
                Poll::Ready(None) | Poll::Pending => break,
            }
        }
    }

    /// The next reader in input order; `Ready(None)` once the input has ended.
    fn next_reader(&mut self, cx: &mut Context<'_>) -> Poll<Option<anyhow::Result<Reader<U>>>> {
        let next = match self.ahead.pop_front() {
            Some(r) => Some(r),
            None if self.input.is_terminated() => None,
            None => ready!(self.input.poll_next_unpin(cx)).map(|x| x.and_then(|x| self.start(x))),
        };
        self.fill_ahead(cx);
        Poll::Ready(next)
    }
}

/// Stream for the [`parallel_interleave`](crate::Dataset::parallel_interleave) method.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct ParallelInterleave<T, U, F> {
    opener: Opener<T, U, F>,
    cycle: Cycle<Reader<U>>,
}

// Elements are never pinned in place: they sit in queues and are moved out.
impl<T, U, F> Unpin for ParallelInterleave<T, U, F> {}

impl<T, U, F> ParallelInterleave<T, U, F>
where
    T: Send + 'static,
    U: Send + 'static,
    F: Fn(T) -> Dataset<U>,
{
    pub(crate) fn new(input: BoxStream<T>, f: Arc<F>, ctx: Ctx, config: Config) -> Self {
        ctx.gauge();
        ParallelInterleave {
            opener: Opener {
                input: input.fuse(),
                f,
                ctx,
                config,
                ahead: VecDeque::new(),
            },
            cycle: Cycle::new(config.cycle_length, config.block_length).counting_errors_in_blocks(),
        }
    }

    /// First ready: fill every free slot at once, then take from the first slot, from the
    /// cursor on, that has an element ready.
    fn poll_first_ready(&mut self, cx: &mut Context<'_>) -> Poll<Option<anyhow::Result<U>>> {
        let Self { opener, cycle } = self;
        let len = cycle.slots.len();
        loop {
            for i in 0..len {
                if cycle.slots[i].is_some() || !opener.inputs_left() {
                    continue;
                }
                match opener.next_reader(cx) {
                    Poll::Ready(Some(Ok(reader))) => cycle.open(i, reader),
                    Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                    Poll::Ready(None) | Poll::Pending => break,
                }
            }
            if !opener.inputs_left() && cycle.num_open == 0 {
                return Poll::Ready(None);
            }
            let mut freed = false;
            for k in 0..len {
                let i = (cycle.cycle_index + k) % len;
                let Some(reader) = &mut cycle.slots[i] else {
                    continue;
                };
                match reader.poll_next(cx) {
                    Poll::Ready(Some(item)) => {
                        if item.is_ok() {
                            cycle.advance_position(i);
                        }
                        return Poll::Ready(Some(item));
                    }
                    Poll::Ready(None) => {
                        cycle.close(i);
                        freed = true;
                    }
                    Poll::Pending => {}
                }
            }
            if !freed {
                return Poll::Pending;
            }
        }
    }
}

impl<T, U, F> Stream for ParallelInterleave<T, U, F>
where
    T: Send + 'static,
    U: Send + 'static,
    F: Fn(T) -> Dataset<U>,
{
    type Item = anyhow::Result<U>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        this.opener.fill_ahead(cx);
        if !this.opener.config.deterministic {
            return this.poll_first_ready(cx);
        }
        let ParallelInterleave { opener, cycle } = this;
        cycle.poll_in_order(cx, |cx| opener.next_reader(cx))
    }
}

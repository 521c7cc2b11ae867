use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::{Fuse, Stream, StreamExt};

use crate::dataset::{BoxStream, Ctx, Dataset};
use crate::ops::interleave::{Cursor, open};
use crate::ops::prefetch::poll_task_end;
use crate::runtime::{self, ChunkReceiver, Task, chunk_channel, forward};

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
    /// `buffer / 2` (see `runtime::chunks`), plus what is left of the chunk being read.
    fn spawn(inner: BoxStream<U>, buffer: usize) -> anyhow::Result<Self> {
        let (tx, rx) = chunk_channel(buffer.div_ceil(2));
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

/// Stream for the [`parallel_interleave`](crate::Dataset::parallel_interleave) method.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct ParallelInterleave<T, U, F> {
    input: Fuse<BoxStream<T>>,
    f: Arc<F>,
    ctx: Ctx,
    config: Config,
    slots: Vec<Option<Reader<U>>>,
    /// Readers opened ahead of the cursor, in input order (or the error met opening one).
    ahead: VecDeque<anyhow::Result<Reader<U>>>,
    cursor: Cursor,
    num_open: usize,
    end_of_input: bool,
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
        ParallelInterleave {
            input: input.fuse(),
            f,
            ctx,
            config,
            slots: (0..config.cycle_length).map(|_| None).collect(),
            ahead: VecDeque::new(),
            cursor: Cursor::new(config.cycle_length, config.block_length),
            num_open: 0,
            end_of_input: false,
        }
    }

    fn inputs_left(&self) -> bool {
        !self.end_of_input || !self.ahead.is_empty()
    }

    fn start(&self, x: T) -> anyhow::Result<Reader<U>> {
        Reader::spawn(
            open(&*self.f, x, &self.ctx, STAGE)?,
            self.config.buffer_output_elements,
        )
    }

    /// Opens inner datasets ahead of the cursor, as far as the input has elements ready.
    fn fill_ahead(&mut self, cx: &mut Context<'_>) {
        while self.ahead.len() < self.config.prefetch_input_elements && !self.end_of_input {
            match self.input.poll_next_unpin(cx) {
                Poll::Ready(Some(Ok(x))) => {
                    let reader = self.start(x);
                    self.ahead.push_back(reader);
                }
                Poll::Ready(Some(Err(e))) => self.ahead.push_back(Err(e)),
                Poll::Ready(None) => self.end_of_input = true,
                Poll::Pending => break,
            }
        }
    }

    /// The next reader in input order; `Ready(None)` once the input has ended.
    fn next_reader(&mut self, cx: &mut Context<'_>) -> Poll<Option<anyhow::Result<Reader<U>>>> {
        if let Some(r) = self.ahead.pop_front() {
            return Poll::Ready(Some(r));
        }
        if self.end_of_input {
            return Poll::Ready(None);
        }
        match ready!(self.input.poll_next_unpin(cx)) {
            Some(Ok(x)) => Poll::Ready(Some(self.start(x))),
            Some(Err(e)) => Poll::Ready(Some(Err(e))),
            None => {
                self.end_of_input = true;
                Poll::Ready(None)
            }
        }
    }

    /// tf.data's order: the same walk as sequential interleave, over reader tasks.
    fn poll_deterministic(&mut self, cx: &mut Context<'_>) -> Poll<Option<anyhow::Result<U>>> {
        while self.inputs_left() || self.num_open > 0 {
            let ci = self.cursor.cycle_index;
            if let Some(reader) = &mut self.slots[ci] {
                match ready!(reader.poll_next(cx)) {
                    Some(Ok(x)) => {
                        self.cursor.advance_position();
                        return Poll::Ready(Some(Ok(x)));
                    }
                    Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                    None => {
                        self.slots[ci] = None;
                        self.num_open -= 1;
                        self.cursor.advance_to_next_in_cycle();
                    }
                }
            } else if self.inputs_left() {
                match ready!(self.next_reader(cx)) {
                    Some(Ok(reader)) => {
                        self.slots[ci] = Some(reader);
                        self.num_open += 1;
                        self.fill_ahead(cx);
                    }
                    Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                    None => {}
                }
            } else {
                self.cursor.advance_to_next_in_cycle();
            }
        }
        Poll::Ready(None)
    }

    /// First ready: fill every free slot at once, then take from the first slot, from the
    /// cursor on, that has an element ready.
    fn poll_first_ready(&mut self, cx: &mut Context<'_>) -> Poll<Option<anyhow::Result<U>>> {
        let cycle = self.config.cycle_length;
        loop {
            for i in 0..cycle {
                if self.slots[i].is_some() || !self.inputs_left() {
                    continue;
                }
                match self.next_reader(cx) {
                    Poll::Ready(Some(Ok(reader))) => {
                        self.slots[i] = Some(reader);
                        self.num_open += 1;
                    }
                    Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                    Poll::Ready(None) | Poll::Pending => break,
                }
            }
            self.fill_ahead(cx);
            if !self.inputs_left() && self.num_open == 0 {
                return Poll::Ready(None);
            }
            let mut freed = false;
            for k in 0..cycle {
                let i = (self.cursor.cycle_index + k) % cycle;
                let Some(reader) = &mut self.slots[i] else {
                    continue;
                };
                match reader.poll_next(cx) {
                    Poll::Ready(Some(item)) => {
                        if k != 0 {
                            self.cursor.jump_to(i);
                        }
                        if item.is_ok() {
                            self.cursor.advance_position();
                        }
                        return Poll::Ready(Some(item));
                    }
                    Poll::Ready(None) => {
                        self.slots[i] = None;
                        self.num_open -= 1;
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
        this.fill_ahead(cx);
        if this.config.deterministic {
            this.poll_deterministic(cx)
        } else {
            this.poll_first_ready(cx)
        }
    }
}

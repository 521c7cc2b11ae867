//! Saved state ([`scan_resumable`](crate::Dataset::scan_resumable) only): `[n, then the
//! running state's postcard encoding, n bytes packed 8 to a word]` (`n = u64::MAX` once the
//! stage has ended: its input ended, or a panic in `f`), and the input's state.
//!
//! Position of an element (when a stage downstream holds elements by position): a group of
//! one, its input element's position, with the running state before it packed as above: a
//! replay reads the input elements again and applies `f` to each with its saved state.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use pin_project::pin_project;

use crate::checkpoint::{Prov, State};
use serde::Serialize;

use crate::engine::{BoxStream, Cardinality, Ctx, Dataset, Input, Operation, Start, Unkeyed};
use crate::engine::{Opaque, Resumable, unsupported};

const STAGE: &str = "scan";

/// How a serializable running state is saved and read back.
pub(crate) struct Codec<S> {
    pub(crate) save: fn(&S) -> anyhow::Result<Vec<u8>>,
    pub(crate) load: fn(&[u8]) -> anyhow::Result<S>,
}

impl<S> Clone for Codec<S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for Codec<S> {}

impl<S: Serialize> Codec<S> {
    /// Postcard's encoding of `state`.
    fn save_bytes(state: &S) -> anyhow::Result<Vec<u8>> {
        postcard::to_allocvec(state).map_err(|e| {
            unsupported(
                STAGE,
                &format!("its running state cannot be serialized: {e}"),
            )
        })
    }
}

impl<S: Serialize + serde::de::DeserializeOwned> Codec<S> {
    /// Postcard's encoding, as checkpoints use it.
    pub(crate) fn postcard() -> Self {
        Codec {
            save: Self::save_bytes,
            load: |bytes| {
                postcard::from_bytes(bytes).map_err(|e| {
                    crate::Error::Checkpoint(format!(
                        "the saved running state of `scan` cannot be read back: {e}"
                    ))
                    .into()
                })
            },
        }
    }
}

/// The [`scan`](crate::Dataset::scan) and [`scan_resumable`](crate::Dataset::scan_resumable)
/// operations: a running state over the elements, saved by checkpoints when it serializes
/// (`codec`). The initial state is keyed by its serialized bytes (`key`, 0 for `scan`, whose
/// state need not serialize and is never restored).
pub(crate) struct Scan<S, F> {
    pub(crate) initial: Unkeyed<S>,
    pub(crate) f: Unkeyed<Arc<F>>,
    pub(crate) codec: Unkeyed<Option<Codec<S>>>,
    pub(crate) key: u64,
}

crate::engine::keyed_fields!(impl[S, F] Scan<S, F> { keyed: [key], unkeyed: [initial, f, codec] });

impl<S: Serialize> Scan<S, ()> {
    /// The key of a serializable initial state.
    pub(crate) fn key_of(initial: &S) -> u64 {
        (Codec::<S>::save_bytes)(initial).map_or(0, |bytes| {
            bytes
                .iter()
                .fold(0x5CA7, |h, &b| crate::hash::mix64(h ^ u64::from(b)))
        })
    }
}

impl<T, S, F, U> Operation<T> for Scan<S, F>
where
    T: Send + 'static,
    S: Clone + Send + Sync + 'static,
    U: Send + 'static,
    F: Fn(S, T) -> (S, U) + Send + Sync + 'static,
{
    type Out = U;
    type Stream = ScanStream<BoxStream<T>, S, F>;
    const NAME: &'static str = STAGE;

    fn cardinality(&self, input: Cardinality) -> Cardinality {
        input
    }

    fn resumable(&self) -> bool {
        self.codec.is_some()
    }

    /// See [`build`]: the start is the context's.
    fn open(&self, ctx: &Ctx, input: Input<'_, T>, _: Start<'_>) -> anyhow::Result<Self::Stream> {
        Ok(build(
            ctx,
            input.dataset(),
            &self.initial,
            &self.f,
            *self.codec,
        ))
    }
}

/// The scan of one epoch: fresh, or (with a codec) restored with its saved running state.
/// Its elements cannot be replayed by position (each depends on all before it).
fn build<T: Send + 'static, S: Clone, F>(
    ctx: &Ctx,
    input: &Dataset<T>,
    initial: &S,
    f: &Arc<F>,
    codec: Option<Codec<S>>,
) -> ScanStream<BoxStream<T>, S, F> {
    let fail = |e| {
        let empty: BoxStream<T> = Box::pin(Opaque::new(futures::stream::empty(), STAGE));
        let mut scan = ScanStream::new(empty, None, Arc::clone(f), codec);
        scan.failed = Some(e);
        scan
    };
    if let Some(provs) = ctx.replaying() {
        let Some(codec) = codec else {
            return fail(not_placeable());
        };
        let mut inner = Vec::with_capacity(provs.len());
        let mut states = VecDeque::with_capacity(provs.len());
        for prov in provs.iter() {
            match prov {
                Prov::Group(members, words) if members.len() == 1 => {
                    inner.push(members[0].clone());
                    states.push_back(words.to_vec());
                }
                // An error of the input passed on (see `error_position`): no state.
                Prov::Group(members, words) if members.len() == 2 && words.is_empty() => {
                    inner.push(members[0].clone());
                }
                other => {
                    return fail(unsupported(
                        STAGE,
                        &format!("saved position is not a scan's: {other:?}"),
                    ));
                }
            }
        }
        let replayed = input.build(&ctx.for_input(0).with_replay(inner.into()));
        let mut scan = ScanStream::new(replayed, Some(initial.clone()), Arc::clone(f), Some(codec));
        scan.record = true;
        scan.replay = Some(states);
        return scan;
    }
    // As every stage: positions are recorded when asked for, or when the input is not small
    // (a stage downstream then holds elements by position without asking).
    let record = (ctx.provenance() || !input.is_small()) && codec.is_some();
    let (Some(state), Some(codec)) = (ctx.restoring(), codec) else {
        let mut scan = ScanStream::new(
            input.build(ctx),
            Some(initial.clone()),
            Arc::clone(f),
            codec,
        );
        scan.record = record;
        return scan;
    };
    match unpack(&state.words).and_then(|bytes| bytes.map(|b| (codec.load)(&b)).transpose()) {
        Ok(running) => {
            let mut scan = ScanStream::new(
                input.build(&ctx.for_input(0)),
                running,
                Arc::clone(f),
                Some(codec),
            );
            scan.record = record;
            scan
        }
        Err(e) => fail(e),
    }
}

fn not_placeable() -> anyhow::Error {
    unsupported(
        STAGE,
        "its elements depend on the running state before them, which is not serializable: \
         use scan_resumable, or put the stage that holds elements by position (a shuffle) \
         before the scan",
    )
}

/// `bytes`' length, then the bytes 8 to a word (little-endian).
fn pack(bytes: &[u8]) -> Vec<u64> {
    let mut words = Vec::with_capacity(1 + bytes.len().div_ceil(8));
    words.push(bytes.len() as u64);
    for chunk in bytes.chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        words.push(u64::from_le_bytes(word));
    }
    words
}

/// [`pack`]'s bytes back; `None` for an ended scan.
fn unpack(words: &[u64]) -> anyhow::Result<Option<Vec<u8>>> {
    let malformed = || State::new(STAGE).malformed();
    let (&n, rest) = words.split_first().ok_or_else(malformed)?;
    if n == u64::MAX {
        return Ok(None);
    }
    let n = usize::try_from(n).map_err(|_| malformed())?;
    if rest.len() != n.div_ceil(8) {
        return Err(malformed());
    }
    let mut bytes: Vec<u8> = rest.iter().flat_map(|w| w.to_le_bytes()).collect();
    bytes.truncate(n);
    Ok(Some(bytes))
}

/// Stream for the [`scan`](crate::Dataset::scan) and
/// [`scan_resumable`](crate::Dataset::scan_resumable) methods.
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub(crate) struct ScanStream<St, S, F> {
    #[pin]
    input: St,
    /// `None` only while `f` runs (or after it panicked, which ends the stream).
    state: Option<S>,
    f: Arc<F>,
    /// How to save the running state (`scan_resumable`).
    codec: Option<Codec<S>>,
    /// A restore that failed: yielded first, then the stream ends.
    failed: Option<anyhow::Error>,
    /// Each element's position is recorded (a stage downstream holds them by position).
    record: bool,
    /// The last element's position, when recorded (or why it could not be).
    last: Option<Result<Prov, String>>,
    /// In replay: the packed running state before each element still to come.
    replay: Option<VecDeque<Vec<u64>>>,
}

impl<St, S, F> ScanStream<St, S, F> {
    pub(crate) fn new(input: St, state: Option<S>, f: Arc<F>, codec: Option<Codec<S>>) -> Self {
        ScanStream {
            input,
            state,
            f,
            codec,
            failed: None,
            record: false,
            last: None,
            replay: None,
        }
    }
}

impl<St, S, F, T, U> Stream for ScanStream<St, S, F>
where
    St: Stream<Item = anyhow::Result<T>> + Resumable,
    F: Fn(S, T) -> (S, U),
{
    type Item = anyhow::Result<U>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        if let Some(e) = this.failed.take() {
            return Poll::Ready(Some(Err(e)));
        }
        if this.state.is_none() {
            return Poll::Ready(None);
        }
        // The state is taken only once the input has answered: a pending input keeps it.
        let item = ready!(this.input.as_mut().poll_next(cx));
        let Some(mut state) = this.state.take() else {
            return Poll::Ready(None);
        };
        match item {
            Some(Ok(x)) => {
                if let Some(replay) = this.replay.as_mut() {
                    // The running state this element was made with, saved with its position.
                    let codec = this.codec.as_ref();
                    let saved = replay.pop_front().ok_or_else(|| {
                        unsupported(STAGE, "replay yielded more elements than asked for")
                    });
                    let loaded = saved.and_then(|words| {
                        let bytes = unpack(&words)?.ok_or_else(|| State::new(STAGE).malformed())?;
                        codec.map_or_else(|| Err(not_placeable()), |c| (c.load)(&bytes))
                    });
                    match loaded {
                        Ok(saved) => state = saved,
                        Err(e) => {
                            *this.state = Some(state);
                            return Poll::Ready(Some(Err(e)));
                        }
                    }
                }
                if *this.record {
                    *this.last = Some(position(this.input.as_ref().get_ref(), &state, *this.codec));
                }
                let f = &**this.f;
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(state, x))) {
                    Ok((next, out)) => {
                        *this.state = Some(next);
                        Poll::Ready(Some(Ok(out)))
                    }
                    // The state is lost with the panic: report it and end.
                    Err(payload) => {
                        let message = crate::error::panic_message(payload.as_ref());
                        Poll::Ready(Some(Err(crate::Error::WorkerPanicked {
                            stage: STAGE,
                            message,
                        }
                        .into())))
                    }
                }
            }
            Some(Err(e)) => {
                *this.state = Some(state);
                if *this.record {
                    *this.last = Some(error_position(this.input.as_ref().get_ref()));
                }
                Poll::Ready(Some(Err(e)))
            }
            None => Poll::Ready(None),
        }
    }
}

/// The position of an error of the input, passed on without a step of the scan: the input's
/// position, marked (a second, empty member) so a replay takes no running state for it.
fn error_position<St: Resumable>(input: &St) -> Result<Prov, String> {
    let inner = input.last_prov().map_err(|e| format!("{e:#}"))?;
    Ok(Prov::Group(
        vec![inner, Prov::group(Vec::new())],
        Default::default(),
    ))
}

/// The position of the element about to be made from `state` and the input's last element.
fn position<St: Resumable, S>(
    input: &St,
    state: &S,
    codec: Option<Codec<S>>,
) -> Result<Prov, String> {
    let words = codec
        .ok_or_else(not_placeable)
        .and_then(|c| (c.save)(state))
        .map_err(|e| format!("{e:#}"))?;
    let inner = input.last_prov().map_err(|e| format!("{e:#}"))?;
    Ok(Prov::Group(vec![inner], pack(&words).into()))
}

impl<St: Resumable, S, F> Resumable for ScanStream<St, S, F> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.project();
        let codec = this.codec.ok_or_else(|| {
            unsupported(
                STAGE,
                "its running state is not serializable: use scan_resumable, whose state is \
                 `Serialize + DeserializeOwned`",
            )
        })?;
        let words = match this.state.as_ref() {
            Some(state) => pack(&(codec.save)(state)?),
            None => vec![u64::MAX],
        };
        Ok(State::new(STAGE).words(words).input(this.input.save()?))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        match &self.last {
            Some(Ok(prov)) => Ok(prov.clone()),
            Some(Err(why)) => Err(crate::Error::Checkpoint(why.clone()).into()),
            None if self.codec.is_none() => Err(not_placeable()),
            None => Err(unsupported(
                STAGE,
                "the positions of its elements were not recorded",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::{pack, unpack};
    use crate::Dataset;

    #[tokio::test]
    async fn a_pending_input_keeps_the_running_state() {
        // Every element comes after a `Pending` (a yield): the scan must not end there.
        let ds = Dataset::from_stream(|| {
            futures::stream::iter(1..=5).then(|x| async move {
                tokio::task::yield_now().await;
                anyhow::Ok(x)
            })
        })
        .scan(0, |s, x| (s + x, s + x));
        assert_eq!(ds.collect().await.unwrap(), [1, 3, 6, 10, 15]);
    }

    #[test]
    fn bytes_pack_into_words_and_back() {
        for n in [0, 1, 7, 8, 9, 23] {
            let bytes: Vec<u8> = (0..n as u8).map(|b| b.wrapping_mul(37)).collect();
            assert_eq!(unpack(&pack(&bytes)).unwrap(), Some(bytes));
        }
        assert_eq!(unpack(&[u64::MAX]).unwrap(), None);
        assert!(unpack(&[9, 1]).is_err());
    }
}

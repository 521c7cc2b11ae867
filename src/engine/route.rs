//! Replay through a stage whose elements each come from one part: an input of a stage with
//! several (`concatenate`, `sample_from_datasets`, `choose_from_datasets`, `cache`), one
//! repetition of `repeat`'s input, or one element of its input (an interleave's inner
//! dataset, the rows `unbatch` splits). Each saved position is the part's keyed by where in
//! the part the element was ([`Prov::keyed`]); the parts are made again once each, and the
//! elements taken from them in the saved order.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::{Fuse, Stream, StreamExt};

use super::{Resumable, error_stream, unsupported};
use crate::checkpoint::{Prov, State};
use crate::engine::BoxStream;

/// How a part is made again from an element of the input read again and the positions
/// wanted of it (in order): a stream yielding exactly those.
type MakePart<T, U> = Box<dyn FnMut(T, Arc<[Prov]>) -> anyhow::Result<BoxStream<U>> + Send>;

/// The input replaying the positions of the elements the parts are made from, and how a
/// part is made.
type Reading<T, U> = (Fuse<BoxStream<T>>, MakePart<T, U>);

/// Saved positions grouped by their key: the distinct keys in the order of their first
/// position, the rests of each, and each position's key's index.
struct Grouped {
    keys: Vec<Prov>,
    lists: Vec<Vec<Prov>>,
    route: Vec<usize>,
}

/// A stage in replay whose elements each come from one part (see the module doc).
#[must_use = "streams do nothing unless polled"]
pub(crate) struct ReadAgain<T, U> {
    provs: Arc<[Prov]>,
    /// The part of each position (in the order the parts are made).
    route: Vec<usize>,
    /// When the parts are elements of the input: the input replaying their positions and
    /// how a part is made, and what is wanted of each of them (in reading order).
    input: Option<Reading<T, U>>,
    wanted: VecDeque<Arc<[Prov]>>,
    parts: Vec<BoxStream<U>>,
    /// Each part's first element, polled before any is yielded: a checkpoint of another
    /// recipe is refused before an element of it is passed on.
    first: Vec<Option<Option<anyhow::Result<U>>>>,
    primed: bool,
    next: usize,
    stage: &'static str,
}

/// A stage with several inputs in replay: each input replays its own positions (the saved
/// ones without their key, the input's index).
pub(crate) type Routed<U> = ReadAgain<(), U>;

/// `provs` grouped by their key (`split` gives the key and the rest).
fn group(
    provs: &[Prov],
    split: impl Fn(&Prov) -> anyhow::Result<(Prov, Prov)>,
) -> anyhow::Result<Grouped> {
    let mut index = std::collections::HashMap::new();
    let (mut keys, mut lists) = (Vec::new(), Vec::<Vec<Prov>>::new());
    let mut route = Vec::with_capacity(provs.len());
    for prov in provs {
        let (key, rest) = split(prov)?;
        let k = match index.get(&key) {
            Some(&k) => k,
            None => {
                index.insert(key.clone(), keys.len());
                keys.push(key);
                lists.push(Vec::new());
                keys.len() - 1
            }
        };
        lists[k].push(rest);
        route.push(k);
    }
    Ok(Grouped { keys, lists, route })
}

impl<U: Send + 'static> ReadAgain<(), U> {
    /// The replay of `provs` over `n` inputs; `replay(i, positions)` builds input `i`
    /// replaying `positions`.
    pub(crate) fn new(
        provs: &Arc<[Prov]>,
        n: usize,
        stage: &'static str,
        replay: impl Fn(usize, Arc<[Prov]>) -> BoxStream<U>,
    ) -> anyhow::Result<Self> {
        let Grouped { keys, lists, route } = group(provs, Prov::split_key)?;
        let mut parts = Vec::with_capacity(keys.len());
        for (key, list) in keys.iter().zip(lists) {
            let i = key.single()?;
            let i = usize::try_from(i)
                .ok()
                .filter(|&i| i < n)
                .ok_or_else(|| unsupported(stage, &format!("a saved position names input {i}")))?;
            parts.push(replay(i, list.into()));
        }
        Ok(ReadAgain::with_parts(provs, route, parts, stage))
    }
}

impl<T: Send + 'static, U: Send + 'static> ReadAgain<T, U> {
    fn with_parts(
        provs: &Arc<[Prov]>,
        route: Vec<usize>,
        parts: Vec<BoxStream<U>>,
        stage: &'static str,
    ) -> Self {
        ReadAgain {
            provs: Arc::clone(provs),
            route,
            input: None,
            wanted: VecDeque::new(),
            parts,
            first: Vec::new(),
            primed: false,
            next: 0,
            stage,
        }
    }

    /// The replay of `provs`, each the position of an element of the input (the key
    /// `split` gives) keyed by the rest: `input(keys)` builds the input replaying the
    /// distinct elements' positions, and `make(x, rests)` the part of element `x`. An
    /// element that was an error held in a position whose rest is [`Prov::no_inner`] (an
    /// error in the place of a part) is that error again.
    pub(crate) fn elements(
        provs: &Arc<[Prov]>,
        stage: &'static str,
        split: impl Fn(&Prov) -> anyhow::Result<(Prov, Prov)>,
        input: impl FnOnce(Arc<[Prov]>) -> BoxStream<T>,
        make: impl FnMut(T, Arc<[Prov]>) -> anyhow::Result<BoxStream<U>> + Send + 'static,
    ) -> anyhow::Result<Self> {
        let Grouped { keys, lists, route } = group(provs, split)?;
        let mut again = ReadAgain::with_parts(provs, route, Vec::new(), stage);
        again.input = Some((input(keys.into()).fuse(), Box::new(make)));
        again.wanted = lists.into_iter().map(Into::into).collect();
        Ok(again)
    }

    /// Ends the replay with `e` (nothing more is read).
    fn fail(&mut self, e: anyhow::Error) -> Poll<Option<anyhow::Result<U>>> {
        self.input = None;
        self.primed = true;
        self.next = self.route.len();
        Poll::Ready(Some(Err(e)))
    }
}

impl<T, U> Unpin for ReadAgain<T, U> {}

impl<T: Send + 'static, U: Send + 'static> Stream for ReadAgain<T, U> {
    type Item = anyhow::Result<U>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        while let Some((input, make)) = this.input.as_mut() {
            let Some(x) = ready!(input.poll_next_unpin(cx)) else {
                this.input = None;
                break;
            };
            let wanted = this.wanted.pop_front().unwrap_or_else(|| Arc::from([]));
            let held_error = wanted.iter().all(Prov::is_no_inner);
            match x.and_then(|x| make(x, wanted)) {
                Ok(part) => this.parts.push(part),
                Err(e) if held_error && !crate::error::is_refusal(&e) => {
                    this.parts.push(error_stream(e));
                }
                Err(e) => return this.fail(e),
            }
        }
        if !this.primed {
            this.first.resize_with(this.parts.len(), || None);
            let mut waiting = false;
            for (part, first) in this.parts.iter_mut().zip(&mut this.first) {
                if first.is_none() {
                    match part.as_mut().poll_next(cx) {
                        Poll::Ready(item) => *first = Some(item),
                        Poll::Pending => waiting = true,
                    }
                }
            }
            if waiting {
                return Poll::Pending;
            }
            this.primed = true;
            let refused = this
                .first
                .iter()
                .position(|f| matches!(f, Some(Some(Err(e))) if crate::error::is_refusal(e)));
            if let Some(Some(Some(Err(refusal)))) = refused.map(|i| this.first[i].take()) {
                return this.fail(refusal);
            }
        }
        let Some(&k) = this.route.get(this.next) else {
            return Poll::Ready(None);
        };
        let Some(part) = this.parts.get_mut(k) else {
            let e = crate::Error::Checkpoint("an input element could not be read again".into());
            return this.fail(e.into());
        };
        let item = match this.first.get_mut(k).and_then(Option::take) {
            Some(item) => item,
            None => ready!(part.as_mut().poll_next(cx)),
        };
        match item {
            Some(item) => {
                this.next += 1;
                Poll::Ready(Some(item))
            }
            None => {
                let stage = this.stage;
                this.fail(
                    crate::Error::Checkpoint(format!(
                        "{stage}: a part read again gave fewer elements than saved"
                    ))
                    .into(),
                )
            }
        }
    }
}

impl<T, U> Resumable for ReadAgain<T, U> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        Err(crate::engine::replaying(self.stage))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        crate::engine::numbered(self.stage, self.next as u64, Some(&self.provs))
    }
}

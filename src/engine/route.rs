//! Replay through a stage with several inputs (`concatenate`, `sample_from_datasets`,
//! `choose_from_datasets`, `cache`): each of its positions is keyed by the index of the input
//! the element came from ([`Prov::keyed`]).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;

use super::{Resumable, unsupported};
use crate::checkpoint::{Prov, State};
use crate::engine::BoxStream;

/// A stage with several inputs in replay: each input replays its own positions (the saved
/// ones without their key), and the elements are taken from them in the saved order.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct Routed<T> {
    provs: Arc<[Prov]>,
    /// Input `i`'s replay, if any of the positions is its.
    inputs: Vec<Option<BoxStream<T>>>,
    /// The input of each position.
    route: Vec<usize>,
    next: usize,
    stage: &'static str,
}

impl<T: Send + 'static> Routed<T> {
    /// The replay of `provs` over `n` inputs; `replay(i, positions)` builds input `i`
    /// replaying `positions`.
    pub(crate) fn new(
        provs: &Arc<[Prov]>,
        n: usize,
        stage: &'static str,
        replay: impl Fn(usize, Arc<[Prov]>) -> BoxStream<T>,
    ) -> anyhow::Result<Self> {
        let mut lists = vec![Vec::new(); n];
        let mut route = Vec::with_capacity(provs.len());
        for prov in provs.iter() {
            let (i, rest) = prov.split_key()?;
            let i = i.single()?;
            let list = usize::try_from(i)
                .ok()
                .and_then(|i| lists.get_mut(i))
                .ok_or_else(|| unsupported(stage, &format!("a saved position names input {i}")))?;
            list.push(rest);
            route.push(i as usize);
        }
        let inputs = lists
            .into_iter()
            .enumerate()
            .map(|(i, list)| (!list.is_empty()).then(|| replay(i, list.into())))
            .collect();
        Ok(Routed {
            provs: Arc::clone(provs),
            inputs,
            route,
            next: 0,
            stage,
        })
    }
}

impl<T> Unpin for Routed<T> {}

impl<T> Stream for Routed<T> {
    type Item = anyhow::Result<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let Some(&i) = this.route.get(this.next) else {
            return Poll::Ready(None);
        };
        let item = match this.inputs.get_mut(i).and_then(Option::as_mut) {
            Some(input) => ready!(input.as_mut().poll_next(cx)),
            None => None,
        };
        this.next += 1;
        Poll::Ready(Some(item.unwrap_or_else(|| {
            this.next = this.route.len();
            Err(crate::Error::Checkpoint(format!(
                "{}: input {i} gave fewer elements than saved",
                this.stage
            ))
            .into())
        })))
    }
}

impl<T> Resumable for Routed<T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        Err(unsupported(
            self.stage,
            "a stream replaying saved positions is not saved",
        ))
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.next
            .checked_sub(1)
            .and_then(|i| self.provs.get(i))
            .cloned()
            .ok_or_else(|| unsupported(self.stage, "no element yielded yet"))
    }
}

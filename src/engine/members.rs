//! Replay through a stage whose elements are each made of a group of its input's elements
//! (`batch` and its family, `window`): each saved position is the group of its members'
//! positions ([`Prov::group`]). The distinct members are read again once each, in the order
//! the groups first need them, and every group is handed back as its members.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use super::{BoxStream, Resumable, unsupported};
use crate::checkpoint::{Prov, State};

/// A member read again: an element, or an error element as it was (the first group holding
/// it takes it) and as its message (for the groups after).
type Member<T> = Result<T, (Option<anyhow::Error>, String)>;

/// A stage's groups made again from its input replaying their members (see the module doc).
pub(crate) struct Members<T> {
    provs: Arc<[Prov]>,
    input: BoxStream<T>,
    /// Each group's members, as indices of the distinct members.
    groups: Vec<Vec<usize>>,
    /// The last group holding each distinct member: it takes the member, earlier ones get
    /// a copy (`share`).
    last: Vec<usize>,
    values: Vec<Option<Member<T>>>,
    share: Option<fn(&T) -> T>,
    next: usize,
    stage: &'static str,
}

impl<T: Send + 'static> Members<T> {
    /// The replay of `provs`, each a group of its members' positions: `input(positions)`
    /// builds the input replaying the distinct members. `share` copies a member held by
    /// several groups (overlapping windows); without it, a member held twice is refused as a
    /// checkpoint this stage cannot have saved.
    pub(crate) fn new(
        provs: &Arc<[Prov]>,
        stage: &'static str,
        share: Option<fn(&T) -> T>,
        input: impl FnOnce(Arc<[Prov]>) -> BoxStream<T>,
    ) -> anyhow::Result<Self> {
        Self::make(provs, stage, share, false, input)
    }

    /// [`new`](Members::new) for a stage whose groups carry words of their own (`pack`: which
    /// tokens of each member), read from [`last_prov`](Members::last_prov).
    pub(crate) fn with_words(
        provs: &Arc<[Prov]>,
        stage: &'static str,
        share: Option<fn(&T) -> T>,
        input: impl FnOnce(Arc<[Prov]>) -> BoxStream<T>,
    ) -> anyhow::Result<Self> {
        Self::make(provs, stage, share, true, input)
    }

    fn make(
        provs: &Arc<[Prov]>,
        stage: &'static str,
        share: Option<fn(&T) -> T>,
        words: bool,
        input: impl FnOnce(Arc<[Prov]>) -> BoxStream<T>,
    ) -> anyhow::Result<Self> {
        let mut seen: HashMap<&Prov, usize> = HashMap::new();
        let (mut distinct, mut last) = (Vec::new(), Vec::new());
        let mut groups = Vec::with_capacity(provs.len());
        for (g, prov) in provs.iter().enumerate() {
            let members = match prov {
                Prov::Group(members, w) if words || w.is_empty() => members,
                other => {
                    let saved = format!("saved element is not a group: {other:?}");
                    return Err(unsupported(stage, &saved));
                }
            };
            let mut group = Vec::with_capacity(members.len());
            for m in members {
                let mut new = false;
                let k = *seen.entry(m).or_insert_with(|| {
                    new = true;
                    distinct.push(m.clone());
                    last.push(g);
                    distinct.len() - 1
                });
                // Held by an earlier group (only windows share), or twice by this one.
                if !new && (share.is_none() || last[k] == g) {
                    let saved = "an element saved in two of its groups";
                    return Err(unsupported(stage, saved));
                }
                last[k] = g;
                group.push(k);
            }
            groups.push(group);
        }
        Ok(Members {
            provs: Arc::clone(provs),
            input: input(distinct.into()),
            groups,
            last,
            values: Vec::new(),
            share,
            next: 0,
            stage,
        })
    }
}

impl<T> Members<T> {
    /// Ends the replay with `e` (nothing more is read).
    fn fail(&mut self, e: anyhow::Error) -> Poll<Option<anyhow::Result<Vec<T>>>> {
        self.next = self.groups.len();
        Poll::Ready(Some(Err(e)))
    }

    /// The next group's members; an error member makes the group that error.
    pub(crate) fn poll_group(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<anyhow::Result<Vec<T>>>> {
        let g = self.next;
        let Some(needed) = self
            .groups
            .get(g)
            .map(|m| m.iter().max().map_or(0, |&k| k + 1))
        else {
            return Poll::Ready(None);
        };
        while self.values.len() < needed {
            match ready!(self.input.as_mut().poll_next(cx)) {
                Some(Ok(x)) => self.values.push(Some(Ok(x))),
                Some(Err(e)) if !crate::error::is_refusal(&e) => {
                    let message = format!("{e:#}");
                    self.values.push(Some(Err((Some(e), message))));
                }
                Some(Err(e)) => return self.fail(e),
                None => {
                    let stage = self.stage;
                    let e = format!("{stage}: an element of a saved group could not be read again");
                    return self.fail(crate::Error::Checkpoint(e).into());
                }
            }
        }
        self.next += 1;
        let group = std::mem::take(&mut self.groups[g]);
        let mut out = Ok(Vec::with_capacity(group.len()));
        for &k in &group {
            let last = self.last[k] == g;
            let value = &mut self.values[k];
            if let Ok(members) = &mut out {
                let member = match value {
                    Some(Ok(x)) if !last => self.share.map(|share| Ok(share(x))),
                    Some(Err((e, message))) => Some(Err(e
                        .take()
                        .unwrap_or_else(|| anyhow::anyhow!(message.clone())))),
                    _ => value.take().and_then(Result::ok).map(Ok),
                };
                match member {
                    Some(Ok(x)) => members.push(x),
                    Some(Err(e)) => out = Err(e),
                    None => {
                        let e = unsupported(self.stage, "an element saved in two of its groups");
                        return self.fail(e);
                    }
                }
            }
            if last {
                // No group after this one holds it.
                self.values[k] = None;
            }
        }
        Poll::Ready(Some(out))
    }

    /// Why a checkpoint of the stage in replay is refused (a stream replaying saved
    /// positions is never saved: the stage that asked for them saves them).
    pub(crate) fn not_saved(&self) -> anyhow::Error {
        super::replaying(self.stage)
    }

    /// The position of the last group handed back.
    pub(crate) fn last_prov(&self) -> anyhow::Result<Prov> {
        super::numbered(self.stage, self.next as u64, Some(&self.provs))
    }
}

impl<T> Unpin for Members<T> {}

/// The groups made again, as a stream of their own (`group_by_window`'s windows in replay).
impl<T> futures::stream::Stream for Members<T> {
    type Item = anyhow::Result<Vec<T>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().poll_group(cx)
    }
}

impl<T> Resumable for Members<T> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        Err(self.not_saved())
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        Members::last_prov(self)
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;
    use crate::engine::Opaque;

    /// A replay of `groups` (of positions `Prov::at(k)`) whose input yields `input`, and the
    /// positions the input was asked for.
    fn replay(
        groups: &[&[u64]],
        share: Option<fn(&u64) -> u64>,
        input: Vec<anyhow::Result<u64>>,
    ) -> anyhow::Result<(Members<u64>, Vec<Prov>)> {
        let provs: Arc<[Prov]> = groups
            .iter()
            .map(|g| Prov::group(g.iter().map(|&k| Prov::at(k)).collect()))
            .collect();
        let mut asked = Vec::new();
        let members = Members::new(&provs, "window", share, |distinct| {
            asked = distinct.to_vec();
            Box::pin(Opaque::new(futures::stream::iter(input), "source"))
        })?;
        Ok((members, asked))
    }

    #[tokio::test]
    async fn members_shared_by_groups_are_read_once_and_copied() -> anyhow::Result<()> {
        let input = vec![Ok(7), Ok(8), Ok(9)];
        let (members, asked) = replay(&[&[1, 2], &[2, 3], &[3]], Some(u64::clone), input)?;
        assert_eq!(asked, [1, 2, 3].map(Prov::at));
        let groups: Vec<Vec<u64>> = members.map(|g| g.unwrap()).collect().await;
        assert_eq!(groups, [vec![7, 8], vec![8, 9], vec![9]]);
        Ok(())
    }

    #[tokio::test]
    async fn an_error_member_makes_each_group_holding_it_that_error() -> anyhow::Result<()> {
        let input = vec![
            Ok(7),
            Err(crate::Error::InvalidArgument("bad record".into()).into()),
            Ok(9),
        ];
        let (members, _) = replay(&[&[1, 2], &[2, 3], &[3]], Some(u64::clone), input)?;
        let groups: Vec<anyhow::Result<Vec<u64>>> = members.collect().await;
        // The first group holding it takes the error itself, the next one its message.
        let first = groups[0].as_ref().unwrap_err();
        assert!(matches!(
            first.downcast_ref(),
            Some(crate::Error::InvalidArgument(_))
        ));
        assert!(format!("{:#}", groups[1].as_ref().unwrap_err()).contains("bad record"));
        assert_eq!(groups[2].as_ref().unwrap(), &[9]);
        Ok(())
    }

    #[tokio::test]
    async fn a_member_in_two_batches_or_an_input_short_of_one_is_refused() -> anyhow::Result<()> {
        let Err(e) = replay(&[&[1, 2], &[2]], None, Vec::new()) else {
            panic!("a batch member saved twice was accepted");
        };
        assert!(format!("{e:#}").contains("two of its groups"), "{e:#}");
        // Twice in one window: no window holds an element twice.
        assert!(replay(&[&[1, 1]], Some(u64::clone), Vec::new()).is_err());
        let (members, _) = replay(&[&[1], &[2]], None, vec![Ok(7)])?;
        let groups: Vec<anyhow::Result<Vec<u64>>> = members.collect().await;
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].as_ref().unwrap(), &[7]);
        let e = groups[1].as_ref().unwrap_err();
        assert!(crate::error::is_refusal(e), "{e:#}");
        Ok(())
    }
}

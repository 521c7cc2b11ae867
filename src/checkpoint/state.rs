//! What each stage saves: its [`State`], and the positions ([`Prov`]) of the elements it holds.

use serde::{Deserialize, Serialize};
use smallvec::SmallVec;
use std::borrow::Cow;

use crate::error::Error;

/// One stage's saved state, as of the last element it yielded, with the states of the stages
/// it reads from.
///
/// A generic tree rather than a type per operation: every stage keeps a few numbers
/// (`words`: a position, counters, a random generator's position), the positions of the
/// elements it holds (`held`: a shuffle buffer's members, never their contents), and its
/// inputs' states, in the order the operation documents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct State {
    /// The operation's name (tf.data's), checked on restore.
    pub(crate) stage: Cow<'static, str>,
    pub(crate) words: Vec<u64>,
    pub(crate) held: Vec<Prov>,
    pub(crate) inputs: Vec<State>,
}

impl State {
    pub(crate) fn new(stage: &'static str) -> Self {
        State {
            stage: Cow::Borrowed(stage),
            words: Vec::new(),
            held: Vec::new(),
            inputs: Vec::new(),
        }
    }

    pub(crate) fn words(mut self, words: impl IntoIterator<Item = u64>) -> Self {
        self.words.extend(words);
        self
    }

    pub(crate) fn input(mut self, input: State) -> Self {
        self.inputs.push(input);
        self
    }

    pub(crate) fn held(mut self, held: Vec<Prov>) -> Self {
        self.held = held;
        self
    }

    /// Word `i`, or an error naming the stage (a checkpoint of another version or recipe).
    pub(crate) fn word(&self, i: usize) -> anyhow::Result<u64> {
        self.words.get(i).copied().ok_or_else(|| self.malformed())
    }

    /// Input state `i`.
    pub(crate) fn input_state(&self, i: usize) -> anyhow::Result<&State> {
        self.inputs.get(i).ok_or_else(|| self.malformed())
    }

    pub(crate) fn malformed(&self) -> anyhow::Error {
        Error::Checkpoint(format!(
            "the saved state of stage `{}` is not what this recipe's stage saves",
            self.stage
        ))
        .into()
    }
}

/// Where an element came from: enough to make it again after a restore, without having saved
/// its contents (its *provenance*).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) enum Prov {
    /// A position: the source's words first (a record's byte offset, an index), then a word
    /// for each stage on the way that adds one (an interleave's input element, a random map's
    /// element index), innermost first.
    At(SmallVec<[u64; 3]>),
    /// The elements an aggregate was made of (a batch), in order, then the words stages
    /// downstream of it added.
    Group(Vec<Prov>, SmallVec<[u64; 2]>),
    /// An element of an interleave whose inner or input position is not a plain one (a
    /// batch's): the inner position, the input element's, then the words added downstream.
    Nest(Box<Prov>, Box<Prov>, SmallVec<[u64; 2]>),
}

impl Prov {
    /// The inner position of an interleave's element that is an error of its input (no
    /// inner dataset was opened for it): see `interleave::input_error_position`.
    pub(crate) fn no_inner() -> Prov {
        Prov::Group(Vec::new(), smallvec::smallvec![u64::MAX])
    }

    pub(crate) fn is_no_inner(&self) -> bool {
        matches!(self, Prov::Group(members, words) if members.is_empty() && words[..] == [u64::MAX])
    }

    pub(crate) fn at(word: u64) -> Prov {
        Prov::At(smallvec::smallvec![word])
    }

    /// The position of an aggregate of these members.
    pub(crate) fn group(members: Vec<Prov>) -> Prov {
        Prov::Group(members, SmallVec::new())
    }

    /// This position with one more word, added by a stage downstream of the source.
    pub(crate) fn push(self, word: u64) -> anyhow::Result<Prov> {
        Ok(match self {
            Prov::At(mut words) => {
                words.push(word);
                Prov::At(words)
            }
            Prov::Group(members, mut words) => {
                words.push(word);
                Prov::Group(members, words)
            }
            Prov::Nest(inner, key, mut words) => {
                words.push(word);
                Prov::Nest(inner, key, words)
            }
        })
    }

    /// The last word and the position without it (undoing [`push`](Prov::push)).
    pub(crate) fn pop(&self) -> anyhow::Result<(u64, Prov)> {
        let popped = match self {
            Prov::At(words) => words
                .split_last()
                .map(|(&last, rest)| (last, Prov::At(rest.into()))),
            Prov::Group(members, words) => words
                .split_last()
                .map(|(&last, rest)| (last, Prov::Group(members.clone(), rest.into()))),
            Prov::Nest(inner, key, words) => words
                .split_last()
                .map(|(&last, rest)| (last, Prov::Nest(inner.clone(), key.clone(), rest.into()))),
        };
        popped.ok_or_else(|| self.unexpected())
    }

    fn unexpected(&self) -> anyhow::Error {
        Error::Checkpoint(format!(
            "a saved position is not what was expected: {self:?}"
        ))
        .into()
    }

    /// This position followed by an interleave's input element's (`key`): plain positions
    /// are joined as words (the key's words, then their count: no allocation per element),
    /// others nested.
    pub(crate) fn push_prov(self, key: &Prov) -> anyhow::Result<Prov> {
        match (self, key) {
            (Prov::At(mut words), Prov::At(tail)) => {
                words.extend_from_slice(tail);
                words.push(tail.len() as u64);
                Ok(Prov::At(words))
            }
            (inner, key) => Ok(Prov::Nest(
                Box::new(inner),
                Box::new(key.clone()),
                SmallVec::new(),
            )),
        }
    }

    /// Undoes [`push_prov`](Prov::push_prov): `(key, inner)`.
    pub(crate) fn pop_prov(&self) -> anyhow::Result<(Prov, Prov)> {
        match self {
            Prov::Nest(inner, key, words) if words.is_empty() => {
                Ok(((**key).clone(), (**inner).clone()))
            }
            Prov::At(_) => {
                let (n, mut rest) = self.pop()?;
                let mut tail = SmallVec::new();
                for _ in 0..n {
                    let (w, r) = rest.pop()?;
                    tail.insert(0, w);
                    rest = r;
                }
                Ok((Prov::At(tail), rest))
            }
            _ => Err(self.unexpected()),
        }
    }

    /// This position (of an element of an inner dataset, or of one input among several) with
    /// the position of what it came through (its key: an interleave's input element, the
    /// index of a concatenation's input) last: [`push_prov`](Prov::push_prov).
    pub(crate) fn keyed(self, key: &Prov) -> anyhow::Result<Prov> {
        self.push_prov(key)
    }

    /// Undoes [`keyed`](Prov::keyed): `(key, inner)`.
    pub(crate) fn split_key(&self) -> anyhow::Result<(Prov, Prov)> {
        self.pop_prov()
    }

    /// The only word of a one-word position.
    pub(crate) fn single(&self) -> anyhow::Result<u64> {
        match self {
            Prov::At(words) if words.len() == 1 => Ok(words[0]),
            _ => Err(Error::Checkpoint(format!(
                "a saved position is not what was expected: {self:?}"
            ))
            .into()),
        }
    }
}

/// The state of a stream that has ended.
pub(crate) const ENDED: &str = "(ended)";

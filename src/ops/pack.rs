//! `pack`: documents of token ids packed into sequences of one length, by concatenating and
//! splitting them (no padding) or into bins (first fit, best fit: a document is split only when
//! it is longer than a sequence).
//!
//! Saved state: `[offset, passed]` and the documents it holds as [`Hold`] saves them. Every
//! sequence is a function of the documents from the *base* on (the oldest document it holds,
//! from token `offset`): after a restore it packs them again as it did and drops the first
//! `passed` sequences, which were passed on before the checkpoint. No token is saved: the
//! documents are read again (over a small input from the mark before the oldest, otherwise
//! from their positions), so a document split between two sequences is saved as where it is
//! and how far into it the next sequence starts.
//!
//! Positions: a sequence is the group of its documents' positions, with `[start, end]` per
//! document (the tokens of it the sequence holds); an error passed on is a group of its own
//! position alone.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures::stream::Stream;
use ndarray::Array2;

use crate::checkpoint::{Prov, State};
use crate::distribute::{Distributed, Piece};
use crate::engine::hold::MARK_EVERY;
use crate::engine::{Cardinality, Ctx, Hold, Input, Members, Operation, Resumable, replayed};
use crate::engine::{Start, unsupported};
use crate::tensor::Collate;

const STAGE: &str = "pack";

/// How [`Dataset::pack`](crate::Dataset::pack) fits documents into sequences.
///
/// Every policy keeps every token once, in its document's order: a document's tokens in a
/// sequence are one segment, contiguous. Concatenating, a document split between sequences
/// goes on at the next sequence's start; in bins, a document longer than a sequence is cut
/// into a head (what is over whole sequences), which goes where it fits, and whole
/// sequences after it, each in a bin of its own: its pieces are passed on in its order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Packing {
    /// Concatenate the documents and cut the result every `sequence_length` tokens (Grain's
    /// `ConcatThenSplitIterDataset`, the way Megatron-LM and nanoGPT read a corpus): no
    /// padding but in the last sequence; a document is split wherever a sequence ends.
    /// Megatron-LM's GPT sample `i` is sequence `i` with the first token of sequence `i + 1`
    /// appended (its targets' shift).
    ConcatThenSplit,
    /// First fit over `bins` bins (Grain's `FirstFitPackIterDataset` without its shuffle of
    /// the bins): each document goes into the first bin with room for it; when none has,
    /// the bins are passed on in order and a new set starts with it.
    FirstFit {
        /// How many sequences are filled at once (more bins, less padding).
        bins: usize,
    },
    /// Best fit over `bins` bins (Grain's `BestFitPackIterDataset` without its shuffle): each
    /// document goes into the bin it leaves the least room in (the first of equals).
    BestFit {
        /// How many sequences are filled at once.
        bins: usize,
    },
}

/// One packed sequence of [`Dataset::pack`](crate::Dataset::pack), every field
/// `sequence_length` long (Grain's `inputs`, `inputs_segment_ids`, `inputs_positions`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packed {
    /// The token ids, padding (0) after the last document.
    pub tokens: Vec<u32>,
    /// Which document of the sequence each token belongs to: 1 for the first, 2 for the
    /// second, ...; 0 for padding. A document split between sequences has a segment in each.
    pub segment_ids: Vec<i32>,
    /// Each token's position in its segment, from 0; 0 for padding.
    pub positions: Vec<i32>,
    /// Whether each token is a document's (train on it) rather than padding.
    pub loss_mask: Vec<bool>,
    /// Where each segment came from, in order, when the documents came from a
    /// [`ShardPlan::dataset`](crate::distribute::ShardPlan::dataset)
    /// ([`Distributed`] documents); empty otherwise. An empty document has no segment: it is
    /// a piece of no tokens (`start == end`) among them, in its place in the input's order. Hand them to
    /// [`Coverage::add_pieces`](crate::distribute::Coverage::add_pieces) as the sequence is
    /// taken, for an elastic resume that neither loses nor repeats a token.
    pub pieces: Vec<Piece>,
}

impl Packed {
    /// A sequence of `len` tokens made of `pieces`, padded.
    fn of<'a>(len: usize, pieces: impl IntoIterator<Item = &'a [u32]>) -> Packed {
        let mut row = Packed {
            tokens: Vec::with_capacity(len),
            segment_ids: Vec::with_capacity(len),
            positions: Vec::with_capacity(len),
            loss_mask: Vec::with_capacity(len),
            pieces: Vec::new(),
        };
        let pieces = pieces.into_iter().filter(|piece| !piece.is_empty());
        for (segment, piece) in (1..).zip(pieces) {
            row.tokens.extend_from_slice(piece);
            row.segment_ids
                .extend(std::iter::repeat_n(segment, piece.len()));
            row.positions.extend(0..piece.len() as i32);
        }
        row.loss_mask.resize(row.tokens.len(), true);
        row.tokens.resize(len, 0);
        row.segment_ids.resize(len, 0);
        row.positions.resize(len, 0);
        row.loss_mask.resize(len, false);
        row
    }

    /// How many of its tokens are documents' (not padding).
    pub fn num_tokens(&self) -> usize {
        self.loss_mask.iter().filter(|&&m| m).count()
    }
}

/// A batch of [`Packed`] sequences stacked into `[batch, sequence_length]` arrays (what
/// `pack(..).batch(n).collate()` yields): the tensors a training step takes.
///
/// ```
/// use streamload::Dataset;
/// use streamload::text::Packing;
/// # tokio_test::block_on(async {
/// let docs = Dataset::from_vec(vec![vec![1, 2, 3], vec![4, 5, 6, 7, 8], vec![9]]);
/// let batches = docs.pack(4, Packing::ConcatThenSplit).batch(2).collate().collect().await?;
/// assert_eq!(batches[0].tokens.shape(), [2, 4]);
/// assert_eq!(batches[0].segment_ids.row(0).to_vec(), [1, 1, 1, 2]);
/// assert_eq!(batches[1].loss_mask.row(0).to_vec(), [true, false, false, false]);
/// # anyhow::Ok(()) }).unwrap();
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackedBatch {
    /// `uint32` token ids.
    pub tokens: Array2<u32>,
    /// Each token's document in its sequence, from 1; 0 for padding.
    pub segment_ids: Array2<i32>,
    /// Each token's position in its segment.
    pub positions: Array2<i32>,
    /// Whether each token is a document's.
    pub loss_mask: Array2<bool>,
}

impl Collate for Packed {
    type Batch = PackedBatch;
    const COMPONENTS: usize = 4;

    fn collate_components<'a, I>(items: I, component: usize) -> anyhow::Result<PackedBatch>
    where
        I: ExactSizeIterator<Item = &'a Self> + Clone,
    {
        Ok(PackedBatch {
            tokens: Vec::collate_components(items.clone().map(|p| &p.tokens), component)?,
            segment_ids: Vec::collate_components(
                items.clone().map(|p| &p.segment_ids),
                component + 1,
            )?,
            positions: Vec::collate_components(items.clone().map(|p| &p.positions), component + 2)?,
            loss_mask: Vec::collate_components(items.map(|p| &p.loss_mask), component + 3)?,
        })
    }
}

/// A document [`Dataset::pack`](crate::Dataset::pack) packs: token ids (`Vec<u32>`), or token
/// ids with their place in a rank's share of the data (`Distributed<Vec<u32>>`, from
/// [`ShardPlan::dataset`](crate::distribute::ShardPlan::dataset)), whose sequences then say
/// where each segment came from ([`Packed::pieces`]).
pub trait Document: sealed::Document {}

impl Document for Vec<u32> {}
impl Document for Distributed<Vec<u32>> {}

pub(crate) mod sealed {
    use crate::distribute::Distributed;

    pub trait Document: Clone + Send + Sync + 'static {
        /// Its token ids.
        fn tokens(&self) -> &[u32];

        /// Its place: (file, record, padded), and how many of its tokens an interrupted
        /// run already took.
        fn place(&self) -> Option<((usize, u64, bool), u64)> {
            None
        }
    }

    impl Document for Vec<u32> {
        fn tokens(&self) -> &[u32] {
            self
        }
    }

    impl Document for Distributed<Vec<u32>> {
        fn tokens(&self) -> &[u32] {
            &self.item
        }

        fn place(&self) -> Option<((usize, u64, bool), u64)> {
            Some(((self.file, self.record, self.padded), self.offset))
        }
    }
}

/// The pieces of `cuts` of `docs` (those with a place).
fn pieces<'a, D: Document + 'a>(
    cuts: impl IntoIterator<Item = (&'a D, usize, usize)>,
) -> Vec<Piece> {
    cuts.into_iter()
        .filter_map(|(doc, start, end)| {
            let ((file, record, padded), _) = doc.place()?;
            Some(Piece {
                file,
                record,
                start: start as u64,
                end: end as u64,
                last: end == doc.tokens().len(),
                padded,
            })
        })
        .collect()
}

/// The [`pack`](crate::Dataset::pack) operation.
#[derive(Hash)]
pub(crate) struct Pack {
    pub(crate) sequence_length: usize,
    pub(crate) packing: Packing,
}

impl<D: Document> Operation<D> for Pack {
    type Out = Packed;
    type Stream = PackStream<D>;
    const NAME: &'static str = STAGE;

    fn cardinality(&self, input: Cardinality) -> Cardinality {
        match input {
            Cardinality::Infinite => Cardinality::Infinite,
            _ => Cardinality::Unknown,
        }
    }

    fn replay(
        &self,
        _: &Ctx,
        input: Input<'_, D>,
        provs: &Arc<[Prov]>,
    ) -> crate::engine::Replay<Packed> {
        let members = Members::with_words(provs, STAGE, Some(D::clone), |docs| input.replay(docs));
        let len = self.sequence_length;
        replayed(members.map(|members| Replay { members, len }))
    }

    fn open(&self, _: &Ctx, input: Input<'_, D>, start: Start<'_>) -> anyhow::Result<Self::Stream> {
        let len = self.sequence_length;
        let restored = match start {
            Start::Restore(state) => Some((state.word(0)?, state.word(1)?)),
            _ => None,
        };
        let mut hold = input.hold(STAGE, false, 2)?;
        hold.marking_every(MARK_EVERY);
        let bins = match self.packing {
            Packing::ConcatThenSplit => None,
            Packing::FirstFit { bins } => Some((bins, false)),
            Packing::BestFit { bins } => Some((bins, true)),
        };
        let mut stream = PackStream {
            hold,
            len,
            bins,
            open: Vec::new(),
            ready: VecDeque::new(),
            docs: VecDeque::new(),
            first: 0,
            offset: 0,
            pending: 0,
            passed: 0,
            skip: 0,
            start_at: None,
            ended: false,
            lost: false,
            last: None,
        };
        if let Some((offset, passed)) = restored {
            stream.start_at = Some(usize::try_from(offset)?);
            stream.skip = passed;
        }
        Ok(stream)
    }
}

/// A document it holds: its tokens, its index in the input (held by marks) and its position
/// (when recorded).
struct Doc<D> {
    doc: D,
    /// Its first token to place: 0, or where it goes on after an elastic resume.
    from: usize,
    index: u64,
    prov: Option<Prov>,
}

/// Tokens `start..end` of document `doc` (counted from the first document read).
#[derive(Clone, Copy)]
struct Cut {
    doc: u64,
    start: usize,
    end: usize,
}

/// A bin being filled: its pieces, and how many tokens they hold.
#[derive(Default)]
struct Bin {
    pieces: Vec<Cut>,
    used: usize,
}

/// Stream for the [`pack`](crate::Dataset::pack) method.
#[must_use = "streams do nothing unless polled"]
pub(crate) struct PackStream<D> {
    hold: Hold<D>,
    len: usize,
    /// The number of bins, and whether best fit; `None` to concatenate and split.
    bins: Option<(usize, bool)>,
    /// The bins being filled, and the sequences of bins filled, not yet passed on.
    open: Vec<Bin>,
    ready: VecDeque<Vec<Cut>>,
    /// The documents it holds, from the base on (see the module doc); `first` is the
    /// number of the front one, `offset` where the base starts in it.
    docs: VecDeque<Doc<D>>,
    first: u64,
    offset: usize,
    /// Concatenating: the tokens held and not yet in a sequence.
    pending: usize,
    /// Sequences passed on since the base; after a restore, those still to drop.
    passed: u64,
    skip: u64,
    /// After a restore: where the first document handed back starts.
    start_at: Option<usize>,
    ended: bool,
    /// A document came with no position: no checkpoint can place the sequences.
    lost: bool,
    /// The last sequence's position, when recorded.
    last: Option<Prov>,
}

impl<D> Unpin for PackStream<D> {}

impl<D: Document> PackStream<D> {
    /// Takes a document the hold just handed out: from its first token, or where a restore
    /// or an elastic resume ([`Distributed::offset`]) says it goes on.
    fn push(&mut self, doc: D) {
        let taken = doc.place().map_or(0, |(_, taken)| taken);
        let start = (self.start_at.take().unwrap_or(0) as u64).max(taken);
        let start = usize::try_from(start).unwrap_or(usize::MAX);
        let end = doc.tokens().len();
        // An empty document is held too, and passed on as a piece of no tokens with the
        // sequence after it (so that a coverage counts it).
        let start = start.min(end);
        let prov = self.hold.prov();
        self.lost |= self.hold.recording() && prov.is_none();
        if self.docs.is_empty() {
            self.offset = start;
        }
        let number = self.first + self.docs.len() as u64;
        self.docs.push_back(Doc {
            doc,
            from: start,
            index: self.hold.index(),
            prov,
        });
        let Some((bins, best)) = self.bins else {
            self.pending += end - start;
            return;
        };
        // Split only where the document is longer than a sequence: its head (what is over
        // whole sequences) goes where it fits, then each whole sequence of it into a bin
        // of its own, after the head's (no bin has room for one): the pieces are passed on
        // in the document's order, so what a sequence leaves of it is always its end.
        if start == end {
            // A piece of no tokens, in the first bin with room (any).
            let piece = Cut {
                doc: number,
                start,
                end,
            };
            self.place(piece, bins, best);
        }
        let mut at = start;
        while at < end {
            let head = (end - at) % self.len;
            let piece = Cut {
                doc: number,
                start: at,
                end: at + if head > 0 { head } else { self.len },
            };
            at = piece.end;
            self.place(piece, bins, best);
        }
    }

    /// Puts `piece` into a bin: the first with room, or the one it fills most; when none has
    /// room and all `bins` are open, they are passed on and a new set starts.
    fn place(&mut self, piece: Cut, bins: usize, best: bool) {
        let n = piece.end - piece.start;
        let len = self.len;
        let mut fits = self
            .open
            .iter()
            .enumerate()
            .filter(|(_, b)| b.used + n <= len);
        let chosen = if best {
            fits.min_by_key(|(_, b)| len - b.used - n).map(|(i, _)| i)
        } else {
            fits.next().map(|(i, _)| i)
        };
        let i = match chosen {
            Some(i) => i,
            None => {
                if self.open.len() == bins {
                    self.finish_bins();
                }
                self.open.push(Bin::default());
                self.open.len() - 1
            }
        };
        self.open[i].pieces.push(piece);
        self.open[i].used += n;
    }

    /// The open bins are full: they become sequences, in order (a bin of empty documents
    /// alone, which only an input of no tokens at all leaves, is none).
    fn finish_bins(&mut self) {
        let bins = self.open.drain(..).filter(|bin| bin.used > 0);
        self.ready.extend(bins.map(|bin| bin.pieces));
    }

    /// Concatenating: the next sequence's pieces, from the front of what is held.
    fn cut(&mut self) -> Vec<Cut> {
        let mut pieces = Vec::new();
        let mut room = self.len;
        let mut start = self.offset;
        for (doc, held) in (self.first..).zip(&self.docs) {
            // A document an elastic resume handed on goes on where it was.
            start = start.max(held.from);
            let n = held.doc.tokens().len();
            // Full: the empty documents right after its last token go with it.
            if room == 0 && n > start {
                break;
            }
            let end = n.min(start + room);
            pieces.push(Cut { doc, start, end });
            room -= end - start;
            start = 0;
        }
        self.pending -= self.len - room;
        pieces
    }

    /// The next sequence's pieces, if one is ready (or the input has ended).
    fn next_pieces(&mut self) -> Option<Vec<Cut>> {
        if self.bins.is_some() {
            if self.ended && !self.open.is_empty() {
                self.finish_bins();
            }
            return self.ready.pop_front();
        }
        // A full sequence waits for the next document with tokens (or the end), so that the
        // empty documents before it go with it.
        (self.pending > self.len || (self.ended && self.pending > 0)).then(|| self.cut())
    }

    /// Makes the sequence of `pieces` (and its position, when recorded), and moves the base
    /// past what no sequence still to come needs.
    fn emit(&mut self, pieces: &[Cut]) -> Packed {
        let doc = |p: &Cut| &self.docs[(p.doc - self.first) as usize];
        let mut row = Packed::of(
            self.len,
            pieces.iter().map(|p| &doc(p).doc.tokens()[p.start..p.end]),
        );
        row.pieces = self::pieces(pieces.iter().map(|p| (&doc(p).doc, p.start, p.end)));
        self.last = (self.hold.recording() && !self.lost).then(|| {
            let members = pieces.iter().filter_map(|p| doc(p).prov.clone()).collect();
            let words = pieces.iter().flat_map(|p| [p.start as u64, p.end as u64]);
            Prov::Group(members, words.collect())
        });
        self.passed += 1;
        self.rebase(pieces.last().copied());
        row
    }

    /// After a sequence whose last piece was `last`: when no sequence filled earlier is
    /// waiting, the base moves to the oldest piece still to come (the first of the open
    /// bins, or where the next sequence starts), and the documents before it are dropped.
    fn rebase(&mut self, last: Option<Cut>) {
        let base = match self.bins {
            Some(_) if !self.ready.is_empty() => return,
            Some(_) => self
                .open
                .iter()
                .filter_map(|b| b.pieces.first())
                .min_by_key(|p| (p.doc, p.start))
                .map(|p| (p.doc, p.start)),
            // Concatenating: the next sequence starts where this one ended.
            None => last.map(|p| {
                let whole = self.docs[(p.doc - self.first) as usize].doc.tokens().len() == p.end;
                if whole {
                    (p.doc + 1, 0)
                } else {
                    (p.doc, p.end)
                }
            }),
        };
        let (doc, offset) = base.unwrap_or((self.first + self.docs.len() as u64, 0));
        while self.first < doc && self.docs.pop_front().is_some() {
            self.first += 1;
        }
        self.first = doc;
        self.offset = offset;
        self.passed = 0;
        match self.docs.front() {
            Some(front) => self.hold.release(front.index),
            None => {
                self.hold.release(self.hold.count());
                self.hold.mark();
            }
        }
    }
}

impl<D: Document> Stream for PackStream<D> {
    type Item = anyhow::Result<Packed>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(pieces) = this.next_pieces() {
                if this.skip > 0 {
                    // Packed again after a restore: passed on before the checkpoint.
                    this.skip -= 1;
                    this.passed += 1;
                    if this.ready.is_empty() && this.skip == 0 {
                        this.rebase(pieces.last().copied());
                    }
                    continue;
                }
                return Poll::Ready(Some(Ok(this.emit(&pieces))));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            if this.docs.is_empty() {
                this.hold.mark();
            }
            match ready!(this.hold.poll_next(cx)) {
                Some(Ok(doc)) => this.push(doc),
                Some(Err(e)) => {
                    // Passed on in a sequence's place; packing goes on around it.
                    this.last = this.hold.alone();
                    return Poll::Ready(Some(Err(e)));
                }
                None => this.ended = true,
            }
        }
    }
}

/// Saved state: see the module doc.
impl<D: Document> Resumable for PackStream<D> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        let this = self.get_mut();
        if this.skip > 0 {
            return Err(unsupported(
                STAGE,
                "a checkpoint before it has packed again what it held",
            ));
        }
        let state = State::new(STAGE).words([this.offset as u64, this.passed]);
        let indices = this.docs.iter().map(|d| d.index);
        let (docs, lost) = (&this.docs, this.lost);
        this.hold.save(state, indices, || {
            (!lost).then(|| docs.iter().filter_map(|d| d.prov.clone()).collect())
        })
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.hold.placed(&self.last, "its sequences")
    }
}

/// The sequences at saved positions, made again from their documents.
pub(crate) struct Replay<D> {
    members: Members<D>,
    len: usize,
}

impl<D> Unpin for Replay<D> {}

impl<D: Document> Stream for Replay<D> {
    type Item = anyhow::Result<Packed>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let Some(docs) = ready!(this.members.poll_group(cx)) else {
            return Poll::Ready(None);
        };
        let docs = match docs {
            Ok(docs) => docs,
            Err(e) => return Poll::Ready(Some(Err(e))),
        };
        let words = match this.members.last_prov()? {
            Prov::Group(_, words) => words,
            _ => Default::default(),
        };
        let cuts: Option<Vec<(&D, usize, usize)>> = docs
            .iter()
            .zip(words.chunks(2))
            .map(|(doc, w)| {
                let (start, end) = (w[0] as usize, *w.get(1)? as usize);
                doc.tokens().get(start..end).map(|_| (doc, start, end))
            })
            .collect();
        match cuts {
            Some(cuts) if words.len() == 2 * docs.len() => {
                let mut row = Packed::of(
                    this.len,
                    cuts.iter()
                        .map(|&(doc, start, end)| &doc.tokens()[start..end]),
                );
                row.pieces = pieces(cuts);
                Poll::Ready(Some(Ok(row)))
            }
            _ => Poll::Ready(Some(Err(unsupported(
                STAGE,
                "a saved sequence's pieces are not in its documents",
            )))),
        }
    }
}

impl<D: Document> Resumable for Replay<D> {
    fn save(self: Pin<&mut Self>) -> anyhow::Result<State> {
        Err(self.members.not_saved())
    }

    fn last_prov(&self) -> anyhow::Result<Prov> {
        self.members.last_prov()
    }
}

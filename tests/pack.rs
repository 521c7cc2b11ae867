//! `Dataset::pack`: the sequences Grain's packing transformations make of the same documents
//! (tests/data/pack/cases.json, written by scripts/make_pack_cases.py with Grain 0.2.18), and
//! what every policy keeps: each token once, in its document's order, with its segment and
//! position.

use futures::StreamExt;
use rand::{Rng, SeedableRng};
use serde::Deserialize;
use streamload::distribute::{
    Coverage, CoverageReport, Distribute, Remainder, ShardPolicy, ShardSource, Unit,
};
use streamload::text::{Packed, Packing};
use streamload::{Dataset, Mixture};

#[derive(Deserialize)]
struct Cases {
    grain: String,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    policy: String,
    length: usize,
    bins: Option<usize>,
    docs: Vec<Vec<u32>>,
    rows: Vec<Row>,
}

#[derive(Deserialize)]
struct Row {
    tokens: Vec<u32>,
    segment_ids: Vec<i32>,
    positions: Vec<i32>,
}

fn policy(name: &str, bins: Option<usize>) -> Packing {
    match (name, bins) {
        ("concat_then_split", None) => Packing::ConcatThenSplit,
        ("first_fit", Some(bins)) => Packing::FirstFit { bins },
        ("best_fit", Some(bins)) => Packing::BestFit { bins },
        other => panic!("unknown case {other:?}"),
    }
}

#[tokio::test]
async fn packs_as_grain_does() {
    let cases: Cases = serde_json::from_slice(
        &std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/pack/cases.json"
        ))
        .expect("tests/data/pack/cases.json"),
    )
    .expect("cases.json");
    assert_eq!(cases.grain, "0.2.18");
    assert_eq!(cases.cases.len(), 12);
    for case in &cases.cases {
        let packing = policy(&case.policy, case.bins);
        let what = format!("{packing:?}, length {}", case.length);
        let rows = Dataset::from_vec(case.docs.clone())
            .pack(case.length, packing)
            .collect()
            .await
            .expect(&what);
        assert_eq!(rows.len(), case.rows.len(), "{what}: number of sequences");
        for (i, (got, want)) in rows.iter().zip(&case.rows).enumerate() {
            assert_eq!(got.tokens, want.tokens, "{what}: sequence {i}: tokens");
            assert_eq!(
                got.segment_ids, want.segment_ids,
                "{what}: sequence {i}: segments"
            );
            assert_eq!(
                got.positions, want.positions,
                "{what}: sequence {i}: positions"
            );
            let mask: Vec<bool> = want.segment_ids.iter().map(|&s| s != 0).collect();
            assert_eq!(got.loss_mask, mask, "{what}: sequence {i}: loss mask");
        }
    }
}

/// Documents whose tokens say where they are: document `d`'s token `i` is `d * 10_000 + i`.
fn numbered(lengths: &[usize]) -> Vec<Vec<u32>> {
    (0..)
        .zip(lengths)
        .map(|(d, &n)| (0..n as u32).map(|i| d * 10_000 + i).collect())
        .collect()
}

/// Checks the sequences of `packing` over documents of `lengths`: every sequence `len` long,
/// segments numbered from 1 with positions from 0 and padding only at the end, every token
/// of every document once and in order (in the fit policies, each piece of a split document
/// in order); a document split only where the policy may split it. Returns the padding.
fn check(lengths: &[usize], len: usize, packing: Packing, rows: &[Packed]) -> usize {
    let what = format!("{packing:?}, length {len}, documents {lengths:?}");
    let mut pieces: Vec<Vec<Vec<u32>>> = vec![Vec::new(); lengths.len()];
    let mut padding = 0;
    for (r, row) in rows.iter().enumerate() {
        assert_eq!(row.tokens.len(), len, "{what}: sequence {r}");
        assert_eq!(row.segment_ids.len(), len);
        assert_eq!(row.positions.len(), len);
        assert_eq!(row.loss_mask.len(), len);
        let used = row.num_tokens();
        padding += len - used;
        assert!(
            row.loss_mask[..used].iter().all(|&m| m),
            "{what}: padding inside {r}"
        );
        assert!(row.segment_ids[used..].iter().all(|&s| s == 0));
        assert!(row.tokens[used..].iter().all(|&t| t == 0));
        let mut i = 0;
        let mut segment = 0;
        while i < used {
            segment += 1;
            assert_eq!(row.segment_ids[i], segment, "{what}: sequence {r} at {i}");
            let doc = (row.tokens[i] / 10_000) as usize;
            let mut piece = Vec::new();
            while i < used && row.segment_ids[i] == segment {
                assert_eq!(
                    row.positions[i] as usize,
                    piece.len(),
                    "{what}: sequence {r}"
                );
                assert_eq!(
                    (row.tokens[i] / 10_000) as usize,
                    doc,
                    "{what}: two documents"
                );
                piece.push(row.tokens[i]);
                i += 1;
            }
            pieces[doc].push(piece);
        }
    }
    for (d, (&n, doc)) in lengths.iter().zip(pieces.iter_mut()).enumerate() {
        // A split document's pieces come in its order, under every policy.
        let whole: Vec<u32> = doc.concat();
        let want: Vec<u32> = (0..n as u32).map(|i| d as u32 * 10_000 + i).collect();
        assert_eq!(
            whole, want,
            "{what}: document {d}: tokens lost, repeated or out of order"
        );
        if !matches!(packing, Packing::ConcatThenSplit) {
            // Split only when longer than a sequence: into a head and whole sequences.
            assert_eq!(
                doc.len(),
                n.div_ceil(len),
                "{what}: document {d} split needlessly"
            );
            assert!(doc.iter().skip(1).all(|p| p.len() == len));
        }
    }
    if matches!(packing, Packing::ConcatThenSplit) {
        // No padding but in the last sequence.
        assert!(
            rows.iter().rev().skip(1).all(|r| r.num_tokens() == len),
            "{what}"
        );
    }
    padding
}

#[tokio::test]
async fn every_token_once_in_order_under_every_policy() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for round in 0..40 {
        let len = [1, 3, 8, 32][round % 4];
        let n = rng.random_range(0..60);
        // Empty documents, short ones, and ones several sequences long.
        let lengths: Vec<usize> = (0..n).map(|_| rng.random_range(0..3 * len + 2)).collect();
        for packing in [
            Packing::ConcatThenSplit,
            Packing::FirstFit { bins: 1 },
            Packing::FirstFit { bins: 4 },
            Packing::BestFit { bins: 1 },
            Packing::BestFit { bins: 5 },
        ] {
            let rows = Dataset::from_vec(numbered(&lengths))
                .pack(len, packing)
                .collect()
                .await
                .unwrap();
            check(&lengths, len, packing, &rows);
        }
    }
}

#[tokio::test]
async fn more_bins_pad_less_and_best_fit_no_more_than_first_fit() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let lengths: Vec<usize> = (0..2000).map(|_| rng.random_range(1..=128)).collect();
    let mut padding = Vec::new();
    for packing in [
        Packing::FirstFit { bins: 1 },
        Packing::FirstFit { bins: 16 },
        Packing::BestFit { bins: 16 },
    ] {
        let rows = Dataset::from_vec(numbered(&lengths))
            .pack(128, packing)
            .collect()
            .await
            .unwrap();
        padding.push(check(&lengths, 128, packing, &rows));
    }
    assert!(padding[1] < padding[0] / 2, "{padding:?}");
    assert!(padding[2] <= padding[1], "{padding:?}");
}

#[tokio::test]
async fn an_error_passes_in_a_sequences_place_and_packing_goes_on_around_it() {
    let lengths = [5, 3, 7, 2, 9, 4];
    let docs = numbered(&lengths);
    for packing in [Packing::ConcatThenSplit, Packing::BestFit { bins: 2 }] {
        let clean: Vec<Packed> = Dataset::from_vec(docs.clone())
            .pack(6, packing)
            .collect()
            .await
            .unwrap();
        // The same documents with an error element after the third.
        let with_error = Dataset::from_vec((0..7).collect::<Vec<usize>>()).try_map({
            let docs = docs.clone();
            move |i| match i {
                3 => Err(anyhow::anyhow!("document 3 is damaged")),
                i if i > 3 => Ok(docs[i - 1].clone()),
                i => Ok(docs[i].clone()),
            }
        });
        let mut epoch = with_error.pack(6, packing).iter();
        let (mut rows, mut errors) = (Vec::new(), Vec::new());
        while let Some(item) = epoch.next().await {
            match item {
                Ok(row) => rows.push(row),
                Err(e) => errors.push(format!("{e:#}")),
            }
        }
        assert_eq!(rows, clean, "{packing:?}");
        assert_eq!(errors.len(), 1, "{packing:?}");
        assert!(errors[0].contains("document 3 is damaged"), "{errors:?}");
    }
}

#[test]
#[should_panic(expected = "pack: the sequence length must be at least 1")]
fn a_sequence_length_of_zero_is_refused() {
    let _ = Dataset::from_vec(vec![vec![1u32]]).pack(0, Packing::ConcatThenSplit);
}

#[test]
#[should_panic(expected = "pack: the number of bins must be at least 1")]
fn zero_bins_are_refused() {
    let _ = Dataset::from_vec(vec![vec![1u32]]).pack(4, Packing::FirstFit { bins: 0 });
}

/// Megatron-LM's GPT samples (`GPTDataset` over one epoch of documents in order, with
/// `add_extra_token_to_sequence`), as its `build_sample_idx` (megatron/core/datasets/
/// helpers.cpp) walks them: each sample boundary is a (document, offset) pair, a sample
/// holds `sequence_length + 1` tokens from its boundary to the next one inclusive (the
/// last token is the next sample's first: the targets' shift), and there are
/// `(tokens - 1) / sequence_length` samples.
fn megatron_samples(docs: &[Vec<u32>], len: usize) -> Vec<Vec<u32>> {
    let total: usize = docs.iter().map(Vec::len).sum();
    let count = total.saturating_sub(1) / len;
    let mut bounds = vec![(0usize, 0usize)];
    let (mut doc, mut offset) = (0usize, 0usize);
    for _ in 0..count {
        let mut remaining = (len + 1) as i64;
        while remaining != 0 {
            let doc_length = (docs[doc].len() - offset) as i64;
            remaining -= doc_length;
            if remaining <= 0 {
                // The sample ends in this document; the next starts on its last token.
                offset += (remaining + doc_length - 1) as usize;
                remaining = 0;
            } else {
                doc += 1;
                offset = 0;
            }
        }
        bounds.push((doc, offset));
    }
    bounds
        .windows(2)
        .map(|w| {
            let ((d0, o0), (d1, o1)) = (w[0], w[1]);
            let mut sample = Vec::new();
            for (d, doc) in docs.iter().enumerate().take(d1 + 1).skip(d0) {
                let from = if d == d0 { o0 } else { 0 };
                let to = if d == d1 { o1 + 1 } else { doc.len() };
                sample.extend_from_slice(&doc[from..to]);
            }
            sample
        })
        .collect()
}

#[tokio::test]
async fn concatenate_and_split_gives_megatrons_samples_without_their_extra_token() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(17);
    for len in [1, 4, 16, 100] {
        // Megatron's documents are never empty (its index stores sizes of at least 1).
        let lengths: Vec<usize> = (0..50).map(|_| rng.random_range(1..3 * len + 2)).collect();
        let docs = numbered(&lengths);
        let samples = megatron_samples(&docs, len);
        let rows = Dataset::from_vec(docs)
            .pack(len, Packing::ConcatThenSplit)
            .collect()
            .await
            .unwrap();
        assert!(rows.len() >= samples.len());
        for (i, sample) in samples.iter().enumerate() {
            assert_eq!(sample.len(), len + 1);
            // Megatron's inputs are the sequence; its last target the next sequence's first.
            assert_eq!(
                &sample[..len],
                &rows[i].tokens[..],
                "length {len}, sample {i}"
            );
            assert_eq!(
                sample[len],
                rows[i + 1].tokens[0],
                "length {len}, sample {i}"
            );
        }
    }
}

/// Documents in files, in memory: file `f`'s record `r` holds tokens `base(f, r) + i`, so
/// every token says where it is.
#[derive(Clone)]
struct DocFiles(Vec<Vec<Vec<u32>>>);

fn base(file: usize, record: u64) -> u32 {
    (file as u32 + 1) * 1_000_000 + record as u32 * 1_000
}

impl DocFiles {
    fn new(counts: &[usize], seed: u64) -> DocFiles {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        DocFiles(
            counts
                .iter()
                .enumerate()
                .map(|(f, &n)| {
                    (0..n as u64)
                        .map(|r| {
                            let len = rng.random_range(0..60);
                            (0..len).map(|i| base(f, r) + i).collect()
                        })
                        .collect()
                })
                .collect(),
        )
    }

    fn tokens(&self) -> Vec<u32> {
        let mut all: Vec<u32> = self.0.iter().flatten().flatten().copied().collect();
        all.sort_unstable();
        all
    }
}

impl ShardSource for DocFiles {
    type Item = Vec<u32>;

    fn names(&self) -> Vec<String> {
        (0..self.0.len()).map(|f| format!("docs-{f}")).collect()
    }

    fn count(&self) -> futures::future::BoxFuture<'_, anyhow::Result<Vec<u64>>> {
        let counts = self.0.iter().map(|f| f.len() as u64).collect();
        Box::pin(futures::future::ready(Ok(counts)))
    }

    fn read(&self, unit: Unit) -> Dataset<Vec<u32>> {
        Dataset::from_vec(self.0[unit.file][unit.start as usize..unit.end as usize].to_vec())
    }
}

/// The tokens of a sequence's segments that are not padding, each checked against the piece
/// the sequence says it is.
fn taken_tokens(row: &Packed, out: &mut Vec<u32>) {
    let segments = row.segment_ids.iter().copied().max().unwrap_or(0) as usize;
    let pieces: Vec<_> = row.pieces.iter().filter(|p| p.start < p.end).collect();
    assert_eq!(pieces.len(), segments, "a piece per segment");
    for (s, piece) in (1..).zip(pieces) {
        let tokens: Vec<u32> = (0..row.tokens.len())
            .filter(|&i| row.segment_ids[i] == s)
            .map(|i| row.tokens[i])
            .collect();
        let expected: Vec<u32> = (piece.start..piece.end)
            .map(|i| base(piece.file, piece.record) + i as u32)
            .collect();
        assert_eq!(tokens, expected, "segment {s} is the piece {piece:?}");
        if !piece.padded {
            out.extend(tokens);
        }
    }
}

/// Takes up to `steps` sequences of a rank's dataset (all with `None`), adding each to the
/// rank's coverage and its tokens to `tokens`.
async fn take_sequences(
    ds: Dataset<Packed>,
    coverage: &mut Coverage,
    steps: Option<usize>,
    tokens: &mut Vec<u32>,
) -> usize {
    let mut it = ds.iter();
    let mut n = 0;
    while steps.is_none_or(|s| n < s) {
        let Some(row) = it.next().await else { break };
        let row = row.unwrap();
        taken_tokens(&row, tokens);
        coverage.add_pieces(&row.pieces);
        n += 1;
    }
    n
}

#[tokio::test]
async fn an_elastic_resume_of_packed_ranks_neither_loses_nor_repeats_a_token() {
    let data = DocFiles::new(&[7, 3, 11, 5, 9, 4], 11);
    for packing in [
        Packing::ConcatThenSplit,
        Packing::FirstFit { bins: 3 },
        Packing::BestFit { bins: 2 },
    ] {
        let mut tokens = Vec::new();
        let mut coverages = Vec::new();
        // Two ranks, stopped after a few sequences each (not in step); then three ranks on
        // the rest, stopped again; then one rank to the end of the epoch.
        let mut previous: Option<Vec<Coverage>> = None;
        for (world, steps) in [
            (2, [Some(4), Some(2)].as_slice()),
            (3, &[Some(3), Some(1), Some(5)]),
            (1, &[None]),
        ] {
            let mut phase = Vec::new();
            for (rank, &steps) in steps.iter().enumerate() {
                let dist = Distribute::new(rank, world)
                    .policy(ShardPolicy::File)
                    .remainder(Remainder::Pad);
                let mut plan = dist.plan(data.clone()).await.unwrap();
                if let Some(old) = &previous {
                    plan = plan.resume(old).unwrap();
                }
                let mut coverage = plan.coverage(0);
                let ds = plan.dataset().pack(16, packing);
                take_sequences(ds, &mut coverage, steps, &mut tokens).await;
                phase.push(coverage);
            }
            coverages.extend(phase.iter().cloned());
            previous = Some(coverages.clone());
        }
        tokens.sort_unstable();
        assert_eq!(tokens, data.tokens(), "{packing:?}: every token once");
        let report = CoverageReport::merge(&coverages).unwrap();
        assert!(
            report.disjoint() && report.complete(),
            "{packing:?}: {report}"
        );
    }
}

#[tokio::test]
async fn a_document_taken_in_part_and_whole_by_two_ranks_is_refused() {
    let data = DocFiles::new(&[4, 4], 3);
    let piece = |end, last| streamload::distribute::Piece {
        file: 0,
        record: 1,
        start: 0,
        end,
        last,
        padded: false,
    };
    let two = Distribute::new(0, 2).plan(data.clone()).await.unwrap();
    let mut first = two.coverage(0);
    first.add_pieces(&[piece(3, false)]);
    let mut second = Distribute::new(1, 2)
        .plan(data.clone())
        .await
        .unwrap()
        .coverage(0);
    second.add_pieces(&[piece(10, true)]);
    let err = two.resume(&[first, second]).unwrap_err().to_string();
    assert!(err.contains("took record 1 of docs-0 whole"), "{err}");

    // A part, then the rest in a later phase: the document went on, and is not dealt again.
    let one = Distribute::new(0, 1).plan(data).await.unwrap();
    let mut part = one.coverage(0);
    part.add_pieces(&[piece(3, false)]);
    let rest = one.resume(std::slice::from_ref(&part)).unwrap();
    let mut later = rest.coverage(0);
    later.add_pieces(&[piece(10, true)]);
    let again = one.resume(&[part, later]).unwrap();
    let units = again.units(0);
    assert!(
        !units
            .iter()
            .any(|u| u.file == 0 && (u.start..u.end).contains(&1)),
        "{units:?}"
    );
}

/// A mixture of two packed sources over ranks: 2 ranks, then 3 on the rest of the epoch with
/// the schedule going on from the steps taken (`Mixture::starting_at`).
#[tokio::test]
async fn an_elastic_resume_of_a_mixture_goes_on_with_its_schedule_and_every_token_once() {
    let sources = [
        DocFiles::new(&[9, 6, 8, 7], 21),
        DocFiles::new(&[5, 10, 6], 22),
    ];
    // Source 0 alone before step 6, source 1 alone at steps 6 and 7, then both.
    let schedule = Mixture::piecewise(vec![
        (0, vec![1.0, 0.0]),
        (6, vec![0.0, 1.0]),
        (8, vec![1.0, 1.0]),
    ]);
    let mut tokens = Vec::new();
    let mut coverages: [Vec<Coverage>; 2] = Default::default();
    let mut previous: Option<[Vec<Coverage>; 2]> = None;
    for (world, steps, start) in [
        (2, [Some(4), Some(4)].as_slice(), 0),
        (3, &[None, None, None], 4),
    ] {
        let mut phase: [Vec<Coverage>; 2] = Default::default();
        for (rank, &steps) in steps.iter().enumerate() {
            let dist = Distribute::new(rank, world)
                .policy(ShardPolicy::File)
                .remainder(Remainder::Pad);
            let mut inputs = Vec::new();
            let mut covs = Vec::new();
            for (s, data) in sources.iter().enumerate() {
                let mut plan = dist.plan(data.clone()).await.unwrap();
                if let Some(old) = &previous {
                    plan = plan.resume(&old[s]).unwrap();
                }
                covs.push(plan.coverage(0));
                inputs.push(
                    plan.dataset()
                        .pack(16, Packing::ConcatThenSplit)
                        .map(move |p| (s, p)),
                );
            }
            let mixture = schedule.clone().starting_at(start);
            let mut it = Dataset::mix(inputs, mixture, Some(7 + rank as u64)).iter();
            let mut n = 0;
            while steps.is_none_or(|s| n < s) {
                let Some(next) = it.next().await else { break };
                let (s, row) = next.unwrap();
                let step = start + n as u64;
                if step < 8 {
                    let only = usize::from(step >= 6);
                    assert_eq!(
                        s, only,
                        "step {step} of the schedule draws source {only} only"
                    );
                }
                taken_tokens(&row, &mut tokens);
                covs[s].add_pieces(&row.pieces);
                n += 1;
            }
            for (s, c) in covs.into_iter().enumerate() {
                phase[s].push(c);
            }
        }
        for s in 0..2 {
            coverages[s].extend(phase[s].iter().cloned());
        }
        previous = Some(coverages.clone());
    }
    tokens.sort_unstable();
    let mut all: Vec<u32> = sources.iter().flat_map(DocFiles::tokens).collect();
    all.sort_unstable();
    assert_eq!(tokens, all, "every token of both sources once");
    for c in &coverages {
        let report = CoverageReport::merge(c).unwrap();
        assert!(report.disjoint() && report.complete(), "{report}");
    }
}

/// After an elastic resume (documents handed on part-way), a checkpoint of a rank's packed
/// sequences resumes them exactly, pieces and all.
#[tokio::test]
async fn packed_ranks_after_an_elastic_resume_checkpoint_exactly() {
    let data = DocFiles::new(&[6, 9, 4], 5);
    for packing in [Packing::ConcatThenSplit, Packing::BestFit { bins: 3 }] {
        let mut old = Vec::new();
        for rank in 0..2 {
            let plan = Distribute::new(rank, 2).plan(data.clone()).await.unwrap();
            let mut coverage = plan.coverage(0);
            let ds = plan.dataset().pack(16, packing);
            take_sequences(ds, &mut coverage, Some(3), &mut Vec::new()).await;
            old.push(coverage);
        }
        let plan = Distribute::new(0, 1)
            .plan(data.clone())
            .await
            .unwrap()
            .resume(&old)
            .unwrap();
        let ds = plan.dataset().pack(16, packing);
        let full = ds.collect().await.unwrap();
        assert!(
            full.iter()
                .any(|row| row.pieces.iter().any(|p| p.start > 0))
        );
        for k in [0, 1, 2, 5, full.len() / 2, full.len() - 1] {
            let mut epoch = ds.iter();
            let mut seen = Vec::new();
            for _ in 0..k {
                seen.push(epoch.next().await.unwrap().unwrap());
            }
            let bytes = epoch.checkpoint().unwrap().to_bytes();
            drop(epoch);
            let restored = streamload::Checkpoint::from_bytes(&bytes).unwrap();
            let mut resumed = ds.iter_from(&restored).unwrap();
            while let Some(row) = resumed.next().await {
                seen.push(row.unwrap());
            }
            assert_eq!(seen, full, "{packing:?}: resumed at {k}");
        }
    }
}

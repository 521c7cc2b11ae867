//! `Dataset::pack`: the sequences Grain's packing transformations make of the same documents
//! (tests/data/pack/cases.json, written by scripts/make_pack_cases.py with Grain 0.2.18), and
//! what every policy keeps: each token once, in its document's order, with its segment and
//! position.

use futures::StreamExt;
use rand::{Rng, SeedableRng};
use serde::Deserialize;
use streamload::Dataset;
use streamload::text::{Packed, Packing};

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
        if !matches!(packing, Packing::ConcatThenSplit) {
            // A split document's pieces go where they fit, in any order of sequences.
            doc.sort_by_key(|p| p[0]);
        }
        let whole: Vec<u32> = doc.concat();
        let want: Vec<u32> = (0..n as u32).map(|i| d as u32 * 10_000 + i).collect();
        assert_eq!(
            whole, want,
            "{what}: document {d}: tokens lost, repeated or out of order"
        );
        if !matches!(packing, Packing::ConcatThenSplit) {
            // Split only when longer than a sequence: into whole sequences and a rest.
            assert_eq!(
                doc.len(),
                n.div_ceil(len),
                "{what}: document {d} split needlessly"
            );
            assert!(doc.iter().rev().skip(1).all(|p| p.len() == len));
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

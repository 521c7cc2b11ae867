//! Megatron-LM indexed datasets: files written by Megatron's own code
//! (`scripts/make_megatron.py`, megatron-core 0.16.1) read as Megatron reads them, written
//! byte for byte as Megatron writes them, resumed exactly, and damaged or mismatched pairs
//! refused with errors naming the file.

use std::path::{Path, PathBuf};

use futures::StreamExt;
use serde_json::Value;
use streamload::Checkpoint;
use streamload::format::megatron::{MegatronDataset, MegatronWriter, TokenType};

#[path = "support/s3.rs"]
mod s3;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/megatron")
}

fn expected() -> Value {
    let text = std::fs::read_to_string(data().join("expected.json")).expect("expected.json");
    serde_json::from_str(&text).expect("JSON")
}

fn prefix(name: &str) -> String {
    data()
        .join(name)
        .to_str()
        .expect("a UTF-8 path")
        .to_string()
}

/// Each document as Megatron reads it: its sequences' tokens, one after another.
fn documents(case: &Value) -> Vec<Vec<u32>> {
    let sequences: Vec<Vec<u32>> = serde_json::from_value(case["sequences"].clone()).unwrap();
    let bounds: Vec<usize> = serde_json::from_value(case["document_indices"].clone()).unwrap();
    bounds
        .windows(2)
        .map(|w| sequences[w[0]..w[1]].concat())
        .collect()
}

#[tokio::test]
async fn files_megatron_wrote_read_as_megatron_reads_them() -> anyhow::Result<()> {
    let expected = expected();
    for name in [
        "docs_uint16",
        "sentences_int32",
        "multimodal_uint16",
        "merged_uint16",
    ] {
        let want = documents(&expected[name]);
        let corpus = MegatronDataset::open([prefix(name)]).await?;
        assert_eq!(corpus.num_documents(), want.len() as u64, "{name}");
        let got = corpus.documents().collect().await?;
        assert_eq!(got, want, "{name}");
        for (d, doc) in want.iter().enumerate() {
            assert_eq!(&corpus.read_document(d as u64).await?, doc, "{name} {d}");
        }
    }
    // Several pairs: documents numbered across them, in order.
    let both = MegatronDataset::open([prefix("docs_uint16"), prefix("sentences_int32")]).await?;
    let mut want = documents(&expected["docs_uint16"]);
    want.extend(documents(&expected["sentences_int32"]));
    assert_eq!(both.documents().collect().await?, want);
    assert_eq!(both.read_document(7).await?, want[7]);
    let e = both.read_document(want.len() as u64).await.unwrap_err();
    assert!(format!("{e:#}").contains("past the last"), "{e:#}");
    Ok(())
}

#[tokio::test]
async fn the_writer_writes_what_megatron_writes() -> anyhow::Result<()> {
    let expected = expected();
    let dir = tempfile::tempdir()?;
    for (name, tokens) in [
        ("docs_uint16", TokenType::U16),
        ("merged_uint16", TokenType::U16),
    ] {
        let out = dir.path().join(name);
        let mut writer = MegatronWriter::create(&out, tokens)?;
        for doc in documents(&expected[name]) {
            writer.add_document(&doc)?;
        }
        writer.finish()?;
        for ext in ["bin", "idx"] {
            let ours = std::fs::read(dir.path().join(format!("{name}.{ext}")))?;
            let theirs = std::fs::read(data().join(format!("{name}.{ext}")))?;
            assert!(ours == theirs, "{name}.{ext} differs from Megatron's");
        }
    }
    let mut writer = MegatronWriter::create(dir.path().join("small"), TokenType::U8)?;
    let e = writer.add_document(&[1, 300]).unwrap_err();
    assert!(format!("{e:#}").contains("token 1 (300)"), "{e:#}");
    Ok(())
}

#[tokio::test]
async fn shuffled_and_sharded_orders_hold_every_document_once() -> anyhow::Result<()> {
    let corpus =
        MegatronDataset::open([prefix("merged_uint16"), prefix("sentences_int32")]).await?;
    let all = corpus.documents().collect().await?;
    let shuffled = corpus.clone().shuffle_documents(3).documents();
    let (a, b) = (shuffled.collect().await?, shuffled.collect().await?);
    assert_ne!(a, all, "shuffled");
    assert_ne!(a, b, "another order each epoch");
    let (mut a, mut sorted) = (a, all.clone());
    a.sort();
    sorted.sort();
    assert_eq!(a, sorted, "every document once");
    let mut shards = Vec::new();
    for i in 0..3 {
        shards.extend(corpus.clone().shard(3, i).documents().collect().await?);
    }
    shards.sort();
    assert_eq!(
        shards, sorted,
        "the shards together hold every document once"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_resume_exactly_shuffled_and_under_a_shuffle() -> anyhow::Result<()> {
    let corpus =
        MegatronDataset::open([prefix("merged_uint16"), prefix("sentences_int32")]).await?;
    // A fresh recipe each time: an epoch's order is drawn from its number, and each
    // iteration of one recipe is the next epoch.
    let recipes: [&dyn Fn() -> streamload::Dataset<Vec<u32>>; 3] = [
        &|| corpus.documents(),
        &|| corpus.clone().shuffle_documents(9).documents(),
        &|| {
            corpus
                .documents()
                .shuffle(4, Some(1))
                .batch(2)
                .map(|b| b.concat())
        },
    ];
    for (r, make) in recipes.iter().enumerate() {
        let whole: Vec<String> = make()
            .collect()
            .await?
            .into_iter()
            .map(|x| format!("{x:?}"))
            .collect();
        for at in 0..whole.len() {
            let mut epoch = make().iter();
            for _ in 0..at {
                epoch.next().await.expect("an element")?;
            }
            let checkpoint = Checkpoint::from_bytes(&epoch.checkpoint()?.to_bytes())?;
            drop(epoch);
            let mut rest = Vec::new();
            let mut resumed = make().iter_from(&checkpoint)?;
            while let Some(x) = resumed.next().await {
                rest.push(format!("{:?}", x?));
            }
            assert_eq!(rest, whole[at..], "recipe {r}, resumed after {at}");
        }
    }
    Ok(())
}

#[tokio::test]
async fn damaged_and_mismatched_pairs_are_refused_naming_the_file() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let idx = std::fs::read(data().join("docs_uint16.idx"))?;
    let bin = std::fs::read(data().join("docs_uint16.bin"))?;
    let cases: Vec<(&str, Vec<u8>, Vec<u8>, &str)> = vec![
        (
            "header",
            [b"NOTANIDX\0".as_slice(), &idx[9..]].concat(),
            bin.clone(),
            "no MMIDIDX header",
        ),
        (
            "version",
            [&idx[..9], &2u64.to_le_bytes()[..], &idx[17..]].concat(),
            bin.clone(),
            "version 2",
        ),
        (
            "float",
            [&idx[..17], &[7u8][..], &idx[18..]].concat(),
            bin.clone(),
            "floats",
        ),
        (
            "code",
            [&idx[..17], &[9u8][..], &idx[18..]].concat(),
            bin.clone(),
            "type code 9",
        ),
        (
            "truncated idx",
            idx[..idx.len() - 3].to_vec(),
            bin.clone(),
            "truncated",
        ),
        (
            "short bin",
            idx.clone(),
            bin[..bin.len() - 2].to_vec(),
            "a truncated .bin",
        ),
        (
            "long bin",
            idx.clone(),
            [bin.as_slice(), &[0, 0]].concat(),
            "another index's .bin",
        ),
    ];
    for (what, idx, bin, says) in cases {
        let prefix = dir.path().join(what.replace(' ', "_"));
        std::fs::write(prefix.with_extension("idx"), idx)?;
        std::fs::write(prefix.with_extension("bin"), bin)?;
        let e = MegatronDataset::open([prefix.to_str().unwrap()])
            .await
            .unwrap_err();
        let message = format!("{e:#}");
        assert!(message.contains(says), "{what}: {message}");
        assert!(
            message.contains(".idx"),
            "{what}: names the file: {message}"
        );
    }
    let e = MegatronDataset::open([dir.path().join("missing").to_str().unwrap()])
        .await
        .unwrap_err();
    assert!(format!("{e:#}").contains("missing.bin"), "{e:#}");
    // A negative token id in an int32 file: an error naming the file and the document.
    let out = dir.path().join("negative");
    let mut writer = MegatronWriter::create(&out, TokenType::I32)?;
    writer.add_document(&[1, 2])?;
    writer.add_document(&[3, 4, 5])?;
    writer.finish()?;
    let mut bin = std::fs::read(out.with_extension("bin"))?;
    bin[16..20].copy_from_slice(&(-7i32).to_le_bytes());
    std::fs::write(out.with_extension("bin"), bin)?;
    let corpus = MegatronDataset::open([out.to_str().unwrap()]).await?;
    let got: Vec<_> = corpus.documents().iter().collect::<Vec<_>>().await;
    assert!(got[0].is_ok());
    let e = got[1].as_ref().unwrap_err();
    assert!(
        format!("{e:#}").contains("negative.bin: document 1: token 2 is -7"),
        "{e:#}"
    );
    Ok(())
}

#[tokio::test]
async fn a_pair_that_changed_refuses_the_checkpoint() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let out = dir.path().join("corpus");
    let write = |first: u32| -> anyhow::Result<()> {
        let mut writer = MegatronWriter::create(&out, TokenType::U16)?;
        for d in 0..10 {
            writer.add_document(&[first + d, d, d])?;
        }
        writer.finish()
    };
    write(0)?;
    let name = out.to_str().unwrap().to_string();
    let corpus = MegatronDataset::open([&name]).await?;
    let mut epoch = corpus.documents().iter();
    epoch.next().await.expect("a document")?;
    let checkpoint = epoch.checkpoint()?;
    drop(epoch);
    // Rewritten with other tokens, the same sizes: reopened, the pair is another recipe's.
    std::thread::sleep(std::time::Duration::from_millis(20));
    write(100)?;
    let reopened = MegatronDataset::open([&name]).await?;
    let Err(e) = reopened.documents().iter_from(&checkpoint) else {
        panic!("a changed pair, and the checkpoint is accepted");
    };
    assert!(
        format!("{e:#}").contains("fingerprint") || format!("{e:#}").contains("recipe"),
        "{e:#}"
    );
    // The pair as it was resumes.
    assert!(corpus.documents().iter_from(&checkpoint).is_ok());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_storage_reads_as_local_files_do() -> anyhow::Result<()> {
    let server = s3::MemoryS3::default();
    for ext in ["bin", "idx"] {
        let bytes = std::fs::read(data().join(format!("sentences_int32.{ext}")))?;
        server.insert(
            "mg-bucket",
            &format!("corpus/sentences.{ext}"),
            bytes.into(),
        );
    }
    let addr = s3::memory_s3_server(server.clone(), "AKIDMG", "mg-secret").await;
    streamload::storage::register(
        "s3://mg-bucket",
        s3::s3_store(addr, "mg-bucket", "AKIDMG", "mg-secret"),
    )?;
    let remote = MegatronDataset::open(["s3://mg-bucket/corpus/sentences"]).await?;
    let local = MegatronDataset::open([prefix("sentences_int32")]).await?;
    assert_eq!(
        remote.documents().collect().await?,
        local.documents().collect().await?
    );
    assert_eq!(
        remote.read_document(3).await?,
        local.read_document(3).await?
    );
    let e = MegatronDataset::open(["s3://mg-bucket/corpus/missing"])
        .await
        .unwrap_err();
    assert!(
        format!("{e:#}").contains("s3://mg-bucket/corpus/missing.bin"),
        "{e:#}"
    );
    Ok(())
}

/// Megatron pairs dealt to ranks by runs of documents, packed, stopped, and resumed on
/// another number of ranks: every document's tokens are packed once, in order.
#[tokio::test]
async fn packed_ranks_over_megatron_pairs_resume_elastically() -> anyhow::Result<()> {
    use std::collections::BTreeMap;
    use streamload::distribute::{
        Coverage, CoverageReport, Distribute, Remainder, ShardPolicy, ShardSource,
    };
    use streamload::text::Packing;

    let names = ["docs_uint16", "sentences_int32", "merged_uint16"];
    let corpus = MegatronDataset::open(names.map(prefix)).await?;
    let counts = corpus.count().await?;
    let expected = expected();
    // The pieces of each document packed, by (pair, document): (start, tokens).
    type Pieces = Vec<(u64, Vec<u32>)>;
    let mut packed: BTreeMap<(usize, u64), Pieces> = BTreeMap::new();
    let mut coverages: Vec<Coverage> = Vec::new();
    for (world, steps) in [(2, Some(3)), (3, None)] {
        let mut phase = Vec::new();
        for rank in 0..world {
            let dist = Distribute::new(rank, world)
                .policy(ShardPolicy::Record)
                .remainder(Remainder::Pad);
            let mut plan = dist.plan(corpus.clone()).await?;
            if !coverages.is_empty() {
                plan = plan.resume(&coverages)?;
            }
            let mut coverage = plan.coverage(0);
            let sequences = plan.dataset().pack(32, Packing::BestFit { bins: 2 });
            let mut it = sequences.iter();
            let mut n = 0;
            while steps.is_none_or(|s| n < s) {
                let Some(row) = it.next().await else { break };
                let row = row?;
                let pieces = row.pieces.iter().filter(|p| p.start < p.end);
                for (s, piece) in (1..).zip(pieces) {
                    let tokens = (0..row.tokens.len())
                        .filter(|&i| row.segment_ids[i] == s)
                        .map(|i| row.tokens[i])
                        .collect();
                    if !piece.padded {
                        packed
                            .entry((piece.file, piece.record))
                            .or_default()
                            .push((piece.start, tokens));
                    }
                }
                coverage.add_pieces(&row.pieces);
                n += 1;
            }
            phase.push(coverage);
        }
        coverages.extend(phase);
    }
    for (file, name) in names.iter().enumerate() {
        let docs = documents(&expected[*name]);
        assert_eq!(docs.len() as u64, counts[file]);
        for (record, doc) in docs.iter().enumerate() {
            let mut pieces = packed.remove(&(file, record as u64)).unwrap_or_default();
            pieces.sort();
            let mut at = 0;
            for (start, tokens) in &pieces {
                assert_eq!(
                    *start, at,
                    "{name} document {record}: a piece lost or repeated"
                );
                at += tokens.len() as u64;
            }
            let whole: Vec<u32> = pieces.into_iter().flat_map(|(_, t)| t).collect();
            assert_eq!(&whole, doc, "{name} document {record}");
        }
    }
    assert!(packed.is_empty(), "pieces of no document: {packed:?}");
    let report = CoverageReport::merge(&coverages)?;
    assert!(report.disjoint() && report.complete(), "{report}");
    // A shuffled (or sharded) dataset is not dealt: the plan orders the documents.
    let err = Distribute::new(0, 2)
        .plan(corpus.clone().shuffle_documents(1))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("shuffle_documents"), "{err}");
    Ok(())
}

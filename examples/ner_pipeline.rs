//! Named-entity recognition batches from two text files: `sentences.txt` (one sentence per
//! line, words separated by spaces) and `labels.txt` (one tag per word, same layout), read with
//! `TextLineDataset`, zipped line by line, tokenized into word ids and tag ids, shuffled, and
//! padded into batches (words padded with 0, tags with -1 so a loss can mask them).
//!
//! ```text
//! cargo run --release --example ner_pipeline                  # generates 200,000 sentences
//! cargo run --release --example ner_pipeline -- --sentences S.txt --labels L.txt [--vocab WORDS.txt]
//! ```
//!
//! tf.data's `zip` stops at the end of the shorter input without a word, so a labels file one
//! line short silently drops a sentence, and a shifted file pairs sentences with the wrong tags.
//! This pipeline makes both mistakes errors: each file ends with an end marker, so if one ends
//! first, the pair (end, line) is an error element naming the line; and a sentence whose word
//! count differs from its tag count is an error naming the line. The example finishes by
//! showing the error for a labels file one line short.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail, ensure};
use bytes::Bytes;
use clap::Parser;
use futures::StreamExt;
use ndarray::Array2;
use rand::{Rng, SeedableRng};
use streamload::format::TextLineDataset;
use streamload::text::Vocabulary;
use streamload::{AUTOTUNE, Dataset, Options};

const TAGS: [&str; 9] = [
    "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-MISC", "I-MISC",
];

#[derive(Parser, Debug)]
#[command(about = "sentences.txt + labels.txt -> zipped, tokenized, padded batches")]
struct Args {
    /// Sentences, one per line (default: generated under the temporary directory).
    #[arg(long, requires = "labels")]
    sentences: Option<PathBuf>,
    /// One tag per word of the matching sentence.
    #[arg(long, requires = "sentences")]
    labels: Option<PathBuf>,
    /// Word vocabulary, one word per line (default: the generated one, or the first 20,000
    /// distinct words of the sentences).
    #[arg(long)]
    vocab: Option<PathBuf>,
    /// Sentences to generate.
    #[arg(long, default_value_t = 200_000)]
    generate: usize,
    /// Sentences per batch.
    #[arg(long, default_value_t = 32)]
    batch: usize,
}

/// Writes `sentences.txt`, `labels.txt` (entities of 1..=3 words among `O` words) and
/// `vocab.txt` (the 8,000 most common of the 10,000 words; the rest are out of vocabulary).
fn generate(dir: &Path, n: usize) -> anyhow::Result<(PathBuf, PathBuf, PathBuf)> {
    use std::io::Write;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x4E52);
    let words: Vec<String> = (0..10_000).map(|i| format!("w{i}")).collect();
    let (sentences, labels, vocab) = (
        dir.join("sentences.txt"),
        dir.join("labels.txt"),
        dir.join("vocab.txt"),
    );
    let mut s_out = std::io::BufWriter::new(std::fs::File::create(&sentences)?);
    let mut l_out = std::io::BufWriter::new(std::fs::File::create(&labels)?);
    for _ in 0..n {
        let len = rng.random_range(3..=40);
        let (mut ws, mut ts) = (Vec::with_capacity(len), Vec::with_capacity(len));
        while ws.len() < len {
            // Lower word ids are more common (a rough Zipf).
            let word = (rng.random_range(0.0f64..1.0).powi(3) * words.len() as f64) as usize;
            if rng.random_range(0..8) == 0 {
                let kind = rng.random_range(0..4);
                for k in 0..rng.random_range(1..=3).min(len - ws.len()) {
                    ws.push(words[(word + k) % words.len()].as_str());
                    ts.push(TAGS[1 + 2 * kind + usize::from(k > 0)]);
                }
            } else {
                ws.push(words[word].as_str());
                ts.push("O");
            }
        }
        writeln!(s_out, "{}", ws.join(" "))?;
        writeln!(l_out, "{}", ts.join(" "))?;
    }
    s_out.flush()?;
    l_out.flush()?;
    std::fs::write(&vocab, words[..8000].join("\n") + "\n")?;
    Ok((sentences, labels, vocab))
}

/// A file's lines, each `Some`, then one `None` marking its end.
fn lines_then_end(path: &Path) -> Dataset<Option<Bytes>> {
    TextLineDataset::new([path])
        .build()
        .map(Some)
        .concatenate(&Dataset::from_vec(vec![None]))
}

/// The zipped, checked, tokenized, padded batches: `(word ids, tag ids)`, each `[batch, len]`.
fn pipeline(
    sentences: &Path,
    labels: &Path,
    words: Arc<Vocabulary>,
    batch: usize,
) -> Dataset<(Array2<i64>, Array2<i64>)> {
    let tags = Vocabulary::from_tokens(TAGS).expect("distinct tags");
    let (s_name, l_name) = (
        sentences.display().to_string(),
        labels.display().to_string(),
    );
    Dataset::zip(lines_then_end(sentences), lines_then_end(labels))
        .take_while(|pair| !matches!(pair, (None, None)))
        .enumerate(1)
        .try_map_parallel(AUTOTUNE, move |(line, pair)| match pair {
            (Some(sentence), Some(label_line)) => {
                let ids = words.tokenize(&sentence);
                let tag_ids = tags.tokenize(&label_line);
                ensure!(
                    ids.len() == tag_ids.len(),
                    "line {line}: {} words in {s_name} but {} tags in {l_name}",
                    ids.len(),
                    tag_ids.len()
                );
                if let Some(at) = tag_ids.iter().position(|&t| t == tags.len() as i64) {
                    let tag = label_line
                        .split(u8::is_ascii_whitespace)
                        .filter(|w| !w.is_empty())
                        .nth(at)
                        .map(String::from_utf8_lossy)
                        .unwrap_or_default();
                    bail!("line {line} of {l_name}: unknown tag {tag:?} (word {})", at + 1);
                }
                Ok((ids, tag_ids))
            }
            (None, Some(_)) => bail!(
                "{s_name} ends after line {} but {l_name} goes on: the files must have as many lines",
                line - 1
            ),
            (Some(_), None) => bail!(
                "{l_name} ends after line {} but {s_name} goes on: the files must have as many lines",
                line - 1
            ),
            (None, None) => bail!("line {line}: both files ended"), // stopped by take_while
        })
        .shuffle(10_000, Some(7))
        .padded_batch(batch, None, Some((0, -1)), false)
        .prefetch(2)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let (sentences, labels, vocab_file) = match (args.sentences, args.labels) {
        (Some(s), Some(l)) => (s, l, args.vocab),
        _ => {
            let dir = std::env::temp_dir().join("streamload-ner-pipeline");
            let start = Instant::now();
            let (s, l, v) = generate(&dir, args.generate)?;
            println!(
                "generated {} sentences with labels in {} in {:.1} s",
                args.generate,
                dir.display(),
                start.elapsed().as_secs_f64()
            );
            (s, l, args.vocab.or(Some(v)))
        }
    };
    let words = match vocab_file {
        Some(file) => Vocabulary::from_file(&file).await?,
        None => {
            let mut seen = std::collections::HashSet::new();
            let lines = TextLineDataset::new([&sentences]).build().collect().await?;
            let tokens = lines
                .iter()
                .flat_map(|l| l.split(u8::is_ascii_whitespace))
                .filter(|w| !w.is_empty() && seen.insert(w.to_vec()))
                .take(20_000);
            Vocabulary::from_tokens(tokens)?
        }
    };
    let words = Arc::new(words.num_oov_buckets(16).reserve_padding_id(true));

    let ds = pipeline(&sentences, &labels, Arc::clone(&words), args.batch)
        .with_options(Options::new().stats_timing(true));
    let start = Instant::now();
    let mut epoch = ds.iter();
    let (mut sentences_seen, mut tokens, mut entities, mut batches) = (0usize, 0usize, 0usize, 0);
    let oov_start = 1 + words.len() as i64;
    let mut oov = 0usize;
    while let Some(batch) = epoch.next().await {
        let (ids, tags) = batch?;
        batches += 1;
        sentences_seen += ids.nrows();
        tokens += tags.iter().filter(|&&t| t >= 0).count();
        entities += tags.iter().filter(|&&t| t > 0 && t % 2 == 1).count(); // B- tags
        oov += ids.iter().filter(|&&id| id >= oov_start).count();
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{sentences_seen} sentences ({tokens} words, {entities} entities, {oov} out-of-vocabulary \
         words) in {batches} batches, {secs:.3} s = {:.0} sentences/s, {:.2} M words/s",
        sentences_seen as f64 / secs,
        tokens as f64 / secs / 1e6
    );
    print!("{}", epoch.stats());

    // A labels file one line short: tf.data's zip would drop the last sentence; here it fails.
    let dir = tempfile::tempdir()?;
    let short = dir.path().join("labels-short.txt");
    let text = std::fs::read(&labels)?;
    let cut = text[..text.len().saturating_sub(1)]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    std::fs::write(&short, &text[..cut])?;
    let mut epoch = pipeline(&sentences, &short, words, args.batch).iter();
    let mut failure = None;
    while let Some(batch) = epoch.next().await {
        if let Err(e) = batch {
            failure = Some(e);
            break;
        }
    }
    match failure {
        Some(e) => println!("\nwith a labels file one line short, the pipeline fails: {e:#}"),
        None => bail!("a labels file one line short went unnoticed"),
    }
    Ok(())
}

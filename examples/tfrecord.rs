//! A command-line tool for TFRecord files.
//!
//! ```text
//! cargo run --release --example tfrecord -- count data/*.tfrecord
//! cargo run --release --example tfrecord -- verify data/*.tfrecord      # exit code 1 if any file is damaged
//! cargo run --release --example tfrecord -- verify --resync data/x.tfrecord   # every damaged range
//! cargo run --release --example tfrecord -- cat --skip-damaged data/x.tfrecord  # every good record
//! cargo run --release --example tfrecord -- count 'data/train-*.tfrecord'   # the tool expands a quoted pattern
//! cargo run --release --example tfrecord -- head -n 3 --example data/train-00000.tfrecord
//! cargo run --release --example tfrecord -- cat data/train-00000.tfrecord   # --base64 for binary payloads
//! cargo run --release --example tfrecord -- index data/*.tfrecord        # writes data/<file>.idx (DALI's format)
//! cargo run --release --example tfrecord -- index --out-dir idx/ 's3://bucket/train-*.tfrecord'
//! printf 'a\nb\n' | cargo run --release --example tfrecord -- write --gzip out.tfrecord.gz
//! echo '{"label": [1], "weights": [0.5, 2.0], "text": ["hi"]}' | cargo run --release --example tfrecord -- write --json out.tfrecord
//! ```
//!
//! `write` takes each line's bytes as they are (any bytes, not only UTF-8; the `\n` or `\r\n`
//! ending it dropped), or with `--json` an object of feature lists per line (integers are
//! int64, and one outside int64 is an error; lists with other numbers are floats; strings
//! are bytes). On an error (a line that is not such an object, a failed read or write) it
//! stops, closes the file holding the records of the lines before (whole and readable), and
//! exits with code 2 naming the line.
//!
//! `index` reads each file once (CRCs checked), several files at once (`--jobs`, default the
//! number of cores), and writes its index in DALI's `tfrecord2idx` format (one `offset size`
//! line per record) beside it as `<file>.idx`, or with `--out-dir DIR` as `DIR/<file name>.idx`
//! (needed for URLs: the index is written locally). It prints `records<TAB>index path` per
//! file. A compressed file (no random access) or a damaged one is an `error:` line naming it;
//! the other files are indexed and the exit code is 1. Indexes are what
//! `streamload::format::IndexedTFRecords::open` (and DALI's reader) read.
//!
//! `head --example` prints a `tf.train.SequenceExample` that has feature lists as
//! `{"context": {...}, "feature_lists": {"name": [{"int64_list": [...]}, ...]}}`; one without
//! feature lists is byte for byte an Example and prints as one, unless `--sequence-example`
//! asks for every record in the SequenceExample form.
//!
//! `count`, `verify` and `cat` need at least one path, and a pattern that matches nothing is
//! an error naming it (exit code 2): an empty glob does not pass for an empty data set. A
//! damaged file among several is reported (`count` and `cat`: an `error:` line on stderr;
//! `verify`: a `DAMAGED` line) and the other files are read; the exit code is then 1, and
//! `count`'s total leaves the damaged files out. `verify --resync` reads on after each damage
//! (`TFRecordDataset::resync`) and lists every damaged range of a file, a line each:
//! `DAMAGED\trecord R\toffset O\tbytes START..END\tMESSAGE\tPATH`, then `damaged\tN records
//! read\tK damaged ranges\tPATH`; `cat --skip-damaged` prints every record that is whole, each
//! damaged range reported on stderr (`skipped: ...`); both exit with code 1 when anything was
//! damaged. When the reader of the output goes away
//! (`tfrecord cat x | head -1`), the tool stops quietly with exit code 0.
//!
//! Compression is taken from the file name (`.gz`, `.zz`) unless `--compression` says
//! otherwise. Paths may be URLs (`s3://bucket/train-00000.tfrecord`, `gs://...`, `az://...`,
//! `https://...`); stores are configured from the usual environment variables (`AWS_*`, ...).
//! A path or URL with glob characters (`*`, `?`, `[`) names the files or objects it matches
//! (`'data/train-*.tfrecord'` quoted, `s3://bucket/train-*.tfrecord`; listed through
//! `streamload::storage::glob`; not over `http(s)`, which cannot list); a local file whose
//! name has such characters and exists is read as it is.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use base64::Engine;
use clap::{Parser, Subcommand, ValueEnum};
use futures::StreamExt;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use streamload::Error;
use streamload::format::{
    Compression, Example, Feature, Features, Kind, SequenceExample, TFRecordDataset, TFRecordIndex,
    TFRecordWriter,
};
use streamload::storage::Location;
use tokio::io::AsyncBufReadExt;

#[derive(Parser, Debug)]
#[command(about = "Count, verify, print and write TFRecord files")]
struct Cli {
    /// How the files are compressed (default: by extension).
    #[arg(long, value_enum, default_value_t = CompressionArg::Auto, global = true)]
    compression: CompressionArg,
    /// Print each file's stage report (records, MB/s, waits) to stderr (count, verify).
    #[arg(long, global = true)]
    report: bool,
    /// Time each stage, so that --report can name the bottleneck (costs a little speed).
    #[arg(long, global = true)]
    timing: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum CompressionArg {
    Auto,
    None,
    Gzip,
    Zlib,
}

impl From<CompressionArg> for Compression {
    fn from(c: CompressionArg) -> Self {
        match c {
            CompressionArg::Auto => Compression::Auto,
            CompressionArg::None => Compression::None,
            CompressionArg::Gzip => Compression::Gzip,
            CompressionArg::Zlib => Compression::Zlib,
        }
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Records per file and in total (exit code 1 if a file could not be read through).
    Count {
        #[arg(required = true)]
        paths: Vec<Location>,
    },
    /// Checks every CRC; reports each damaged file with the record, offset and error.
    Verify {
        /// Read on after each damage and list every damaged range (record, offset, bytes).
        #[arg(long)]
        resync: bool,
        #[arg(required = true)]
        paths: Vec<Location>,
    },
    /// The first records of a file: payloads, or Examples decoded as JSON.
    Head {
        #[arg(short = 'n', default_value_t = 10)]
        n: usize,
        /// Decode each record as a tf.train.Example (a SequenceExample when it has feature
        /// lists: {"context": ..., "feature_lists": ...}) and print it as JSON.
        #[arg(long)]
        example: bool,
        /// Decode each record as a tf.train.SequenceExample and print it as
        /// {"context": ..., "feature_lists": ...}.
        #[arg(long, conflicts_with = "example")]
        sequence_example: bool,
        path: Location,
    },
    /// Every record's payload, one per line (base64 with --base64, else as text).
    Cat {
        #[arg(long)]
        base64: bool,
        /// Skip damaged records (resynchronising after each), reporting them on stderr.
        #[arg(long)]
        skip_damaged: bool,
        #[arg(required = true)]
        paths: Vec<Location>,
    },
    /// Writes each file's index (DALI's tfrecord2idx format: an `offset size` line per
    /// record) as <file>.idx, several files at once.
    Index {
        /// Write the indexes into this directory as <file name>.idx (needed for URLs).
        #[arg(long)]
        out_dir: Option<PathBuf>,
        /// Files indexed at once (default: the number of cores).
        #[arg(short = 'j', long)]
        jobs: Option<usize>,
        #[arg(required = true)]
        paths: Vec<Location>,
    },
    /// Reads lines from standard input and writes each as a record.
    Write {
        /// Each line is a JSON object of feature lists, written as a tf.train.Example.
        #[arg(long)]
        json: bool,
        /// GZIP-compress the output.
        #[arg(long, conflicts_with = "zlib")]
        gzip: bool,
        /// ZLIB-compress the output.
        #[arg(long)]
        zlib: bool,
        out: PathBuf,
    },
}

/// The files `paths` name: a path or URL with glob characters (`*`, `?`, `[`) stands for the
/// files or objects it matches, in order (a pattern the shell left alone: quoted, or matching
/// nothing); a pattern that matches nothing is an error naming it. A local file whose name
/// has those characters is itself.
async fn expand(paths: Vec<Location>) -> anyhow::Result<Vec<Location>> {
    const GLOB: [char; 3] = ['*', '?', '['];
    let mut files = Vec::with_capacity(paths.len());
    for path in paths {
        let pattern = match &path {
            Location::Url(url) if url.path().contains(GLOB) || url.query().is_some() => {
                url.as_str().to_string()
            }
            Location::Local(local) if local.to_string_lossy().contains(GLOB) && !local.exists() => {
                local
                    .to_str()
                    .with_context(|| format!("not a UTF-8 pattern: {}", local.display()))?
                    .to_string()
            }
            _ => {
                files.push(path);
                continue;
            }
        };
        files.extend(streamload::storage::glob(&pattern).await?);
    }
    Ok(files)
}

/// Standard output; when its reader has gone away (`tfrecord cat x | head -1`), writes
/// fail with a [`StdoutClosed`] error, which `main` turns into a quiet exit.
struct Stdout(std::io::Stdout);

/// Standard output was closed by its reader (`EPIPE`).
#[derive(Debug, thiserror::Error)]
#[error("standard output closed")]
struct StdoutClosed;

fn closed(e: std::io::Error) -> std::io::Error {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::io::Error::new(std::io::ErrorKind::BrokenPipe, StdoutClosed)
    } else {
        e
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf).map_err(closed)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush().map_err(closed)
    }
}

fn stdout_closed(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .is_some_and(|inner| inner.is::<StdoutClosed>())
    })
}

/// An error for stderr; a file that looks compressed gets this tool's flag for it.
fn describe(e: &anyhow::Error) -> String {
    format!("{e:#}{}", compression_flag(e))
}

/// "; with this tool: --compression gzip" for a file read as uncompressed that looks
/// compressed (the library's message names the library's setting).
fn compression_flag(e: &anyhow::Error) -> String {
    match e.downcast_ref::<Error>() {
        Some(Error::DataLoss {
            looks_compressed: Some(c),
            ..
        }) => format!(
            "; with this tool: --compression {}",
            format!("{c:?}").to_lowercase()
        ),
        _ => String::new(),
    }
}

fn records(
    path: &Location,
    compression: Compression,
    timing: bool,
) -> streamload::Epoch<bytes::Bytes> {
    records_resyncing(path, compression, timing, false)
}

/// [`records`], resynchronising after damage when `resync`.
fn records_resyncing(
    path: &Location,
    compression: Compression,
    timing: bool,
    resync: bool,
) -> streamload::Epoch<bytes::Bytes> {
    TFRecordDataset::new([path.clone()])
        .compression(compression)
        .resync(resync)
        .build()
        .with_options(streamload::Options::new().stats_timing(timing))
        .iter()
}

/// Whether `e` is damage a resynchronising reader stepped over (it reads on after it).
fn is_resynced(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<Error>(),
        Some(Error::DataLoss {
            skipped: Some(_),
            ..
        })
    )
}

/// The stage report of `epoch`, whose advice for timing the stages names this tool's flag.
fn report<T>(epoch: &streamload::Epoch<T>) -> streamload::Stats {
    epoch.stats().with_timing_advice("run with --timing")
}

/// An Example as JSON: `{"name": {"int64_list": [...]}}`; bytes as text when UTF-8, else base64.
fn example_json(example: &Example) -> Value {
    features_json(example.features.as_ref())
}

/// A SequenceExample as JSON: `{"context": {<as an Example>}, "feature_lists": {"name":
/// [<a feature per step>, ...]}}`.
fn sequence_example_json(sequence: &SequenceExample) -> Value {
    let lists: Map<String, Value> = sequence
        .feature_lists
        .iter()
        .flat_map(|lists| &lists.feature_list)
        .map(|(name, list)| {
            let steps = list.feature.iter().map(feature_json).collect();
            (name.clone(), Value::Array(steps))
        })
        .collect();
    json!({
        "context": features_json(sequence.context.as_ref()),
        "feature_lists": lists,
    })
}

/// A record as JSON: an Example, or a SequenceExample when it has feature lists (an Example
/// has no field 2, so a record with one is a SequenceExample; one without is read the same
/// either way) or when `sequence` asks for that form.
fn record_json(record: bytes::Bytes, sequence: bool) -> anyhow::Result<Value> {
    let parsed = SequenceExample::decode_record(record.clone());
    match parsed {
        Ok(s) if sequence || s.feature_lists.is_some() => Ok(sequence_example_json(&s)),
        Err(e) if sequence => Err(e),
        // Not a SequenceExample: the Example's own error, if it is not one either.
        _ => Ok(example_json(&Example::decode_record(record)?)),
    }
}

fn features_json(features: Option<&Features>) -> Value {
    let out: Map<String, Value> = features
        .iter()
        .flat_map(|f| &f.feature)
        .map(|(name, feature)| (name.clone(), feature_json(feature)))
        .collect();
    Value::Object(out)
}

fn feature_json(feature: &Feature) -> Value {
    match &feature.kind {
        Some(Kind::Int64List(l)) => json!({ "int64_list": l.value }),
        Some(Kind::FloatList(l)) => {
            let values: Vec<Value> = l.value.iter().map(|f| float_json(*f)).collect();
            json!({ "float_list": values })
        }
        Some(Kind::BytesList(l)) => {
            let values: Vec<Value> = l.value.iter().map(|b| bytes_json(b)).collect();
            json!({ "bytes_list": values })
        }
        None => Value::Null,
    }
}

fn float_json(f: f32) -> Value {
    if f.is_finite() {
        json!(f)
    } else {
        json!(f.to_string())
    }
}

fn bytes_json(b: &[u8]) -> Value {
    match std::str::from_utf8(b) {
        Ok(s) => json!(s),
        Err(_) => json!({ "b64": base64::engine::general_purpose::STANDARD.encode(b) }),
    }
}

/// A JSON object of feature lists as an Example: integers -> int64 (an integer outside
/// int64 is an error, not a float), lists with other numbers -> float, strings -> bytes.
fn json_example(line: &[u8]) -> anyhow::Result<Example> {
    // Raw values, to tell an integer literal from a float one: serde_json reads an integer
    // too large for 64 bits as a float.
    let object: BTreeMap<String, Box<RawValue>> =
        serde_json::from_slice(line).context("expected a JSON object of feature lists")?;
    let mut example = Example::new();
    for (name, raw) in &object {
        let items: Vec<Box<RawValue>> = match serde_json::from_str(raw.get()) {
            Ok(items) => items,
            Err(_) => vec![raw.clone()],
        };
        let values: Vec<Value> = items
            .iter()
            .map(|item| serde_json::from_str(item.get()))
            .collect::<Result<_, _>>()?;
        let integer_literal = |raw: &RawValue| {
            let text = raw.get().strip_prefix('-').unwrap_or(raw.get());
            !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
        };
        example = if items.iter().all(|item| integer_literal(item)) {
            let ints = items
                .iter()
                .map(|item| {
                    item.get().parse::<i64>().map_err(|_| {
                        anyhow::anyhow!(
                            "feature {name:?}: integer {} is outside int64 \
                             [-9223372036854775808, 9223372036854775807]",
                            item.get()
                        )
                    })
                })
                .collect::<anyhow::Result<Vec<i64>>>()?;
            example.with_int64(name, ints)
        } else if values.iter().all(Value::is_number) {
            example.with_floats(
                name,
                values.iter().filter_map(Value::as_f64).map(|f| f as f32),
            )
        } else if values.iter().all(Value::is_string) {
            example.with_bytes(name, values.iter().filter_map(Value::as_str))
        } else {
            anyhow::bail!("feature {name:?}: a list of integers, numbers or strings expected");
        };
    }
    Ok(example)
}

/// Writes a record per line of `input` (a line's bytes without its `\n` or `\r\n`, or an
/// Example from a line of JSON) until the input ends or a line fails; returns the error
/// naming the line, if any. What was written stays written.
async fn write_lines<W>(
    writer: &mut TFRecordWriter<W>,
    input: impl tokio::io::AsyncBufRead + Unpin,
    json: bool,
) -> anyhow::Result<()>
where
    W: tokio::io::AsyncWrite + Unpin,
{
    let mut input = input;
    let mut line = Vec::new();
    let mut line_no = 0u64;
    loop {
        line.clear();
        line_no += 1;
        let n = input
            .read_until(b'\n', &mut line)
            .await
            .with_context(|| format!("reading stdin line {line_no}"))?;
        if n == 0 {
            return Ok(());
        }
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
        let written = if json {
            let example = json_example(&line).with_context(|| format!("stdin line {line_no}"))?;
            writer.write(&example.encode_to_bytes()).await
        } else {
            writer.write(&line).await
        };
        written.with_context(|| format!("writing the record of stdin line {line_no}"))?;
    }
}

/// Where `index` writes the index of `path`: beside it, or into `out_dir`.
fn index_path(path: &Location, out_dir: Option<&std::path::Path>) -> anyhow::Result<PathBuf> {
    match (path, out_dir) {
        (_, Some(dir)) => {
            let name = match path {
                Location::Local(p) => p.file_name().map(|n| n.to_string_lossy().into_owned()),
                Location::Url(u) => u
                    .path_segments()
                    .and_then(|mut s| s.next_back())
                    .map(str::to_string),
            };
            let name = name
                .filter(|n| !n.is_empty())
                .with_context(|| format!("{path} has no file name"))?;
            Ok(dir.join(format!("{name}.idx")))
        }
        (Location::Local(p), None) => {
            let mut name = p.clone().into_os_string();
            name.push(".idx");
            Ok(name.into())
        }
        (Location::Url(_), None) => {
            anyhow::bail!("{path}: the index of a URL is written locally: pass --out-dir")
        }
    }
}

/// Builds the index of `path` and writes it to `out`; returns the number of records.
async fn index_one(path: Location, out: PathBuf) -> anyhow::Result<usize> {
    let index = TFRecordIndex::build(path).await?;
    index.write(&out).await?;
    Ok(index.len())
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let compression = Compression::from(cli.compression);
    // `Stdout` (not its lock) so the future stays `Send` across awaits.
    let mut out = std::io::BufWriter::new(Stdout(std::io::stdout()));
    // Files that could not be read through (count, cat): reported, then exit code 1.
    let mut failed = 0;
    match cli.command {
        Command::Count { paths } => {
            let paths = expand(paths).await?;
            let mut total = 0u64;
            for path in &paths {
                let mut epoch = records(path, compression, cli.timing);
                let mut n = 0u64;
                let mut failure = None;
                while let Some(record) = epoch.next().await {
                    match record {
                        Ok(_) => n += 1,
                        Err(e) => failure = Some(e),
                    }
                }
                if cli.report {
                    eprintln!("{path}:\n{}", report(&epoch));
                }
                if let Some(e) = failure {
                    failed += 1;
                    out.flush()?;
                    eprintln!("error: {}", describe(&e));
                    continue;
                }
                writeln!(out, "{n}\t{}", path)?;
                total += n;
            }
            writeln!(out, "{total}\ttotal")?;
            if failed > 0 {
                out.flush()?;
                eprintln!(
                    "{failed} of {} files could not be counted (the total leaves them out)",
                    paths.len()
                );
            }
        }
        Command::Verify {
            resync: true,
            paths,
        } => {
            let paths = expand(paths).await?;
            let mut damaged = 0;
            for path in &paths {
                let mut epoch = records_resyncing(path, compression, cli.timing, true);
                let (mut n, mut ranges) = (0u64, 0u64);
                while let Some(record) = epoch.next().await {
                    let e = match record {
                        Ok(_) => {
                            n += 1;
                            continue;
                        }
                        Err(e) => e,
                    };
                    ranges += 1;
                    match e.downcast_ref::<Error>() {
                        Some(Error::DataLoss {
                            record,
                            offset,
                            message,
                            skipped,
                            ..
                        }) => {
                            let bytes = skipped
                                .as_ref()
                                .map_or("-".to_string(), |r| format!("{}..{}", r.start, r.end));
                            writeln!(
                                out,
                                "DAMAGED\trecord {record}\toffset {offset}\tbytes {bytes}\t\
                                 {message}\t{path}"
                            )?
                        }
                        _ => writeln!(out, "ERROR\t{e:#}")?,
                    }
                }
                if cli.report {
                    eprintln!("{path}:\n{}", report(&epoch));
                }
                match ranges {
                    0 => writeln!(out, "ok\t{n} records\t{path}")?,
                    _ => {
                        damaged += 1;
                        writeln!(
                            out,
                            "damaged\t{n} records read\t{ranges} damaged ranges\t{path}"
                        )?
                    }
                }
            }
            out.flush()?;
            if damaged > 0 {
                eprintln!("{damaged} of {} files damaged", paths.len());
                return Ok(ExitCode::from(1));
            }
        }
        Command::Verify {
            resync: false,
            paths,
        } => {
            let paths = expand(paths).await?;
            let mut damaged = 0;
            for path in &paths {
                let mut epoch = records(path, compression, cli.timing);
                let mut n = 0u64;
                let mut failure = None;
                while let Some(record) = epoch.next().await {
                    match record {
                        Ok(_) => n += 1,
                        Err(e) => failure = Some(e),
                    }
                }
                if cli.report {
                    eprintln!("{path}:\n{}", report(&epoch));
                }
                match failure {
                    None => writeln!(out, "ok\t{n} records\t{}", path)?,
                    Some(e) => {
                        damaged += 1;
                        match e.downcast_ref::<Error>() {
                            Some(Error::DataLoss {
                                record,
                                offset,
                                message,
                                ..
                            }) => {
                                // TensorFlow's reminder for a first header that is not one.
                                let suffix = if *offset == 0 && message == "corrupted record" {
                                    " (Is this even a TFRecord file?)"
                                } else {
                                    ""
                                };
                                let flag = compression_flag(&e);
                                writeln!(
                                    out,
                                    "DAMAGED\trecord {record}\toffset {offset}\t\
                                     {message}{suffix}{flag}\t{path}",
                                )?
                            }
                            _ => writeln!(out, "ERROR\t{e:#}")?,
                        }
                    }
                }
            }
            out.flush()?;
            if damaged > 0 {
                eprintln!("{damaged} of {} files damaged", paths.len());
                return Ok(ExitCode::from(1));
            }
        }
        Command::Head {
            n,
            example,
            sequence_example,
            path,
        } => {
            let mut epoch = records(&path, compression, cli.timing);
            let mut shown = 0;
            while shown < n {
                let Some(record) = epoch.next().await else {
                    break;
                };
                let record = record?;
                let line = if example || sequence_example {
                    record_json(record, sequence_example)
                        .with_context(|| format!("record {shown} of {}", path))?
                } else {
                    bytes_json(&record)
                };
                writeln!(out, "{line}")?;
                shown += 1;
            }
        }
        Command::Cat {
            base64,
            skip_damaged,
            paths,
        } => {
            let paths = expand(paths).await?;
            for path in &paths {
                let mut epoch = records_resyncing(path, compression, cli.timing, skip_damaged);
                while let Some(record) = epoch.next().await {
                    let record = match record {
                        Ok(record) => record,
                        // Resynchronised: the records after the damage follow.
                        Err(e) if skip_damaged && is_resynced(&e) => {
                            failed += 1;
                            out.flush()?;
                            eprintln!("skipped: {}", describe(&e));
                            continue;
                        }
                        Err(e) => {
                            // The records before the damage are out; the next file follows.
                            failed += 1;
                            out.flush()?;
                            eprintln!("error: {}", describe(&e));
                            break;
                        }
                    };
                    if base64 {
                        writeln!(
                            out,
                            "{}",
                            base64::engine::general_purpose::STANDARD.encode(&record)
                        )?;
                    } else {
                        out.write_all(&record)?;
                        out.write_all(b"\n")?;
                    }
                }
            }
        }
        Command::Index {
            out_dir,
            jobs,
            paths,
        } => {
            let paths = expand(paths).await?;
            let outs = paths
                .iter()
                .map(|p| index_path(p, out_dir.as_deref()))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let mut seen = std::collections::HashSet::new();
            if let Some(twice) = outs.iter().find(|o| !seen.insert(*o)) {
                anyhow::bail!("two files would write the same index {}", twice.display());
            }
            let jobs = jobs.unwrap_or_else(streamload::available_cores).max(1);
            // A task per file (at most `jobs` at once), so files are read and checked on
            // several cores; the results come in the files' order.
            let mut built = futures::stream::iter(paths.iter().cloned().zip(outs.clone()))
                .map(|(path, out)| tokio::spawn(index_one(path, out)))
                .buffered(jobs);
            let mut i = 0;
            while let Some(result) = built.next().await {
                let result = result.map_err(anyhow::Error::from).and_then(|r| r);
                match result {
                    Ok(n) => writeln!(out, "{n}\t{}", outs[i].display())?,
                    Err(e) => {
                        failed += 1;
                        out.flush()?;
                        eprintln!("error: {}", describe(&e));
                    }
                }
                i += 1;
            }
            if failed > 0 {
                out.flush()?;
                eprintln!("{failed} of {} files could not be indexed", paths.len());
            }
        }
        Command::Write {
            json,
            gzip,
            zlib,
            out: path,
        } => {
            let compression = match (gzip, zlib) {
                (true, _) => Compression::Gzip,
                (_, true) => Compression::Zlib,
                _ => compression.for_path(&path),
            };
            let file = tokio::fs::File::create(&path)
                .await
                .with_context(|| format!("creating {}", path.display()))?;
            let mut writer = TFRecordWriter::new(tokio::io::BufWriter::new(file), compression);
            let stdin = tokio::io::BufReader::new(tokio::io::stdin());
            let written = write_lines(&mut writer, stdin, json).await;
            // Finished even after an error: the file holds the records accepted before it,
            // whole and readable (a GZIP/ZLIB stream closed).
            let records = writer.records();
            let finished = async {
                use tokio::io::AsyncWriteExt;
                writer.finish().await?.flush().await
            }
            .await
            .with_context(|| format!("finishing {}", path.display()));
            if let Err(e) = written {
                eprintln!(
                    "wrote {records} records to {} (the lines before the error)",
                    path.display()
                );
                if let Err(f) = finished {
                    eprintln!("error: {f:#}");
                }
                return Err(e);
            }
            finished?;
            eprintln!("wrote {records} records to {}", path.display());
        }
    }
    out.flush()?;
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Cli::parse()).await {
        Ok(code) => code,
        // The reader of the output has gone (`| head`): stop quietly, as Unix tools do
        // (exit code 0, as ripgrep; a tool killed by SIGPIPE would give 141).
        Err(e) if stdout_closed(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", describe(&e));
            ExitCode::from(2)
        }
    }
}

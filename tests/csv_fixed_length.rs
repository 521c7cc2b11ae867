//! CSV (`CsvDataset`) and fixed-length records (`FixedLengthRecordDataset`): tf.data's
//! semantics on files the tests write.

use std::io::Write;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use futures::StreamExt;
use streamload::Error;
use streamload::format::{Column, Compression, CsvDataset, Field, FixedLengthRecordDataset};

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write");
    path
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = flate2::write::GzEncoder::new(&mut out, flate2::Compression::fast());
    w.write_all(bytes).expect("gzip");
    w.finish().expect("gzip");
    out
}

fn s(text: &str) -> Field {
    Field::String(Bytes::copy_from_slice(text.as_bytes()))
}

#[tokio::test]
async fn csv_types_quotes_defaults_and_header() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = "id,name,score,count\n\
                1,\"Smith, J\",0.5,10\n\
                2,\"say \"\"hi\"\"\",,\n\
                3,\"two\nlines\",-2.5e3,NA\n";
    let path = write(dir.path(), "a.csv", text.as_bytes());
    let rows = CsvDataset::new(
        [path],
        [
            Column::int64(),
            Column::string(),
            Column::with_default(Field::Float32(-1.0)),
            Column::with_default(Field::Int32(7)),
        ],
    )
    .header(true)
    .na_value("NA")
    .build()
    .collect()
    .await
    .expect("rows");
    assert_eq!(
        rows,
        vec![
            vec![
                Field::Int64(1),
                s("Smith, J"),
                Field::Float32(0.5),
                Field::Int32(10)
            ],
            vec![
                Field::Int64(2),
                s("say \"hi\""),
                Field::Float32(-1.0),
                Field::Int32(7)
            ],
            vec![
                Field::Int64(3),
                s("two\nlines"),
                Field::Float32(-2500.0),
                Field::Int32(7)
            ],
        ]
    );
}

#[tokio::test]
async fn csv_select_cols_delimiter_literal_quotes_and_gzip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = "a|\"b|1.5|x\nc|d|2.25|y\n";
    let plain = write(dir.path(), "a.psv", text.as_bytes());
    let gz = write(dir.path(), "b.psv.gz", &gzip(text.as_bytes()));
    let rows = CsvDataset::new([plain, gz], [Column::string(), Column::float64()])
        .field_delim(b'|')
        .use_quote_delim(false)
        .select_cols([1, 2])
        .compression(Compression::Auto)
        .build()
        .collect()
        .await
        .expect("rows");
    let want = [
        vec![s("\"b"), Field::Float64(1.5)],
        vec![s("d"), Field::Float64(2.25)],
    ];
    assert_eq!(rows[..2], want[..]);
    assert_eq!(rows[2..], want[..], "the gzip twin reads the same");
}

/// TensorFlow's `exclude_cols` (its csv_dataset_test cases): every other column is read, and
/// the record has as many fields as the columns and the excluded ones together.
#[tokio::test]
async fn csv_exclude_cols_reads_every_other_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), "a.csv", b"1,2,3\n5,6,7\n");
    let read = |columns: Vec<Column>, exclude: &[usize]| {
        CsvDataset::new([path.clone()], columns)
            .exclude_cols(exclude.iter().copied())
            .build()
    };
    let rows = read(vec![Column::string()], &[1, 2]).collect().await;
    assert_eq!(rows.expect("rows"), [vec![s("1")], vec![s("5")]]);
    let rows = read(vec![Column::int64(), Column::int64()], &[1])
        .collect()
        .await;
    let want = [
        vec![Field::Int64(1), Field::Int64(3)],
        vec![Field::Int64(5), Field::Int64(7)],
    ];
    assert_eq!(rows.expect("rows"), want);
    let err = read(vec![Column::string()], &[0]).collect().await;
    let err = err.expect_err("more fields than columns");
    assert!(
        err.to_string()
            .contains("Expect 1 fields but have more in record"),
        "{err:#}"
    );
    let err = read(vec![Column::string(); 3], &[1]).collect().await;
    let err = err.expect_err("fewer fields than columns");
    assert!(
        err.to_string()
            .contains("Expect 3 fields but have 2 in record"),
        "{err:#}"
    );
    // As TensorFlow refuses them when the op is built.
    let both = std::panic::catch_unwind(|| {
        CsvDataset::new(["x.csv"], [Column::string()])
            .select_cols([0])
            .exclude_cols([1])
            .build()
    });
    assert!(both.is_err(), "select_cols with exclude_cols");
    let unsorted = std::panic::catch_unwind(|| {
        CsvDataset::new(["x.csv"], [Column::string()])
            .exclude_cols([2, 1])
            .build()
    });
    assert!(unsorted.is_err(), "exclude_cols not increasing");
}

#[tokio::test]
async fn csv_errors_name_the_file_and_record_and_the_file_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = "1,2\n3\nx,4\n,5\n6,7\n";
    let path = write(dir.path(), "bad.csv", text.as_bytes());
    let ds = CsvDataset::new([path.clone()], [Column::int32(), Column::int64()]).build();
    let all: Vec<_> = ds.iter().collect().await;
    assert_eq!(all.len(), 5);
    let message = |i: usize| match &all[i] {
        Err(e) => {
            assert!(matches!(
                e.downcast_ref::<Error>(),
                Some(Error::InvalidArgument(_))
            ));
            e.to_string()
        }
        Ok(row) => panic!("record {i} parsed: {row:?}"),
    };
    let name = path.display().to_string();
    assert_eq!(
        message(1),
        format!("{name}: record 1: Expect 2 fields but have 1 in record")
    );
    assert_eq!(
        message(2),
        format!("{name}: record 2: Field 0 in record is not a valid int32: x")
    );
    assert_eq!(
        message(3),
        format!("{name}: record 3: Field 0 is required but missing in record!")
    );
    let good = ds.ignore_errors().collect().await.expect("rows");
    assert_eq!(
        good,
        vec![
            vec![Field::Int32(1), Field::Int64(2)],
            vec![Field::Int32(6), Field::Int64(7)]
        ]
    );
}

#[tokio::test]
async fn csv_a_long_quoted_field_read_in_small_reads() {
    // ~4 MiB quoted field (with doubled quotes, delimiters and line breaks inside) read 4 KiB
    // at a time: each read resumes the parse where it stopped (quadratic when every read
    // re-parsed the record from its start: ~10 s for 8 MiB).
    let dir = tempfile::tempdir().expect("tempdir");
    let unit = "abc,def\"\"ghi\njkl\r\n";
    let big = unit.repeat((4 << 20) / unit.len());
    let text = format!("1,\"{big}\"\n2,\"short\"\r\n3,\"x\"\n");
    let path = write(dir.path(), "long.csv", text.as_bytes());
    let rows = CsvDataset::new([path], [Column::int64(), Column::string()])
        .buffer_size(4096)
        .build()
        .collect()
        .await
        .expect("rows");
    assert_eq!(rows.len(), 3);
    let want = big.replace("\"\"", "\"");
    assert_eq!(rows[0][0], Field::Int64(1));
    let got = rows[0][1].as_bytes().expect("a string");
    assert_eq!(got.len(), want.len());
    assert!(*got == want.as_bytes(), "the long field's bytes");
    assert_eq!(rows[1], vec![Field::Int64(2), s("short")]);
    assert_eq!(rows[2], vec![Field::Int64(3), s("x")]);
}

#[tokio::test]
async fn csv_reads_the_same_at_every_buffer_size() {
    // Every construct split at every byte: each read resumes the parse where the last stopped.
    let dir = tempfile::tempdir().expect("tempdir");
    let text = "h1,h2,h3\n1,\"a,b\",2.5\r\n2,\"say \"\"hi\"\"\",\r3,plain,1e3\n\
                4,\"multi\nline\r\nfield\",0x1p2\n5,bad\"quote,1\n6,\"x\"y\",1\n7,\"\",inf\n\
                8,na,\n9,\"tail\",9\r\n10,\"open";
    let path = write(dir.path(), "tricky.csv", text.as_bytes());
    let read = |buffer_size: usize| {
        let ds = CsvDataset::new(
            [path.clone()],
            [
                Column::int64(),
                Column::with_default(s("-")),
                Column::with_default(Field::Float64(-1.0)),
            ],
        )
        .header(true)
        .na_value("na")
        .buffer_size(buffer_size)
        .build();
        async move {
            ds.iter()
                .map(|row| row.map_err(|e| e.to_string()))
                .collect::<Vec<_>>()
                .await
        }
    };
    let whole = read(1 << 20).await;
    let ok = |i: usize| whole[i].clone().expect("a row");
    assert_eq!(ok(0), vec![Field::Int64(1), s("a,b"), Field::Float64(2.5)]);
    assert_eq!(
        ok(1),
        vec![Field::Int64(2), s("say \"hi\""), Field::Float64(-1.0)]
    );
    assert_eq!(
        ok(2),
        vec![Field::Int64(3), s("plain"), Field::Float64(1000.0)]
    );
    assert_eq!(
        ok(3),
        vec![
            Field::Int64(4),
            s("multi\nline\r\nfield"),
            Field::Float64(4.0)
        ]
    );
    assert!(
        whole[4]
            .as_ref()
            .expect_err("stray quote")
            .contains("Unquoted fields cannot have quotes inside")
    );
    assert!(
        whole[5]
            .as_ref()
            .expect_err("quote after quote")
            .contains("Quote inside a string has to be escaped")
    );
    assert_eq!(
        ok(6),
        vec![Field::Int64(7), s("-"), Field::Float64(f64::INFINITY)]
    );
    assert_eq!(ok(7), vec![Field::Int64(8), s("-"), Field::Float64(-1.0)]);
    assert_eq!(ok(8), vec![Field::Int64(9), s("tail"), Field::Float64(9.0)]);
    assert!(
        whole[9]
            .as_ref()
            .expect_err("open quote")
            .contains("Reached end of file without closing quoted field")
    );
    assert_eq!(whole.len(), 10);
    for buffer_size in 1..=40 {
        assert_eq!(read(buffer_size).await, whole, "buffer_size {buffer_size}");
    }
}

/// `n` CSV lines `i,<text>` whose GZIP compression is about as long as they are.
fn numbered_lines(n: usize) -> Vec<String> {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    (0..n)
        .map(|i| {
            let text: String = (0..40)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    char::from(b'a' + (state % 26) as u8)
                })
                .collect();
            format!("{i},{text}\n")
        })
        .collect()
}

#[tokio::test]
async fn csv_a_damaged_gzip_file_is_data_loss_naming_file_record_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lines = numbered_lines(3000);
    let text = lines.concat();
    let compressed = gzip(text.as_bytes());
    // Cut short: the records before the cut, then data loss at the record being read.
    let truncated = write(
        dir.path(),
        "truncated.csv.gz",
        &compressed[..compressed.len() / 2],
    );
    // Garbled in the middle: inflate fails (or the CRC at the end does).
    let mut garbled_bytes = compressed.clone();
    let middle = garbled_bytes.len() / 2;
    for b in &mut garbled_bytes[middle..middle + 64] {
        *b ^= 0x5A;
    }
    let garbled = write(dir.path(), "garbled.csv.gz", &garbled_bytes);
    let good = write(dir.path(), "good.csv.gz", &gzip(b"7,after\n"));
    let ds = CsvDataset::new(
        [&truncated, &garbled, &good],
        [Column::int64(), Column::string()],
    )
    .compression(Compression::Auto)
    .buffer_size(4096)
    .build();
    let all: Vec<_> = ds.iter().collect().await;
    let losses: Vec<(usize, String, u64, u64, String)> = all
        .iter()
        .enumerate()
        .filter_map(|(i, item)| match item {
            Err(e) => match e.downcast_ref::<Error>() {
                Some(Error::DataLoss {
                    path,
                    record,
                    offset,
                    message,
                    ..
                }) => Some((i, path.clone(), *record, *offset, message.clone())),
                _ => None,
            },
            Ok(_) => None,
        })
        .collect();
    assert_eq!(
        losses.len(),
        2,
        "one data loss per damaged file: {losses:?}"
    );
    let (at, path, record, offset, message) = &losses[0];
    assert_eq!(*path, truncated.display().to_string());
    assert!(*record > 0 && (*record as usize) < lines.len(), "{record}");
    assert_eq!(*at as u64, *record, "every record before it was read");
    let before: usize = lines[..*record as usize].iter().map(String::len).sum();
    assert_eq!(
        *offset, before as u64,
        "the record's offset in the decompressed stream"
    );
    assert!(message.contains("inflate() failed"), "{message}");
    for (i, item) in all[..*at].iter().enumerate() {
        let row = item.as_ref().expect("a whole record before the cut");
        assert_eq!(row[0], Field::Int64(i as i64));
        assert_eq!(
            row[1],
            s(&lines[i][lines[i].find(',').expect("a comma") + 1..lines[i].len() - 1])
        );
    }
    let (_, path, _, _, _) = &losses[1];
    assert_eq!(*path, garbled.display().to_string());
    let error = all[losses[1].0].as_ref().expect_err("data loss");
    assert!(error.to_string().contains("garbled.csv.gz"), "{error}");
    // The next file is read after a damaged one.
    assert_eq!(
        all.last().expect("rows").as_ref().expect("the good file"),
        &vec![Field::Int64(7), s("after")]
    );
}

#[tokio::test]
async fn fixed_length_records_skip_header_and_footer_like_tensorflow() {
    // The example of tf.data.FixedLengthRecordDataset's documentation.
    let dir = tempfile::tempdir().expect("tempdir");
    let a = write(dir.path(), "fixed_length0.bin", b"HEADER012345FOOTER");
    let b = write(dir.path(), "fixed_length1.bin", b"HEADER6789abFOOTER");
    let gz = write(dir.path(), "fixed_length2.bin.gz", &gzip(b"HEADERcdFOOTER"));
    for buffer_size in [1, 5, 1 << 20] {
        let records = FixedLengthRecordDataset::new([&a, &b, &gz], 2)
            .header_bytes(6)
            .footer_bytes(6)
            .compression(Compression::Auto)
            .buffer_size(buffer_size)
            .build()
            .collect()
            .await
            .expect("records");
        let want: Vec<&[u8]> = vec![b"01", b"23", b"45", b"67", b"89", b"ab", b"cd"];
        assert_eq!(records, want, "buffer {buffer_size}");
    }
    let parallel = FixedLengthRecordDataset::new([&a, &b], 2)
        .header_bytes(6)
        .footer_bytes(6)
        .num_parallel_reads(2)
        .build()
        .collect()
        .await
        .expect("records");
    let want: Vec<&[u8]> = vec![b"01", b"67", b"23", b"89", b"45", b"ab"];
    assert_eq!(
        parallel, want,
        "interleaved one record from each file in turn"
    );
}

#[tokio::test]
async fn a_partial_fixed_length_record_is_data_loss_naming_file_record_offset() {
    // Compressed, the size is known only at the end: the whole records, then the error.
    let dir = tempfile::tempdir().expect("tempdir");
    let partial = write(dir.path(), "partial.bin.gz", &gzip(b"HD0123456F"));
    let short = write(dir.path(), "short.bin.gz", &gzip(b"HD"));
    let good = write(dir.path(), "good.bin.gz", &gzip(b"HDxyzwF"));
    let ds = FixedLengthRecordDataset::new([&partial, &short, &good], 3)
        .header_bytes(2)
        .footer_bytes(1)
        .compression(Compression::Auto)
        .build();
    let all: Vec<_> = ds.iter().collect().await;
    let loss = |i: usize| match &all[i] {
        Err(e) => match e.downcast_ref::<Error>() {
            Some(Error::DataLoss {
                path,
                record,
                offset,
                ..
            }) => (path.clone(), *record, *offset),
            _ => panic!("{e:?}"),
        },
        Ok(r) => panic!("{r:?}"),
    };
    assert_eq!(&all[0].as_ref().expect("first")[..], b"012");
    assert_eq!(&all[1].as_ref().expect("second")[..], b"345");
    assert_eq!(loss(2), (partial.display().to_string(), 2, 8));
    assert_eq!(loss(3), (short.display().to_string(), 0, 2));
    assert_eq!(&all[4].as_ref().expect("good")[..], b"xyz");
    // "xyzwF": one record, then "w" before the footer is a partial record.
    assert_eq!(loss(5), (good.display().to_string(), 1, 5));
    assert_eq!(all.len(), 6);
    let message = format!("{:#}", all[2].as_ref().expect_err("partial"));
    assert!(
        message.contains(&format!(
            "Excluding the header (2 bytes) and footer (1 bytes), input file \"{}\" has body \
             length 7 bytes, which is not an exact multiple of the record length (3 bytes).",
            partial.display()
        )),
        "{message}"
    );

    // A local file read as it is is checked by its size first, as TensorFlow does: no record
    // of a file whose body is not whole records.
    let partial = write(dir.path(), "partial.bin", b"HD0123456F");
    let all: Vec<_> = FixedLengthRecordDataset::new([&partial], 3)
        .header_bytes(2)
        .footer_bytes(1)
        .build()
        .iter()
        .collect()
        .await;
    assert_eq!(all.len(), 1);
    let err = all[0].as_ref().expect_err("not a multiple");
    assert!(
        matches!(err.downcast_ref::<Error>(), Some(Error::InvalidArgument(_))),
        "{err:?}"
    );
}

#[path = "support/formats_more.rs"]
mod formats_more;

/// `formats_more.json`: header and footer, bodies that are not whole records, empty and
/// short files, GZIP/ZLIB, buffer sizes and several files, as TensorFlow 2.21's
/// `FixedLengthRecordDataset` read them. Records are compared up to TensorFlow's error; then
/// streamload fails there too, with TensorFlow's message where TensorFlow gives a real one
/// (not its internal errors), of the same kind (`InvalidArgument` / `DataLoss`).
#[tokio::test]
async fn formats_more_fixed_length_cases_match_tensorflow() {
    let cases = formats_more::cases("fixed_length");
    assert!(cases.len() >= 20);
    for case in &cases {
        let name = case["name"].as_str().expect("name");
        let n = |key: &str| case[key].as_u64().expect(key) as usize;
        let mut ds = FixedLengthRecordDataset::new(formats_more::files(case), n("record_bytes"))
            .header_bytes(n("header_bytes"))
            .footer_bytes(n("footer_bytes"))
            .compression(formats_more::compression(case));
        if let Some(size) = case["buffer_size"].as_u64() {
            ds = ds.buffer_size(size as usize);
        }
        if let Some(n) = case["num_parallel_reads"].as_u64() {
            ds = ds.num_parallel_reads(n as usize);
        }
        let got: Vec<anyhow::Result<Bytes>> = ds.build().iter().collect().await;
        let yielded = formats_more::assert_output_prefix(case, &got);
        let Some(tf) = formats_more::error_message(case) else {
            assert_eq!(got.len(), yielded, "{name}: {:?}", got.last());
            continue;
        };
        let err = got
            .get(yielded)
            .and_then(|r| r.as_ref().err())
            .unwrap_or_else(|| panic!("{name}: no error where TensorFlow raised {tf}"));
        let kind = err.downcast_ref::<Error>();
        match case["error"]["class"].as_str() {
            Some("InvalidArgumentError") => {
                assert!(
                    matches!(kind, Some(Error::InvalidArgument(_))),
                    "{name}: {err:?}"
                );
                assert_eq!(err.to_string(), tf, "{name}");
            }
            Some("DataLossError") => {
                assert!(
                    matches!(kind, Some(Error::DataLoss { .. })),
                    "{name}: {err:?}"
                );
                assert!(err.to_string().contains(&tf), "{name}: {err} vs {tf}");
            }
            // TensorFlow's internal errors (a file shorter than its header) and a missing
            // file: an error naming the file.
            _ => {
                let message = format!("{err:#}");
                assert!(
                    formats_more::files(case)
                        .iter()
                        .any(|f| message.contains(&f.display().to_string())),
                    "{name}: {message}"
                );
            }
        }
    }
}

/// A column as the JSON gives it: `{dtype, default}` (`null`: required).
fn column(json: &serde_json::Value) -> Column {
    let default = &json["default"];
    let dtype = json["dtype"].as_str().expect("dtype");
    if default.is_null() {
        return match dtype {
            "int32" => Column::int32(),
            "int64" => Column::int64(),
            "float32" => Column::float32(),
            "float64" => Column::float64(),
            "string" => Column::string(),
            other => panic!("dtype {other}"),
        };
    }
    Column::with_default(match dtype {
        "int32" => Field::Int32(default.as_i64().expect("int") as i32),
        "int64" => Field::Int64(default.as_i64().expect("int")),
        "float32" => Field::Float32(default.as_f64().expect("float") as f32),
        "float64" => Field::Float64(default.as_f64().expect("float")),
        "string" => Field::String(formats_more::bytes(default)),
        other => panic!("dtype {other}"),
    })
}

/// TensorFlow's value in the JSON against streamload's field (floats bit for bit).
fn same_field(want: &serde_json::Value, got: &Field) -> bool {
    let float = |x: f64| match want {
        serde_json::Value::String(s) if s == "NaN" => x.is_nan(),
        serde_json::Value::String(s) if s == "Infinity" => x == f64::INFINITY,
        serde_json::Value::String(s) if s == "-Infinity" => x == f64::NEG_INFINITY,
        w => w.as_f64().is_some_and(|w| w.to_bits() == x.to_bits()),
    };
    match got {
        Field::Int32(v) => want.as_i64() == Some(i64::from(*v)),
        Field::Int64(v) => want.as_i64() == Some(*v),
        Field::Float32(v) => float(f64::from(*v)),
        Field::Float64(v) => float(*v),
        Field::String(v) => formats_more::bytes(want) == v,
    }
}

/// `formats_more.json`: `CsvDataset` with a header, `select_cols`, defaults of every type, NA
/// values, delimiters, quoting on and off, quoted delimiters, quotes and line breaks, wrong
/// field counts, numbers TensorFlow reads or refuses, line endings, UTF-8, GZIP/ZLIB, small
/// buffers and several files, as TensorFlow 2.21 read them. Rows are compared up to
/// TensorFlow's error; then streamload fails there too, with TensorFlow's message.
#[tokio::test]
async fn formats_more_csv_cases_match_tensorflow() {
    let cases = formats_more::cases("csv");
    assert!(cases.len() >= 50);
    for case in &cases {
        let name = case["name"].as_str().expect("name");
        let columns: Vec<Column> = case["columns"]
            .as_array()
            .expect("columns")
            .iter()
            .map(column)
            .collect();
        let delimiter = case["field_delim"].as_str().expect("delim").as_bytes()[0];
        let mut ds = CsvDataset::new(formats_more::files(case), columns)
            .header(case["header"].as_bool().expect("header"))
            .field_delim(delimiter)
            .use_quote_delim(case["use_quote_delim"].as_bool().expect("quote"))
            .na_value(case["na_value"].as_str().expect("na"))
            .compression(formats_more::compression(case));
        if let Some(select) = case["select_cols"].as_array() {
            ds = ds.select_cols(select.iter().map(|c| c.as_u64().expect("col") as usize));
        }
        if let Some(size) = case["buffer_size"].as_u64() {
            ds = ds.buffer_size(size as usize);
        }
        let tf = formats_more::error_message(case);
        if case["error"]["stage"] == "construction" {
            // TensorFlow refuses these when the dataset is built; streamload's `build` panics.
            let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ds.build()))
                .expect_err(name);
            let message = refused
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| refused.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            let tf = tf.expect("error");
            assert!(message.contains(&tf), "{name}: {message} vs {tf}");
            continue;
        }
        let got: Vec<anyhow::Result<Vec<Field>>> = ds.build().iter().collect().await;
        let want = case["output"].as_array().expect("output");
        let ok: Vec<&Vec<Field>> = got.iter().map_while(|r| r.as_ref().ok()).collect();
        assert_eq!(ok.len(), want.len(), "{name}: {ok:?} vs {want:?}");
        for (row, (got, want)) in ok.iter().zip(want).enumerate() {
            let want = want.as_array().expect("row");
            assert_eq!(got.len(), want.len(), "{name} row {row}");
            for (got, want) in got.iter().zip(want) {
                assert!(same_field(want, got), "{name} row {row}: {got:?} vs {want}");
            }
        }
        let Some(tf) = tf else {
            assert_eq!(got.len(), want.len(), "{name}: {:?}", got.last());
            continue;
        };
        let err = got
            .get(want.len())
            .and_then(|r| r.as_ref().err())
            .unwrap_or_else(|| panic!("{name}: no error where TensorFlow raised {tf}"));
        let message = format!("{err:#}");
        if case["error"]["class"] == "InvalidArgumentError" {
            assert!(
                matches!(err.downcast_ref::<Error>(), Some(Error::InvalidArgument(_))),
                "{name}: {err:?}"
            );
            assert!(message.contains(&tf), "{name}: {message} vs {tf}");
        }
        // The file is named, and the record (from streamload; TensorFlow names neither).
        assert!(
            formats_more::files(case)
                .iter()
                .any(|f| message.contains(&f.display().to_string())),
            "{name}: {message}"
        );
    }
}

/// A truncated GZIP file of fixed-length records: the whole records before the damage, then
/// a `DataLoss` naming the file, the record being read and its offset in the decompressed
/// stream (header included).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_gzip_fixed_length_file_is_data_loss_after_its_whole_records() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut content = b"HDR".to_vec();
    for i in 0..50_000u32 {
        content.extend_from_slice(&i.to_le_bytes());
    }
    let gz = gzip(&content);
    let path = write(dir.path(), "cut.bin.gz", &gz[..gz.len() / 2]);
    let got: Vec<anyhow::Result<Bytes>> = FixedLengthRecordDataset::new([&path], 4)
        .header_bytes(3)
        .compression(Compression::Gzip)
        .build()
        .iter()
        .collect()
        .await;
    let before = got.len() - 1;
    assert!(before > 0 && before < 50_000, "{before} records");
    for (i, r) in got[..before].iter().enumerate() {
        assert_eq!(r.as_ref().expect("a record")[..], (i as u32).to_le_bytes());
    }
    let err = got[before].as_ref().expect_err("an error last");
    match err.downcast_ref::<Error>() {
        Some(Error::DataLoss {
            path: named,
            record,
            offset,
            message,
            ..
        }) => {
            assert_eq!(*record, before as u64);
            assert_eq!(*offset, 3 + 4 * before as u64);
            assert!(message.contains("GZIP inflate() failed"), "{message}");
            assert!(named.contains("cut.bin.gz"), "{named}");
        }
        _ => panic!("not DataLoss: {err:?}"),
    }
}

/// A FIFO has no size to check first: its records are read to its end (and a body that is
/// not whole records is found at the end, after the whole ones).
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_length_records_from_a_fifo() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (name, body, whole) in [("whole", 3_000usize, 1_000), ("partial", 3_001, 1_000)] {
        let path = dir.path().join(name);
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .expect("mkfifo runs");
        assert!(made.success());
        let mut content = b"HH".to_vec();
        content.extend((0..body).map(|i| (i % 251) as u8));
        content.push(b'F');
        let fifo = path.clone();
        let want: Vec<Vec<u8>> = content[2..2 + 3 * whole]
            .chunks(3)
            .map(<[u8]>::to_vec)
            .collect();
        std::thread::spawn(move || std::fs::write(&fifo, content).expect("the FIFO is written"));
        let got: Vec<anyhow::Result<Bytes>> = FixedLengthRecordDataset::new([&path], 3)
            .header_bytes(2)
            .footer_bytes(1)
            .buffer_size(512)
            .build()
            .iter()
            .collect()
            .await;
        let records: Vec<Vec<u8>> = got
            .iter()
            .map_while(|r| r.as_ref().ok().map(|b| b.to_vec()))
            .collect();
        assert_eq!(records, want, "{name}");
        if body % 3 == 0 {
            assert_eq!(got.len(), whole, "{name}: no error");
        } else {
            assert_eq!(
                got.len(),
                whole + 1,
                "{name}: an error after the whole records"
            );
            let err = got[whole].as_ref().expect_err("an error");
            assert!(
                matches!(err.downcast_ref::<Error>(), Some(Error::DataLoss { .. })),
                "{err:?}"
            );
        }
    }
}

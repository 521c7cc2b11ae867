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
        format!("{name}: record 1: Expect 2 fields but have 1 in record 1")
    );
    assert_eq!(
        message(2),
        format!("{name}: record 2: Field 0 in record 2 is not a valid int32: x")
    );
    assert_eq!(
        message(3),
        format!("{name}: record 3: Field 0 is required but missing in record 3!")
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
    let dir = tempfile::tempdir().expect("tempdir");
    let partial = write(dir.path(), "partial.bin", b"HD0123456F");
    let short = write(dir.path(), "short.bin", b"HD");
    let good = write(dir.path(), "good.bin", b"HDxyzwF");
    let ds = FixedLengthRecordDataset::new([&partial, &short, &good], 3)
        .header_bytes(2)
        .footer_bytes(1)
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
}

//! Cardinality follows tf.data's rules (its kernels' `CardinalityInternal`), so callers can
//! size progress bars and schedules before iterating.

use streamload::{Cardinality, Dataset};

const UNKNOWN: i64 = -2;
const INFINITE: i64 = -1;

#[test]
fn cardinality_follows_tf_data() {
    let r = || Dataset::range(0, 10);
    let unknown = || r().filter(|_| true);
    let forever = || r().repeat();
    let cases: Vec<(&str, i64, i64)> = vec![
        ("range", r().cardinality().as_i64(), 10),
        (
            "counter",
            Dataset::counter(0, 1).cardinality().as_i64(),
            INFINITE,
        ),
        ("batch", r().batch(3).cardinality().as_i64(), 4),
        (
            "batch drop",
            r().batch_drop_remainder(3).cardinality().as_i64(),
            3,
        ),
        (
            "batch of infinite",
            forever().batch(3).cardinality().as_i64(),
            INFINITE,
        ),
        (
            "take of infinite",
            forever().take(7).cardinality().as_i64(),
            7,
        ),
        (
            "take(-1) of infinite",
            forever().take(-1).cardinality().as_i64(),
            INFINITE,
        ),
        (
            "take of unknown",
            unknown().take(3).cardinality().as_i64(),
            UNKNOWN,
        ),
        ("skip past the end", r().skip(20).cardinality().as_i64(), 0),
        ("skip(-1)", r().skip(-1).cardinality().as_i64(), 0),
        (
            "skip of infinite",
            forever().skip(5).cardinality().as_i64(),
            INFINITE,
        ),
        ("repeat_n(3)", r().repeat_n(3).cardinality().as_i64(), 30),
        ("repeat_n(0)", r().repeat_n(0).cardinality().as_i64(), 0),
        (
            "repeat forever of empty",
            Dataset::range(0, 0).repeat().cardinality().as_i64(),
            0,
        ),
        (
            "repeat forever of unknown",
            unknown().repeat().cardinality().as_i64(),
            INFINITE,
        ),
        (
            "repeat_n(2) of unknown",
            unknown().repeat_n(2).cardinality().as_i64(),
            UNKNOWN,
        ),
        ("shard", r().shard(3, 0).cardinality().as_i64(), 4),
        (
            "zip",
            Dataset::zip(r(), Dataset::range(0, 3))
                .cardinality()
                .as_i64(),
            3,
        ),
        (
            "zip with infinite",
            Dataset::zip(r(), forever()).cardinality().as_i64(),
            10,
        ),
        (
            "zip with unknown",
            Dataset::zip(r(), unknown()).cardinality().as_i64(),
            UNKNOWN,
        ),
        (
            "concatenate",
            r().concatenate(&r()).cardinality().as_i64(),
            20,
        ),
        (
            "concatenate unknown",
            r().concatenate(&unknown()).cardinality().as_i64(),
            UNKNOWN,
        ),
        (
            "concatenate infinite",
            unknown().concatenate(&forever()).cardinality().as_i64(),
            INFINITE,
        ),
        ("enumerate", r().enumerate(0).cardinality().as_i64(), 10),
        ("map", r().map(|x| x).cardinality().as_i64(), 10),
        ("prefetch", r().prefetch(2).cardinality().as_i64(), 10),
        ("cache", r().cache().cardinality().as_i64(), 10),
        (
            "scan",
            r().scan(0, |s, x| (s, x)).cardinality().as_i64(),
            10,
        ),
        ("shuffle", r().shuffle(4, None).cardinality().as_i64(), 10),
        (
            "window",
            r().window(3, 2, 1, false).cardinality().as_i64(),
            5,
        ),
        (
            "window drop",
            r().window(3, 2, 1, true).cardinality().as_i64(),
            4,
        ),
        (
            "ignore_errors",
            r().ignore_errors().cardinality().as_i64(),
            UNKNOWN,
        ),
        (
            // TensorFlow 2.21 reports unknown here too (semantics_more.json,
            // cardinality_ignore_errors_infinite).
            "ignore_errors of infinite",
            forever().ignore_errors().cardinality().as_i64(),
            UNKNOWN,
        ),
        (
            "unbatch of infinite",
            forever().batch(2).unbatch().cardinality().as_i64(),
            INFINITE,
        ),
        ("filter", unknown().cardinality().as_i64(), UNKNOWN),
        (
            "interleave",
            r().flat_map(|x| Dataset::range(0, x))
                .cardinality()
                .as_i64(),
            UNKNOWN,
        ),
        (
            "unbatch",
            r().batch(2).unbatch().cardinality().as_i64(),
            UNKNOWN,
        ),
        (
            "from_generator",
            Dataset::from_generator(1, || 0..3).cardinality().as_i64(),
            UNKNOWN,
        ),
    ];
    let wrong: Vec<String> = cases
        .iter()
        .filter(|(_, got, want)| got != want)
        .map(|(name, got, want)| format!("{name}: got {got}, tf.data gives {want}"))
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert_eq!(Cardinality::Finite(3).finite(), Some(3));
}

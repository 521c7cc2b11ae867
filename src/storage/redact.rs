//! Redaction: the one function every error message of storage passes through, so that no
//! credential a URL carried is ever shown.
//!
//! [`redact`] works on text, not on parsed URLs, because the URLs that fail to parse (a bad
//! host, port or IPv6 literal) are the ones whose text ends up in messages unchanged. It
//! removes, after every `scheme://` in the text:
//! - the user information (`user:password@`, a token user `token@`): everything up to the
//!   last `@` before the authority ends (at `/`, `?`, `#` or the end of the line);
//! - a port that is not a number (`host:secret`, a password written without its user);
//! - the query (`?...`, a pre-signed URL's signature, a SAS token, with or without `=`) and
//!   the fragment (`#...`), up to the next white space or quote; also when written `%3F` or
//!   `%23` (so a glob pattern is shown up to its first `?` wildcard: what follows may be a
//!   pre-signed query without `=`);
//!
//! and anywhere in the text, the value of a parameter whose name ends in `signature`, `sig`,
//! `token`, `secret`, `password`, `credential` or `key` (`X-Amz-Security-Token=...`), and the
//! word after `Bearer`.
//!
//! [`redact_error`] rebuilds an error chain layer by layer with each layer's message redacted
//! (streamload's [`Error`](crate::Error) keeps its type, an `io::Error` its kind; other
//! errors become their redacted message, so that no foreign `Debug`, such as a URL's fields,
//! is left in the chain). Every public storage entry point (`open`, `read_range`, `glob`,
//! and the block streams every reader reads) returns its errors through it, and
//! [`Location`](super::Location)'s `Display` and `Debug` and [`describe`](super::describe)
//! (how object stores' errors become messages) call [`redact`].

use std::borrow::Cow;

/// What replaces a redacted value.
const HIDDEN: &str = "***";

/// `text` without the credentials URLs in it may carry (see the module doc).
pub(crate) fn redact(text: &str) -> Cow<'_, str> {
    let lower = text.to_ascii_lowercase();
    let suspicious = text.contains("://")
        || lower.contains("bearer ")
        || SENSITIVE
            .iter()
            .any(|name| lower.contains(&format!("{name}=")));
    if !suspicious {
        return Cow::Borrowed(text);
    }
    Cow::Owned(parameters(&urls(text)))
}

/// Removes the user information, a port that is not a number, the query and the fragment
/// after every `://`.
fn urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        out.push_str(&rest[..at + 3]);
        rest = &rest[at + 3..];
        // The authority ends at a path, a query, a fragment or the end of the line.
        let end = rest.find(['/', '?', '#', '\n']).unwrap_or(rest.len());
        if let Some(user) = rest[..end].rfind('@') {
            rest = &rest[user + 1..];
        }
        // The host and port, up to white space (the message goes on after it).
        let end = rest
            .find(|c: char| matches!(c, '/' | '?' | '#') || is_end(c))
            .unwrap_or(rest.len());
        let authority = &rest[..end];
        let port_at = match authority.rfind(']') {
            Some(close) => authority[close..].find(':').map(|i| close + i),
            None => authority.rfind(':'),
        };
        match port_at {
            Some(colon) => {
                // Punctuation after the URL (`http://host:80, ...`) is not the port.
                let port = &authority[colon + 1..];
                let number = port.trim_end_matches([',', ';', '.', ')', ':']);
                out.push_str(&authority[..=colon]);
                match number.bytes().all(|b| b.is_ascii_digit()) {
                    true => out.push_str(port),
                    false => out.push_str(HIDDEN),
                }
            }
            _ => out.push_str(authority),
        }
        rest = &rest[end..];
        // The path, then the query and fragment up to the end of the URL. A `?` or `#`
        // written as `%3F` or `%23` counts too (a glob's `?` wildcard is one, and a
        // pre-signed query taken for a wildcard would be shown that way).
        let path_end = rest
            .char_indices()
            .find(|&(i, c)| {
                matches!(c, '?' | '#')
                    || is_end(c)
                    || rest
                        .get(i..i + 3)
                        .is_some_and(|s| s.eq_ignore_ascii_case("%3F") || s == "%23")
            })
            .map_or(rest.len(), |(i, _)| i);
        out.push_str(&rest[..path_end]);
        rest = &rest[path_end..];
        if rest.starts_with(['?', '#', '%']) {
            let end = rest.find(is_end).unwrap_or(rest.len());
            let removed = &rest[..end];
            // Keep the punctuation that ends a sentence or a clause after the URL.
            let kept = removed.len()
                - removed
                    .trim_end_matches([':', ',', ';', '.', ')', ']'])
                    .len();
            out.push_str(&removed[removed.len() - kept..]);
            rest = &rest[end..];
        }
    }
    out.push_str(rest);
    out
}

/// Where a URL written in a message ends.
fn is_end(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`')
}

/// Names of parameters (by how they end, ignoring case) whose values are secrets.
const SENSITIVE: &[&str] = &[
    "signature",
    "sig",
    "token",
    "secret",
    "password",
    "passwd",
    "credential",
    "key",
];

/// Hides the values of sensitive parameters (`name=value`) and bearer tokens.
fn parameters(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(eq) = rest.find('=') {
        let name_start = rest[..eq]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .map_or(0, |i| i + 1);
        let name = rest[name_start..eq].to_ascii_lowercase();
        // A parameter starts the text, a query, or follows `&`, white space or a quote; a
        // folder named `key=value` (a Hive partition) is not one.
        let before = rest[..name_start]
            .chars()
            .next_back()
            .or_else(|| out.chars().next_back());
        let parameter = before
            .is_none_or(|c| matches!(c, '?' | '&' | ';' | '(' | '"' | '\'') || c.is_whitespace());
        out.push_str(&rest[..=eq]);
        rest = &rest[eq + 1..];
        if parameter && !name.is_empty() && SENSITIVE.iter().any(|s| name.ends_with(s)) {
            let end = rest
                .find(|c: char| c == '&' || is_end(c))
                .unwrap_or(rest.len());
            // A switch (`AWS_SKIP_SIGNATURE=true` in a hint) is no secret.
            let value = rest[..end].trim_end_matches([':', ',', ';', '.', ')']);
            if !matches!(value, "true" | "false") {
                out.push_str(HIDDEN);
                rest = &rest[end..];
            }
        }
    }
    out.push_str(rest);
    // Bearer tokens (`Authorization: Bearer ...`).
    let mut text = out;
    let mut from = 0;
    while let Some(i) = text[from..].to_ascii_lowercase().find("bearer ") {
        let start = from + i + "bearer ".len();
        let end = text[start..].find(is_end).map_or(text.len(), |e| start + e);
        if end > start {
            text.replace_range(start..end, HIDDEN);
        }
        from = start + HIDDEN.len().min(text.len() - start);
    }
    text
}

/// `error` rebuilt with every layer's message redacted (see the module doc): streamload's
/// [`Error`](crate::Error)s keep their type and `io::Error`s their kind, so callers can still
/// downcast; any other error becomes its redacted message.
pub(crate) fn redact_error(error: anyhow::Error) -> anyhow::Error {
    let layers: Vec<&(dyn std::error::Error + 'static)> = error.chain().collect();
    // A layer added as context is not its own type behind `&dyn Error` (it is anyhow's
    // wrapper), but `anyhow::Error::downcast_ref` finds the outermost of each type: that
    // layer is told by its message.
    let ours = error.downcast_ref::<crate::Error>();
    let ours_text = ours.map(ToString::to_string);
    let io = error.downcast_ref::<std::io::Error>();
    let io_text = io.map(ToString::to_string);
    let mut rebuilt: Option<anyhow::Error> = None;
    for layer in layers.into_iter().rev() {
        let text = layer.to_string();
        let layer = match (Layer::of(layer), ours, io) {
            (Layer::Message(_), Some(ours), _) if ours_text.as_deref() == Some(&text) => {
                Layer::Ours(redact_ours(ours))
            }
            (Layer::Message(_), _, Some(io)) if io_text.as_deref() == Some(&text) => {
                Layer::Io(std::io::Error::new(io.kind(), redact(&text).into_owned()))
            }
            (layer, _, _) => layer,
        };
        rebuilt = Some(match (rebuilt, layer) {
            (None, Layer::Ours(e)) => anyhow::Error::new(e),
            (None, Layer::Io(e)) => anyhow::Error::new(e),
            (None, Layer::Message(m)) => anyhow::Error::msg(m),
            (Some(inner), Layer::Ours(e)) => inner.context(e),
            (Some(inner), Layer::Io(e)) => inner.context(e),
            (Some(inner), Layer::Message(m)) => inner.context(m),
        });
    }
    rebuilt.unwrap_or(error)
}

/// An `io::Error` whose message is redacted, keeping its kind (and streamload's
/// [`Error`](crate::Error) inside it, if any).
pub(crate) fn redact_io(error: std::io::Error) -> std::io::Error {
    match error.get_ref() {
        None => error,
        Some(inner) => match inner.downcast_ref::<crate::Error>() {
            Some(ours) => std::io::Error::new(error.kind(), redact_ours(ours)),
            None => std::io::Error::new(error.kind(), redact(&super::describe(inner)).into_owned()),
        },
    }
}

/// One layer of a chain, rebuilt.
enum Layer {
    Ours(crate::Error),
    Io(std::io::Error),
    Message(String),
}

impl Layer {
    fn of(layer: &(dyn std::error::Error + 'static)) -> Layer {
        if let Some(ours) = layer.downcast_ref::<crate::Error>() {
            return Layer::Ours(redact_ours(ours));
        }
        if let Some(io) = layer.downcast_ref::<std::io::Error>() {
            // Its message (its inner error's, if any; whose source is the next layer).
            return Layer::Io(std::io::Error::new(
                io.kind(),
                redact(&io.to_string()).into_owned(),
            ));
        }
        Layer::Message(redact(&layer.to_string()).into_owned())
    }
}

/// A copy of `e` with every text in it redacted.
fn redact_ours(e: &crate::Error) -> crate::Error {
    use crate::Error;
    let r = |s: &str| redact(s).into_owned();
    match e {
        Error::WorkerPanicked { stage, message } => Error::WorkerPanicked {
            stage,
            message: r(message),
        },
        Error::NoRuntime { stage } => Error::NoRuntime { stage },
        Error::NotResumable { stage, reason } => Error::NotResumable {
            stage: r(stage),
            reason: r(reason),
        },
        Error::Checkpoint(m) => Error::Checkpoint(r(m)),
        Error::InvalidArgument(m) => Error::InvalidArgument(r(m)),
        Error::DataLoss {
            path,
            record,
            offset,
            message,
            looks_compressed,
            skipped,
        } => Error::DataLoss {
            path: r(path),
            record: *record,
            offset: *offset,
            message: r(message),
            looks_compressed: *looks_compressed,
            skipped: skipped.clone(),
        },
        Error::PaddingTooSmall {
            component,
            element,
            shape,
            padded,
        } => Error::PaddingTooSmall {
            component: *component,
            element: *element,
            shape: shape.clone(),
            padded: padded.clone(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn user_information_queries_fragments_and_odd_ports_are_removed() {
        let cases = [
            ("s3://user:pw@bucket/key", "s3://bucket/key"),
            (
                "opening s3://tok@bucket/k: gone",
                "opening s3://bucket/k: gone",
            ),
            ("s3://user:pw@host:99999/k", "s3://host:99999/k"),
            ("s3://user:pw@[::1/k", "s3://[::1/k"),
            ("s3://user:pw@bad host/k", "s3://bad host/k"),
            ("s3://host:pw/k", "s3://host:***/k"),
            ("s3://[::1]:pw/k", "s3://[::1]:***/k"),
            (
                "(http://127.0.0.1:80, for a role)",
                "(http://127.0.0.1:80, for a role)",
            ),
            ("http://h/k?X-Amz-Signature=abc: 404", "http://h/k: 404"),
            ("http://h/k?abc def", "http://h/k def"),
            ("http://h/k#frag.", "http://h/k."),
            ("s3://b/k*.txt%3FSECRET: none", "s3://b/k*.txt: none"),
            ("url (http://u:p@h/k?q)", "url (http://h/k)"),
            (
                "a sig=abc&sv=1 X-Amz-Security-Token=t",
                "a sig=***&sv=1 X-Amz-Security-Token=***",
            ),
            ("Authorization: Bearer abc.def", "Authorization: Bearer ***"),
            (
                "set AWS_SKIP_SIGNATURE=true for",
                "set AWS_SKIP_SIGNATURE=true for",
            ),
            ("nothing to hide", "nothing to hide"),
            ("/data/key=abc/part-0.csv", "/data/key=abc/part-0.csv"),
            ("s3://bucket/a@b/key", "s3://bucket/a@b/key"),
        ];
        for (text, shown) in cases {
            assert_eq!(redact(text), shown, "{text}");
        }
    }

    #[test]
    fn a_rebuilt_chain_keeps_streamloads_errors_and_io_kinds() {
        let inner = std::io::Error::new(std::io::ErrorKind::NotFound, "gone s3://u:pw@b/k");
        let e = anyhow::Error::new(inner)
            .context(crate::Error::InvalidArgument("bad s3://u:pw@b/k".into()))
            .context("opening s3://u:pw@b/k");
        let e = super::redact_error(e);
        let shown = format!("{e:#} {e:?}");
        assert!(!shown.contains("pw"), "{shown}");
        assert!(matches!(
            e.downcast_ref::<crate::Error>(),
            Some(crate::Error::InvalidArgument(m)) if m == "bad s3://b/k"
        ));
        let io = e.root_cause().downcast_ref::<std::io::Error>();
        assert_eq!(io.map(|e| e.kind()), Some(std::io::ErrorKind::NotFound));
    }
}

//! Positions in a scenario file, from the spans of the parsed TOML tree
//! (`toml::de::DeTable`: every key and value with its byte range in the
//! text). Keys and values are looked up in the tree, never searched for in
//! the text; `error::Source` turns the start of a span into a line and a
//! column.

use std::ops::Range;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// The spans of key `key` of `table` and of its value.
pub(crate) fn entry(table: &DeTable<'_>, key: &str) -> Option<(Range<usize>, Range<usize>)> {
    table.get_key_value(key).map(|(k, v)| (k.span(), v.span()))
}

/// The value at `path` below `table` (`["cluster", "timing"]`), each step a
/// key of a table.
pub(crate) fn value_at<'t, 'i>(
    table: &'t DeTable<'i>,
    path: &[&str],
) -> Option<&'t Spanned<DeValue<'i>>> {
    let (first, rest) = path.split_first()?;
    let mut v = table.get(*first)?;
    for key in rest {
        v = v.get_ref().as_table()?.get(*key)?;
    }
    Some(v)
}

/// The start of the key `key` of the table at `path` below `table`.
pub(crate) fn key_in(table: &DeTable<'_>, path: &[&str], key: &str) -> Option<usize> {
    let inner = value_at(table, path)?.get_ref().as_table()?;
    entry(inner, key).map(|(k, _)| k.start)
}

/// Where in `table` (a step) an error message points: for each term the
/// message quotes in backticks, in order, the first key of that name at any
/// depth, else the first scalar value written so, else the first string value
/// that contains it. `None` if no term is found.
pub(crate) fn quoted(table: &DeTable<'_>, message: &str) -> Option<usize> {
    let mut found = Found::default();
    found.table(table);
    message
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|q| !q.is_empty())
        .find_map(|q| {
            let key = found.keys.iter().filter(|(k, _)| k == q).map(|(_, at)| *at);
            let scalars = || found.scalars.iter();
            let exact = || scalars().filter(|s| s.text == q).map(|s| s.at).min();
            let within = || {
                let within = scalars().filter(|s| s.is_str && s.text.contains(q));
                within.map(|s| s.at).min()
            };
            key.min().or_else(exact).or_else(within)
        })
}

/// Every key and scalar value below a table, with the start of its span.
#[derive(Default)]
struct Found {
    keys: Vec<(String, usize)>,
    scalars: Vec<Scalar>,
}

struct Scalar {
    /// The content of a string; a number, boolean or date as TOML writes it.
    text: String,
    is_str: bool,
    at: usize,
}

impl Found {
    fn table(&mut self, table: &DeTable<'_>) {
        for (k, v) in table.iter() {
            self.keys.push((k.get_ref().to_string(), k.span().start));
            self.value(v);
        }
    }

    fn value(&mut self, v: &Spanned<DeValue<'_>>) {
        let at = v.span().start;
        let (text, is_str) = match v.get_ref() {
            DeValue::String(s) => (s.to_string(), true),
            DeValue::Integer(i) => (i.to_string(), false),
            DeValue::Float(f) => (f.to_string(), false),
            DeValue::Boolean(b) => (b.to_string(), false),
            DeValue::Datetime(d) => (d.to_string(), false),
            DeValue::Array(items) => {
                items.iter().for_each(|item| self.value(item));
                return;
            }
            DeValue::Table(t) => return self.table(t),
        };
        self.scalars.push(Scalar { text, is_str, at });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "[[step]]\naction = \"add_toxic\"\ntarget = \"any-except:leader\"\ntimeout = 60\ntoxic = { type = \"latency\", attributes = { spread = 5 } }\n";

    fn step() -> DeTable<'static> {
        let doc = DeTable::parse(TEXT).unwrap().into_inner();
        let steps = doc.get("step").unwrap().get_ref().as_array().unwrap();
        steps[0].get_ref().as_table().unwrap().clone()
    }

    fn line(offset: usize) -> usize {
        TEXT[..offset].matches('\n').count() + 1
    }

    #[test]
    fn quoted_terms_point_at_keys_then_values() {
        let t = step();
        let at = |m: &str| quoted(&t, m).map(line);
        assert_eq!(at("unknown field `toxic`, expected `link`"), Some(5));
        assert_eq!(
            at("unknown attribute `spread` for toxic `latency`"),
            Some(5)
        );
        assert_eq!(at("invalid duration `60`: ..."), Some(4));
        assert_eq!(at("unknown target `leader`"), Some(3));
        assert_eq!(at("unknown variant `add_toxic`"), Some(2));
        assert_eq!(at("missing field `jitter`"), None);
        assert_eq!(at("no quotes"), None);
    }

    #[test]
    fn paths_and_entries_have_spans() {
        let text = "[cluster]\nnodes = 3\n\n[cluster.timing]\nheartbeat = \"0s\"\n";
        let doc = DeTable::parse(text).unwrap().into_inner();
        let at = key_in(&doc, &["cluster", "timing"], "heartbeat").unwrap();
        assert_eq!(&text[at..at + 9], "heartbeat");
        assert!(key_in(&doc, &["cluster", "timing"], "tick").is_none());
        let (k, v) = entry(
            value_at(&doc, &["cluster"])
                .unwrap()
                .get_ref()
                .as_table()
                .unwrap(),
            "nodes",
        )
        .unwrap();
        assert_eq!((&text[k], &text[v]), ("nodes", "3"));
    }
}

//! The sink URI, in TiCDC's form:
//! `kafka://host:port[,host:port...]/topic?protocol=canal-json&partition-num=3&max-message-bytes=1048576&replication-factor=1`.
//! Unknown parameters, repeated parameters and bad values are rejected with
//! a message that names the parameter and what would be accepted.

use std::collections::BTreeSet;
use std::time::Duration;

/// A rejected sink URI.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("[CDC:ErrSinkURIInvalid]invalid sink URI {uri:?}: {problem}")]
pub struct UriError {
    pub uri: String,
    pub problem: String,
}

/// The encodings a sink can write. Only canal-json is implemented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    CanalJson,
}

/// A validated Kafka sink URI.
#[derive(Debug, Clone, PartialEq)]
pub struct SinkUri {
    pub brokers: Vec<String>,
    pub topic: String,
    pub protocol: Protocol,
    /// Partitions to spread keys over; `None` = all of the topic's.
    pub partition_num: Option<i32>,
    pub replication_factor: i32,
    pub max_message_bytes: usize,
    /// -1 (all), 1 (leader) or 0 (none).
    pub required_acks: i16,
    pub client_id: Option<String>,
    /// Whether canal-json messages carry the `_tidb` extension (commit ts).
    pub enable_tidb_extension: bool,
    /// Bound on a delivery (librdkafka `message.timeout.ms`).
    pub write_timeout: Duration,
    /// Bound on establishing a broker connection.
    pub dial_timeout: Duration,
}

pub const KNOWN_PARAMS: &[&str] = &[
    "protocol",
    "partition-num",
    "replication-factor",
    "max-message-bytes",
    "required-acks",
    "kafka-client-id",
    "enable-tidb-extension",
    "write-timeout",
    "dial-timeout",
];

/// Parses `10s`, `500ms`, `2m` (a number and a unit).
pub fn parse_duration(s: &str) -> Option<Duration> {
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit())?);
    let n: u64 = num.parse().ok()?;
    match unit {
        "ms" => Some(Duration::from_millis(n)),
        "s" => Some(Duration::from_secs(n)),
        "m" => Some(Duration::from_secs(n * 60)),
        _ => None,
    }
}

impl SinkUri {
    pub fn parse(uri: &str) -> Result<SinkUri, UriError> {
        let err = |problem: String| UriError {
            uri: uri.to_string(),
            problem,
        };
        let (scheme, rest) = uri
            .split_once("://")
            .ok_or_else(|| err("expected kafka://host:port/topic?protocol=canal-json".into()))?;
        if scheme != "kafka" {
            return Err(err(format!(
                "scheme {scheme:?} is not supported; use kafka://"
            )));
        }
        // The authority may list several brokers, which URL parsers refuse:
        // split it off by hand and let `url` parse path and query only.
        let cut = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(cut);
        if authority.is_empty() {
            return Err(err(
                "no broker address; expected kafka://host:port/topic".into()
            ));
        }
        let url = url::Url::parse(&format!("kafka://brokers{tail}")).map_err(|e| {
            err(format!(
                "{e}; expected kafka://host:port/topic?protocol=canal-json"
            ))
        })?;
        let mut brokers = Vec::new();
        for b in authority.split(',') {
            let (host, port) = b
                .rsplit_once(':')
                .ok_or_else(|| err(format!("broker {b:?} has no port; write host:port")))?;
            if host.is_empty() || port.parse::<u16>().map_or(true, |p| p == 0) {
                return Err(err(format!(
                    "broker {b:?} is not host:port with a port in 1..65535"
                )));
            }
            brokers.push(b.to_string());
        }
        let topic = url.path().trim_start_matches('/').to_string();
        if topic.is_empty() {
            return Err(err("no topic; expected kafka://host:port/topic".into()));
        }
        if topic.len() > 249
            || !topic
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        {
            return Err(err(format!(
                "topic {topic:?} is not a valid Kafka topic name (1-249 of [a-zA-Z0-9._-])"
            )));
        }
        let mut out = SinkUri {
            brokers,
            topic,
            protocol: Protocol::CanalJson,
            partition_num: None,
            replication_factor: 1,
            max_message_bytes: 10 * 1024 * 1024,
            required_acks: -1,
            client_id: None,
            enable_tidb_extension: true,
            write_timeout: Duration::from_secs(10),
            dial_timeout: Duration::from_secs(10),
        };
        let mut seen = BTreeSet::new();
        let mut protocol_set = false;
        for (k, v) in url.query_pairs() {
            let (k, v) = (k.to_string(), v.to_string());
            if !seen.insert(k.clone()) {
                return Err(err(format!("parameter {k} is given twice")));
            }
            let bad = |want: &str| err(format!("parameter {k}={v:?} is invalid: {want}"));
            match k.as_str() {
                "protocol" => {
                    protocol_set = true;
                    match v.as_str() {
                        "canal-json" => out.protocol = Protocol::CanalJson,
                        _ => return Err(bad("only canal-json is supported")),
                    }
                }
                "partition-num" => {
                    out.partition_num = Some(
                        v.parse()
                            .ok()
                            .filter(|n| (1..=10_000).contains(n))
                            .ok_or_else(|| bad("a whole number from 1 to 10000"))?,
                    )
                }
                "replication-factor" => {
                    out.replication_factor = v
                        .parse()
                        .ok()
                        .filter(|n| (1..=32).contains(n))
                        .ok_or_else(|| bad("a whole number from 1 to 32"))?
                }
                "max-message-bytes" => {
                    out.max_message_bytes = v
                        .parse()
                        .ok()
                        .filter(|n| (1024..=1_000_000_000).contains(n))
                        .ok_or_else(|| bad("a byte count from 1024 to 1000000000"))?
                }
                "required-acks" => {
                    out.required_acks = v
                        .parse()
                        .ok()
                        .filter(|n| (-1..=1).contains(n))
                        .ok_or_else(|| bad("-1 (all), 0 (none) or 1 (leader)"))?
                }
                "kafka-client-id" => {
                    if v.is_empty() {
                        return Err(bad("a non-empty client id"));
                    }
                    out.client_id = Some(v.clone())
                }
                "enable-tidb-extension" => {
                    out.enable_tidb_extension = v.parse().map_err(|_| bad("true or false"))?
                }
                "write-timeout" => {
                    out.write_timeout = parse_duration(&v)
                        .filter(|d| !d.is_zero())
                        .ok_or_else(|| bad("a duration such as 10s or 500ms"))?
                }
                "dial-timeout" => {
                    out.dial_timeout = parse_duration(&v)
                        .filter(|d| !d.is_zero())
                        .ok_or_else(|| bad("a duration such as 10s or 500ms"))?
                }
                _ => {
                    return Err(err(format!(
                        "unknown parameter {k:?}; known parameters: {}",
                        KNOWN_PARAMS.join(", ")
                    )));
                }
            }
        }
        if !protocol_set {
            return Err(err("missing protocol; add ?protocol=canal-json".into()));
        }
        Ok(out)
    }

    pub fn bootstrap(&self) -> String {
        self.brokers.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ticdc_form() {
        let u = SinkUri::parse("kafka://127.0.0.1:9092,kafka-2:9093/cdc-topic?protocol=canal-json&partition-num=3&max-message-bytes=1048576&replication-factor=1&write-timeout=5s").unwrap();
        assert_eq!(u.brokers, vec!["127.0.0.1:9092", "kafka-2:9093"]);
        assert_eq!(u.topic, "cdc-topic");
        assert_eq!(u.partition_num, Some(3));
        assert_eq!(u.max_message_bytes, 1_048_576);
        assert_eq!(u.write_timeout, Duration::from_secs(5));
        assert_eq!(u.bootstrap(), "127.0.0.1:9092,kafka-2:9093");
    }

    #[test]
    fn rejects_bad_uris_with_the_reason() {
        for (uri, want) in [
            ("http://h:1/t?protocol=canal-json", "scheme \"http\""),
            ("kafka:///t?protocol=canal-json", "no broker"),
            ("kafka://h/t?protocol=canal-json", "has no port"),
            ("kafka://h:0/t?protocol=canal-json", "port in 1..65535"),
            ("kafka://h:1/?protocol=canal-json", "no topic"),
            (
                "kafka://h:1/bad topic?protocol=canal-json",
                "not a valid Kafka topic",
            ),
            ("kafka://h:1/t", "missing protocol"),
            ("kafka://h:1/t?protocol=avro", "only canal-json"),
            (
                "kafka://h:1/t?protocol=canal-json&partition-num=0",
                "partition-num",
            ),
            (
                "kafka://h:1/t?protocol=canal-json&partition-num=x",
                "partition-num",
            ),
            (
                "kafka://h:1/t?protocol=canal-json&replication-factor=0",
                "replication-factor",
            ),
            (
                "kafka://h:1/t?protocol=canal-json&max-message-bytes=10",
                "max-message-bytes",
            ),
            (
                "kafka://h:1/t?protocol=canal-json&required-acks=2",
                "required-acks",
            ),
            (
                "kafka://h:1/t?protocol=canal-json&write-timeout=10",
                "write-timeout",
            ),
            (
                "kafka://h:1/t?protocol=canal-json&enable-tidb-extension=yes",
                "true or false",
            ),
            (
                "kafka://h:1/t?protocol=canal-json&partition-num=1&partition-num=2",
                "given twice",
            ),
            (
                "kafka://h:1/t?protocol=canal-json&compression=lz4",
                "unknown parameter \"compression\"",
            ),
            ("not a uri", "expected kafka://"),
        ] {
            let e = SinkUri::parse(uri).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains(want), "{uri}: {want:?} not in {msg:?}");
            assert!(msg.starts_with("[CDC:ErrSinkURIInvalid]"), "{msg}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), None);
        assert_eq!(parse_duration("s"), None);
    }
}

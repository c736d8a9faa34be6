//! An async client for Toxiproxy 2.x's HTTP API that never fails silently.
//!
//! Owns every call the harness makes to Toxiproxy: proxies (create, populate,
//! enable/disable, delete), toxics (add, update, remove, list) and `/reset`.
//! Each call has a timeout, every non-2xx answer becomes an [`Error`] naming
//! the method, path, status and body, and writes are read back: adding a toxic
//! returns it only once the proxy lists it as active.
//!
//! Why not `toxiproxy_rust`: see ARCHITECTURE.md ("Written by hand").

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Default bound on one API call. Toxiproxy's API can stall under load
/// (upstream issues 412, 558); a stalled call must become an error.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("toxiproxy {method} {url} timed out after {timeout:?}: is the Toxiproxy container up and its API port mapped? (a DELETE of a toxic that hangs while its proxy is up is Shopify/toxiproxy#558: a client closed its connection while the toxic held data; only a Toxiproxy restart frees the API)")]
    Timeout {
        method: &'static str,
        url: String,
        timeout: Duration,
    },
    #[error("toxiproxy {method} {url} failed to connect or send: {source}")]
    Transport {
        method: &'static str,
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("toxiproxy {method} {url} answered HTTP {status}: {body}")]
    Status {
        method: &'static str,
        url: String,
        status: u16,
        body: String,
    },
    #[error("toxiproxy {method} {url} answered a body that is not the expected JSON: {detail}")]
    Decode {
        method: &'static str,
        url: String,
        detail: String,
    },
    #[error("toxiproxy accepted {what} but reading it back shows {found}")]
    NotApplied { what: String, found: String },
}

pub type Result<T> = std::result::Result<T, Error>;

/// Which direction of a proxied connection a toxic acts on.
/// `Upstream` is client -> server, `Downstream` server -> client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    Upstream,
    Downstream,
}

impl Stream {
    pub const BOTH: [Stream; 2] = [Stream::Upstream, Stream::Downstream];

    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Upstream => "upstream",
            Stream::Downstream => "downstream",
        }
    }
}

/// The toxics of Toxiproxy 2.x with their attributes (times in milliseconds,
/// `rate` in KB/s, sizes in bytes, slicer `delay` in microseconds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "attributes", rename_all = "snake_case")]
pub enum ToxicKind {
    /// Adds `latency` ± `jitter` ms to all data.
    Latency { latency: u64, jitter: u64 },
    /// Limits the connection to `rate` KB/s.
    Bandwidth { rate: u64 },
    /// Delays the TCP close by `delay` ms.
    SlowClose { delay: u64 },
    /// Stops all data and closes the connection after `timeout` ms
    /// (0 = hold the data until the toxic is removed).
    Timeout { timeout: u64 },
    /// Resets the connection (TCP RST) after `timeout` ms.
    ResetPeer { timeout: u64 },
    /// Slices data into packets of `average_size` ± `size_variation` bytes
    /// with `delay` µs between them.
    Slicer {
        average_size: u64,
        size_variation: u64,
        delay: u64,
    },
    /// Closes the connection after `bytes` bytes.
    LimitData { bytes: u64 },
}

impl ToxicKind {
    pub fn type_name(&self) -> &'static str {
        match self {
            ToxicKind::Latency { .. } => "latency",
            ToxicKind::Bandwidth { .. } => "bandwidth",
            ToxicKind::SlowClose { .. } => "slow_close",
            ToxicKind::Timeout { .. } => "timeout",
            ToxicKind::ResetPeer { .. } => "reset_peer",
            ToxicKind::Slicer { .. } => "slicer",
            ToxicKind::LimitData { .. } => "limit_data",
        }
    }
}

/// A toxic as Toxiproxy stores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Toxic {
    pub name: String,
    pub stream: Stream,
    /// Probability in [0, 1] that a connection gets the toxic.
    pub toxicity: f32,
    #[serde(flatten)]
    pub kind: ToxicKind,
}

impl Toxic {
    /// A toxic on one direction with toxicity 1, named `<type>_<stream>`
    /// (Toxiproxy's own default naming).
    pub fn new(kind: ToxicKind, stream: Stream) -> Self {
        Toxic {
            name: format!("{}_{}", kind.type_name(), stream.as_str()),
            stream,
            toxicity: 1.0,
            kind,
        }
    }

    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    pub fn with_toxicity(mut self, toxicity: f32) -> Self {
        self.toxicity = toxicity;
        self
    }

    /// The same toxic on both directions, as two toxics `<name>_upstream`
    /// and `<name>_downstream`.
    pub fn both_ways(kind: ToxicKind, name: &str) -> [Toxic; 2] {
        Stream::BOTH.map(|s| Toxic::new(kind.clone(), s).named(format!("{name}_{}", s.as_str())))
    }
}

/// A proxy: Toxiproxy listens on `listen` and forwards to `upstream`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proxy {
    pub name: String,
    pub listen: String,
    pub upstream: String,
    pub enabled: bool,
    #[serde(default, skip_serializing)]
    pub toxics: Vec<Toxic>,
}

impl Proxy {
    pub fn new(
        name: impl Into<String>,
        listen: impl Into<String>,
        upstream: impl Into<String>,
    ) -> Self {
        Proxy {
            name: name.into(),
            listen: listen.into(),
            upstream: upstream.into(),
            enabled: true,
            toxics: Vec::new(),
        }
    }
}

#[derive(Debug, Deserialize)]
struct PopulateAnswer {
    proxies: Vec<Proxy>,
}

/// A handle on one Toxiproxy server's API.
#[derive(Debug, Clone)]
pub struct Client {
    base: String,
    http: reqwest::Client,
    timeout: Duration,
}

impl Client {
    /// `base` is the API root, e.g. `http://127.0.0.1:8474`.
    pub fn new(base: impl Into<String>) -> Self {
        Self::with_timeout(base, DEFAULT_CALL_TIMEOUT)
    }

    pub fn with_timeout(base: impl Into<String>, timeout: Duration) -> Self {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            // Toxiproxy's API answers 'Connection: close' badly under load;
            // fresh connections avoid reusing a half-closed one.
            .pool_max_idle_per_host(0)
            .build()
            .expect("a reqwest client with only timeouts set always builds");
        Client {
            base: base.into().trim_end_matches('/').to_string(),
            http,
            timeout,
        }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    async fn call<B: Serialize>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<Body> {
        let url = format!("{}{}", self.base, path);
        let m: &'static str = match method {
            reqwest::Method::GET => "GET",
            reqwest::Method::POST => "POST",
            reqwest::Method::DELETE => "DELETE",
            _ => "request",
        };
        let mut req = self.http.request(method, &url);
        if let Some(b) = body {
            req = req.json(b);
        }
        let classify = |e: reqwest::Error, url: &str| {
            if e.is_timeout() {
                Error::Timeout {
                    method: m,
                    url: url.to_string(),
                    timeout: self.timeout,
                }
            } else {
                Error::Transport {
                    method: m,
                    url: url.to_string(),
                    source: e,
                }
            }
        };
        let resp = req.send().await.map_err(|e| classify(e, &url))?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(|e| classify(e, &url))?;
        if !status.is_success() {
            return Err(Error::Status {
                method: m,
                url,
                status: status.as_u16(),
                body: String::from_utf8_lossy(&bytes).trim().to_string(),
            });
        }
        tracing::debug!(target: "toxiproxy", method = m, %url, status = status.as_u16(), "toxiproxy call");
        Ok(Body {
            method: m,
            url,
            bytes: bytes.to_vec(),
        })
    }

    /// The server's version string (also the readiness probe).
    pub async fn version(&self) -> Result<String> {
        let b = self
            .call::<()>(reqwest::Method::GET, "/version", None)
            .await?;
        Ok(String::from_utf8_lossy(&b.bytes).trim().to_string())
    }

    /// Creates or replaces the given proxies in one call (idempotent).
    pub async fn populate(&self, proxies: &[Proxy]) -> Result<Vec<Proxy>> {
        let b = self
            .call(reqwest::Method::POST, "/populate", Some(&proxies))
            .await?;
        let answer: PopulateAnswer = b.json()?;
        for p in proxies {
            if !answer.proxies.iter().any(|q| q.name == p.name) {
                return Err(Error::NotApplied {
                    what: format!("proxy {}", p.name),
                    found: "no such proxy in the populate answer".into(),
                });
            }
        }
        Ok(answer.proxies)
    }

    pub async fn create_proxy(&self, proxy: &Proxy) -> Result<Proxy> {
        self.call(reqwest::Method::POST, "/proxies", Some(proxy))
            .await?
            .json()
    }

    /// Every proxy with its active toxics, sorted by name.
    pub async fn proxies(&self) -> Result<Vec<Proxy>> {
        let b = self
            .call::<()>(reqwest::Method::GET, "/proxies", None)
            .await?;
        let map: std::collections::BTreeMap<String, Proxy> = b.json()?;
        Ok(map.into_values().collect())
    }

    pub async fn proxy(&self, name: &str) -> Result<Proxy> {
        self.call::<()>(reqwest::Method::GET, &format!("/proxies/{name}"), None)
            .await?
            .json()
    }

    pub async fn delete_proxy(&self, name: &str) -> Result<()> {
        self.call::<()>(reqwest::Method::DELETE, &format!("/proxies/{name}"), None)
            .await
            .map(drop)
    }

    /// Enables or disables a proxy (disabled = listener closed and every
    /// connection through it dropped), then reads the state back.
    pub async fn set_enabled(&self, name: &str, enabled: bool) -> Result<Proxy> {
        let body = serde_json::json!({ "enabled": enabled });
        let p: Proxy = self
            .call(
                reqwest::Method::POST,
                &format!("/proxies/{name}"),
                Some(&body),
            )
            .await?
            .json()?;
        let back = self.proxy(name).await?;
        if back.enabled != enabled {
            return Err(Error::NotApplied {
                what: format!("enabled={enabled} on proxy {name}"),
                found: format!("enabled={}", back.enabled),
            });
        }
        Ok(p)
    }

    /// Adds a toxic and returns it once the proxy lists it as active.
    pub async fn add_toxic(&self, proxy: &str, toxic: &Toxic) -> Result<Toxic> {
        let added: Toxic = self
            .call(
                reqwest::Method::POST,
                &format!("/proxies/{proxy}/toxics"),
                Some(toxic),
            )
            .await?
            .json()?;
        self.expect_toxic(proxy, toxic).await?;
        Ok(added)
    }

    /// Replaces the attributes (and toxicity) of an existing toxic.
    pub async fn update_toxic(&self, proxy: &str, toxic: &Toxic) -> Result<Toxic> {
        let updated: Toxic = self
            .call(
                reqwest::Method::POST,
                &format!("/proxies/{proxy}/toxics/{}", toxic.name),
                Some(toxic),
            )
            .await?
            .json()?;
        self.expect_toxic(proxy, toxic).await?;
        Ok(updated)
    }

    pub async fn remove_toxic(&self, proxy: &str, name: &str) -> Result<()> {
        self.call::<()>(
            reqwest::Method::DELETE,
            &format!("/proxies/{proxy}/toxics/{name}"),
            None,
        )
        .await?;
        let active = self.toxics(proxy).await?;
        if active.iter().any(|t| t.name == name) {
            return Err(Error::NotApplied {
                what: format!("removal of toxic {name} from {proxy}"),
                found: "it is still listed".into(),
            });
        }
        Ok(())
    }

    /// The toxics active on a proxy.
    pub async fn toxics(&self, proxy: &str) -> Result<Vec<Toxic>> {
        self.call::<()>(
            reqwest::Method::GET,
            &format!("/proxies/{proxy}/toxics"),
            None,
        )
        .await?
        .json()
    }

    /// Enables every proxy and removes every toxic.
    pub async fn reset(&self) -> Result<()> {
        self.call::<()>(reqwest::Method::POST, "/reset", None)
            .await?;
        for p in self.proxies().await? {
            if !p.enabled || !p.toxics.is_empty() {
                return Err(Error::NotApplied {
                    what: "reset".into(),
                    found: format!(
                        "proxy {} enabled={} with {} toxic(s)",
                        p.name,
                        p.enabled,
                        p.toxics.len()
                    ),
                });
            }
        }
        Ok(())
    }

    /// The Prometheus text of `/metrics` (per-proxy byte counters when the
    /// server runs with `-proxy-metrics`).
    pub async fn metrics(&self) -> Result<String> {
        let b = self
            .call::<()>(reqwest::Method::GET, "/metrics", None)
            .await?;
        Ok(String::from_utf8_lossy(&b.bytes).into_owned())
    }

    async fn expect_toxic(&self, proxy: &str, want: &Toxic) -> Result<()> {
        let active = self.toxics(proxy).await?;
        match active.iter().find(|t| t.name == want.name) {
            Some(t) if t.kind == want.kind && t.stream == want.stream => Ok(()),
            Some(t) => Err(Error::NotApplied {
                what: format!("toxic {:?} on {proxy}", want),
                found: format!("{t:?}"),
            }),
            None => Err(Error::NotApplied {
                what: format!("toxic {} on {proxy}", want.name),
                found: format!(
                    "active toxics [{}]",
                    active
                        .iter()
                        .map(|t| t.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }),
        }
    }
}

/// Bytes the proxy `name` has carried in `direction` ("upstream" = client to
/// server, "downstream"), read from `/metrics` text (the server runs with
/// `-proxy-metrics`); `None` when the proxy has no such series yet.
pub fn proxy_sent_bytes(metrics: &str, name: &str, direction: Stream) -> Option<u64> {
    let proxy = format!("proxy=\"{name}\"");
    let dir = format!("direction=\"{}\"", direction.as_str());
    metrics
        .lines()
        .filter(|l| l.starts_with("toxiproxy_proxy_sent_bytes_total{"))
        .filter(|l| l.contains(&proxy) && l.contains(&dir))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .reduce(|a, b| a + b)
}

/// An answer's body, kept with the request it answers (for errors).
pub struct Body {
    pub method: &'static str,
    pub url: String,
    pub bytes: Vec<u8>,
}

impl Body {
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_slice(&self.bytes).map_err(|e| Error::Decode {
            method: self.method,
            url: self.url.clone(),
            detail: format!("{e}; body: {}", String::from_utf8_lossy(&self.bytes)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn toxics_serialize_in_toxiproxy_shape() {
        let t = Toxic::new(
            ToxicKind::Latency {
                latency: 100,
                jitter: 5,
            },
            Stream::Downstream,
        );
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"name": "latency_downstream", "stream": "downstream", "toxicity": 1.0,
                "type": "latency", "attributes": {"latency": 100, "jitter": 5}})
        );
        let all = [
            ToxicKind::Latency {
                latency: 1,
                jitter: 0,
            },
            ToxicKind::Bandwidth { rate: 1 },
            ToxicKind::SlowClose { delay: 1 },
            ToxicKind::Timeout { timeout: 0 },
            ToxicKind::ResetPeer { timeout: 1 },
            ToxicKind::Slicer {
                average_size: 1,
                size_variation: 0,
                delay: 1,
            },
            ToxicKind::LimitData { bytes: 1 },
        ];
        for k in all {
            for s in Stream::BOTH {
                let t = Toxic::new(k.clone(), s);
                let v = serde_json::to_value(&t).unwrap();
                assert_eq!(v["type"], k.type_name());
                let back: Toxic = serde_json::from_value(v).unwrap();
                assert_eq!(back, t);
            }
        }
    }

    #[test]
    fn both_ways_names_each_direction() {
        let [up, down] = Toxic::both_ways(ToxicKind::Timeout { timeout: 0 }, "cut");
        assert_eq!(
            (up.name.as_str(), up.stream),
            ("cut_upstream", Stream::Upstream)
        );
        assert_eq!(
            (down.name.as_str(), down.stream),
            ("cut_downstream", Stream::Downstream)
        );
    }

    #[test]
    fn proxy_bytes_parse_prometheus_text() {
        let text = "# HELP x\n\
toxiproxy_proxy_sent_bytes_total{direction=\"upstream\",listener=\"[::]:1\",proxy=\"kafka\",upstream=\"k:9\"} 120\n\
toxiproxy_proxy_sent_bytes_total{direction=\"downstream\",listener=\"[::]:1\",proxy=\"kafka\",upstream=\"k:9\"} 3.5e+06\n\
toxiproxy_proxy_received_bytes_total{direction=\"upstream\",listener=\"[::]:1\",proxy=\"kafka\",upstream=\"k:9\"} 999\n";
        assert_eq!(proxy_sent_bytes(text, "kafka", Stream::Upstream), Some(120));
        assert_eq!(
            proxy_sent_bytes(text, "kafka", Stream::Downstream),
            Some(3_500_000)
        );
        assert_eq!(proxy_sent_bytes(text, "etcd", Stream::Upstream), None);
    }

    /// A one-shot HTTP server answering every request with `status` and `body`,
    /// or never answering when `status` is 0.
    async fn fake_server(status: u16, body: &'static str) -> String {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = l.accept().await.unwrap();
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let _ = s.read(&mut buf).await;
                    if status == 0 {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        return;
                    }
                    let resp = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = s.write_all(resp.as_bytes()).await;
                });
            }
        });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn http_errors_are_surfaced_with_status_and_body() {
        let base = fake_server(409, r#"{"error":"toxic already exists","status":409}"#).await;
        let c = Client::new(base);
        let err = c
            .add_toxic(
                "kafka",
                &Toxic::new(ToxicKind::Timeout { timeout: 0 }, Stream::Upstream),
            )
            .await
            .unwrap_err();
        match &err {
            Error::Status {
                status,
                body,
                method,
                ..
            } => {
                assert_eq!(*status, 409);
                assert_eq!(*method, "POST");
                assert!(body.contains("already exists"), "{body}");
            }
            other => panic!("expected a status error, got {other:?}"),
        }
        assert!(err.to_string().contains("/proxies/kafka/toxics"), "{err}");
    }

    #[tokio::test]
    async fn a_stalled_api_call_times_out() {
        let base = fake_server(0, "").await;
        let c = Client::with_timeout(base, Duration::from_millis(300));
        let err = c.version().await.unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    }

    #[tokio::test]
    async fn an_accepted_toxic_that_is_not_listed_is_an_error() {
        // The server says 200 to everything and lists no toxics: the client
        // must not report the toxic as applied.
        let base = fake_server(200, r#"[]"#).await;
        let c = Client::new(base);
        let err = c
            .add_toxic(
                "kafka",
                &Toxic::new(ToxicKind::Timeout { timeout: 0 }, Stream::Upstream),
            )
            .await
            .unwrap_err();
        // Either the echo of the add is not a toxic (decode) or the read-back misses it.
        assert!(
            matches!(err, Error::Decode { .. } | Error::NotApplied { .. }),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn nothing_listening_is_a_transport_error() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let c = Client::with_timeout(format!("http://{addr}"), Duration::from_secs(2));
        let err = c.proxies().await.unwrap_err();
        assert!(
            matches!(err, Error::Transport { .. } | Error::Timeout { .. }),
            "{err:?}"
        );
    }
}

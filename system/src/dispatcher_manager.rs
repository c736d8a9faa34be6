//! The dispatcher manager: the dispatchers of one changefeed on one node.
//!
//! Owns the changefeed's Kafka sink (one producer shared by its
//! dispatchers), reports a watermark (min checkpoint over its dispatchers)
//! and per-dispatcher status, collects the first sink error and re-reports it
//! every `error_report_interval` until closed (TiCDC's `collectErrors`), and
//! closes asynchronously: the first [`DispatcherManager::try_close`] answers
//! "not yet" and starts the teardown; later calls answer "done" once every
//! dispatcher stopped and the producer is gone.
//!
//! The control plane drives it through: [`DispatcherManager::new`],
//! [`add_dispatcher`](DispatcherManager::add_dispatcher),
//! [`remove_dispatcher`](DispatcherManager::remove_dispatcher),
//! [`watermark`](DispatcherManager::watermark),
//! [`status`](DispatcherManager::status),
//! [`try_close`](DispatcherManager::try_close) and the error channel.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;

use crate::dispatcher::{Dispatcher, DispatcherConfig, DispatcherState, DispatcherStatus};
use crate::node::clock::now_ms;
use crate::proto::upstream_client::UpstreamClient;
use crate::proto::{ListTablesRequest, TableName};
use crate::sink::{KafkaSink, SinkError, SinkUri, WriteMode};
use crate::upstream::table_str;

#[derive(Debug, Clone)]
pub struct ManagerConfig {
    pub changefeed: String,
    pub node: String,
    pub sink_uri: String,
    /// The upstream's gRPC endpoint, e.g. `http://upstream:7000`.
    pub upstream: String,
    /// How often the first error is re-reported (TiCDC: 5 s).
    pub error_report_interval: Duration,
    pub dispatcher: DispatcherConfig,
    /// One shared producer, or one transactional producer per table
    /// (`WriteMode::fenced_if(profile.sink_writes_fenced())`).
    pub write_mode: WriteMode,
}

/// An error as it travels up to the maintainer and coordinator
/// (TiCDC's `RunningError`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunningError {
    pub time_ms: u64,
    pub node: String,
    pub changefeed: String,
    pub code: String,
    pub message: String,
    pub retryable: bool,
}

/// What stops a manager from being created or a dispatcher from being added.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    #[error(transparent)]
    Uri(#[from] crate::sink::uri::UriError),
    #[error(transparent)]
    Sink(#[from] SinkError),
    #[error("upstream {endpoint}: {detail}")]
    Upstream { endpoint: String, detail: String },
    #[error("table {0} does not exist upstream")]
    UnknownTable(String),
    #[error("changefeed {changefeed} already has a dispatcher for {table} on this node")]
    DuplicateDispatcher { changefeed: String, table: String },
    #[error("no dispatcher for {0}")]
    NoDispatcher(String),
    #[error("the dispatcher manager of {0} is closing")]
    Closing(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Watermark {
    pub checkpoint_ts: u64,
    pub resolved_ts: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CloseState {
    Open,
    Closing,
    Closed,
}

pub struct DispatcherManager {
    cfg: ManagerConfig,
    /// Taken out (and its producer torn down) when the manager closes.
    sink: Mutex<Option<Arc<KafkaSink>>>,
    topic: String,
    upstream: UpstreamClient<tonic::transport::Channel>,
    dispatchers: Mutex<BTreeMap<String, Dispatcher>>,
    /// Tables whose dispatcher is being added: a second add of one waits
    /// for nothing and is refused, so a table never gets two writers here.
    adding: Mutex<std::collections::BTreeSet<String>>,
    next_id: AtomicU64,
    close: Arc<Mutex<CloseState>>,
    first_error: Arc<Mutex<Option<RunningError>>>,
    stop_reporting: tokio::sync::watch::Sender<bool>,
}

impl DispatcherManager {
    /// Validates the sink URI, creates the sink (producer + topic) and a lazy
    /// upstream channel, and starts the error collector, which sends the
    /// first error to `errors` at once and again every
    /// `error_report_interval` until the manager is closed.
    pub async fn new(
        cfg: ManagerConfig,
        errors: tokio::sync::mpsc::Sender<RunningError>,
    ) -> Result<Arc<Self>, ManagerError> {
        let uri = SinkUri::parse(&cfg.sink_uri)?;
        let sink = Arc::new(
            KafkaSink::open(&cfg.changefeed, &uri, cfg.write_mode, cfg.dispatcher.bugs)
                .await?
                .keeping_queue(cfg.dispatcher.bugs.sink_keeps_queue),
        );
        let endpoint = tonic::transport::Endpoint::from_shared(cfg.upstream.clone())
            .map_err(|e| ManagerError::Upstream {
                endpoint: cfg.upstream.clone(),
                detail: e.to_string(),
            })?
            .connect_timeout(Duration::from_secs(5));
        let upstream = UpstreamClient::new(endpoint.connect_lazy());
        let (stop_reporting, mut stopped) = tokio::sync::watch::channel(false);
        let topic = sink.uri().topic.clone();
        let partitions = sink.partitions();
        let m = Arc::new(DispatcherManager {
            cfg,
            sink: Mutex::new(Some(sink)),
            topic,
            upstream,
            dispatchers: Mutex::new(BTreeMap::new()),
            adding: Mutex::new(std::collections::BTreeSet::new()),
            next_id: AtomicU64::new(1),
            close: Arc::new(Mutex::new(CloseState::Open)),
            first_error: Arc::new(Mutex::new(None)),
            stop_reporting,
        });
        let weak = Arc::downgrade(&m);
        let interval = m.cfg.error_report_interval;
        tokio::spawn(async move {
            let mut poll = tokio::time::interval(Duration::from_millis(100));
            let mut last_report: Option<tokio::time::Instant> = None;
            loop {
                tokio::select! {
                    _ = poll.tick() => {}
                    _ = stopped.changed() => return,
                }
                let Some(m) = weak.upgrade() else { return };
                let Some(err) = m.collect_error() else {
                    continue;
                };
                if last_report.is_none_or(|t| t.elapsed() >= interval) {
                    last_report = Some(tokio::time::Instant::now());
                    tracing::warn!(changefeed = %err.changefeed, node = %err.node, code = %err.code, error = %err.message, "dispatcher manager reports an error");
                    if errors.try_send(err).is_err() {
                        tracing::warn!("error channel full or closed; the report is dropped (it is re-sent later)");
                    }
                }
            }
        });
        tracing::info!(changefeed = %m.cfg.changefeed, node = %m.cfg.node, topic = %m.topic, partitions, "dispatcher manager created");
        Ok(m)
    }

    /// The first error of the sink or a dispatcher, kept once seen.
    fn collect_error(&self) -> Option<RunningError> {
        let mut first = self.first_error.lock().unwrap();
        if first.is_none() {
            let e = self.sink.lock().unwrap().as_ref().and_then(|s| s.error());
            *first = e.map(|e| RunningError {
                time_ms: now_ms(),
                node: self.cfg.node.clone(),
                changefeed: self.cfg.changefeed.clone(),
                code: e.code().into(),
                message: e.to_string(),
                retryable: e.is_retryable(),
            });
        }
        first.clone()
    }

    /// Failpoint `sink/async-send-error` on this manager's sink.
    pub fn inject_sink_error(&self) {
        if let Some(s) = self.sink.lock().unwrap().as_ref() {
            s.inject_async_error(
                "injected by failpoint sink/async-send-error: write tcp: i/o timeout",
            );
        }
    }

    pub fn changefeed(&self) -> &str {
        &self.cfg.changefeed
    }

    pub fn first_error(&self) -> Option<RunningError> {
        self.collect_error()
    }

    /// Adds a dispatcher for `table` starting after `start_ts` (under
    /// fenced writes, once the table's transactional producer is set up).
    pub async fn add_dispatcher(
        &self,
        table: TableName,
        start_ts: u64,
    ) -> Result<u64, ManagerError> {
        if *self.close.lock().unwrap() != CloseState::Open {
            return Err(ManagerError::Closing(self.cfg.changefeed.clone()));
        }
        let key = table_str(&table);
        if self.dispatchers.lock().unwrap().contains_key(&key)
            || !self.adding.lock().unwrap().insert(key.clone())
        {
            return Err(ManagerError::DuplicateDispatcher {
                changefeed: self.cfg.changefeed.clone(),
                table: key,
            });
        }
        let r = self.add_reserved(table, key.clone(), start_ts).await;
        self.adding.lock().unwrap().remove(&key);
        r
    }

    async fn add_reserved(
        &self,
        table: TableName,
        key: String,
        start_ts: u64,
    ) -> Result<u64, ManagerError> {
        let tables = self
            .upstream
            .clone()
            .list_tables(ListTablesRequest {})
            .await
            .map_err(|e| ManagerError::Upstream {
                endpoint: self.cfg.upstream.clone(),
                detail: e.message().to_string(),
            })?
            .into_inner()
            .tables;
        let def = tables
            .into_iter()
            .find(|d| d.name.as_ref() == Some(&table))
            .ok_or_else(|| ManagerError::UnknownTable(key.clone()))?;
        let sink = self
            .sink
            .lock()
            .unwrap()
            .clone()
            .ok_or_else(|| ManagerError::Closing(self.cfg.changefeed.clone()))?;
        sink.register_table(def);
        sink.open_table(&table).await?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let d = Dispatcher::spawn(
            id,
            table.clone(),
            start_ts,
            self.upstream.clone(),
            sink.clone(),
            self.cfg.dispatcher.clone(),
        );
        // Checked under the dispatchers' lock: a close that starts after
        // this check takes the dispatcher with the others; one that started
        // before refuses it. A refused dispatcher is stopped, not leaked.
        let (refused, d) = {
            let mut ds = self.dispatchers.lock().unwrap();
            let closing = *self.close.lock().unwrap() != CloseState::Open;
            match ds.entry(key) {
                std::collections::btree_map::Entry::Occupied(e) => {
                    let e = ManagerError::DuplicateDispatcher {
                        changefeed: self.cfg.changefeed.clone(),
                        table: e.key().clone(),
                    };
                    (e, d)
                }
                std::collections::btree_map::Entry::Vacant(_) if closing => {
                    (ManagerError::Closing(self.cfg.changefeed.clone()), d)
                }
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(d);
                    return Ok(id);
                }
            }
        };
        d.stop().await;
        if matches!(refused, ManagerError::Closing(_)) {
            sink.close_table(&table, Duration::from_secs(1)).await;
        }
        Err(refused)
    }

    pub async fn remove_dispatcher(
        &self,
        table: &TableName,
    ) -> Result<DispatcherStatus, ManagerError> {
        let d = self
            .dispatchers
            .lock()
            .unwrap()
            .remove(&table_str(table))
            .ok_or_else(|| ManagerError::NoDispatcher(table_str(table)))?;
        let status = d.stop().await;
        let sink = self.sink.lock().unwrap().clone();
        if let Some(sink) = sink {
            sink.close_table(table, Duration::from_secs(1)).await;
        }
        Ok(status)
    }

    /// Min checkpoint and min resolved over the dispatchers; `None` with none.
    pub fn watermark(&self) -> Option<Watermark> {
        let ds = self.dispatchers.lock().unwrap();
        let st: Vec<DispatcherStatus> = ds.values().map(|d| d.status()).collect();
        Some(Watermark {
            checkpoint_ts: st.iter().map(|s| s.checkpoint_ts).min()?,
            resolved_ts: st.iter().map(|s| s.resolved_ts).min()?,
        })
    }

    pub fn status(&self) -> Vec<DispatcherStatus> {
        self.dispatchers
            .lock()
            .unwrap()
            .values()
            .map(|d| d.status())
            .collect()
    }

    /// Whether any dispatcher stopped on a sink failure.
    pub fn has_failed_dispatcher(&self) -> bool {
        self.status()
            .iter()
            .any(|s| matches!(s.state, DispatcherState::Failed(_)))
    }

    pub fn close_state(&self) -> CloseState {
        *self.close.lock().unwrap()
    }

    /// Asynchronous close: the first call starts stopping the dispatchers and
    /// tearing down the producer and answers `false`; later calls answer
    /// `true` once that finished.
    pub fn try_close(self: &Arc<Self>) -> bool {
        let mut st = self.close.lock().unwrap();
        match *st {
            CloseState::Closed => true,
            CloseState::Closing => false,
            CloseState::Open => {
                *st = CloseState::Closing;
                let m = self.clone();
                tokio::spawn(async move {
                    let ds: Vec<Dispatcher> = std::mem::take(&mut *m.dispatchers.lock().unwrap())
                        .into_values()
                        .collect();
                    for d in ds {
                        d.stop().await;
                    }
                    // Keep the first error for status, then stop re-reporting it.
                    m.collect_error();
                    let _ = m.stop_reporting.send(true);
                    // The stopped dispatchers dropped their handles: this is
                    // the last one, and closing it tears the producer down.
                    let sink = m.sink.lock().unwrap().take();
                    if let Some(sink) = sink.and_then(Arc::into_inner) {
                        sink.close(Duration::from_secs(1)).await;
                    }
                    *m.close.lock().unwrap() = CloseState::Closed;
                    tracing::info!(changefeed = %m.cfg.changefeed, node = %m.cfg.node, "dispatcher manager closed");
                });
                false
            }
        }
    }
}

//! The node's dispatcher managers behind the orchestrator: the data plane's
//! [`DispatcherManager`] (one Kafka sink per changefeed, one dispatcher per
//! table), created asynchronously on a bootstrap request.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::dispatcher_manager::{self as dm, DispatcherManager, ManagerConfig};
use crate::dispatcher_orchestrator::DispatcherBackend;
use crate::messages::{ChangefeedConfig, NodeId, RunningError};
use crate::proto::TableName;
use crate::sink::WriteMode;

struct Slot {
    manager: Option<Arc<DispatcherManager>>,
    start_ts: u64,
    /// Tables being added and the ts they start from: the watermark may not
    /// pass them until their dispatchers exist.
    adding: std::collections::BTreeMap<String, u64>,
    tables: BTreeSet<String>,
    failed: Option<RunningError>,
    closing: bool,
    inject: bool,
    errors: Option<tokio::sync::mpsc::Receiver<dm::RunningError>>,
}

pub struct RealBackend {
    node: NodeId,
    upstream: String,
    kafka_override: Option<String>,
    /// How every dispatcher manager's sink writes (fenced under `hardened`).
    write_mode: WriteMode,
    /// Bug switches of the mutant matrix, handed to every manager.
    bugs: crate::mutant::DataPlaneBugs,
    slots: Arc<Mutex<HashMap<String, Slot>>>,
}

/// The sink URI with its broker list replaced by `brokers` (a node's own
/// proxied Kafka listener), if given.
pub fn rewrite_brokers(uri: &str, brokers: Option<&str>) -> String {
    let Some(b) = brokers else {
        return uri.to_string();
    };
    let Some((scheme, rest)) = uri.split_once("://") else {
        return uri.to_string();
    };
    let cut = rest.find(['/', '?']).unwrap_or(rest.len());
    format!("{scheme}://{b}{}", &rest[cut..])
}

pub fn parse_table(t: &str) -> Option<TableName> {
    let (schema, table) = t.split_once('.')?;
    (!schema.is_empty() && !table.is_empty()).then(|| TableName {
        schema: schema.into(),
        table: table.into(),
    })
}

impl RealBackend {
    /// `fenced` is the profile's [`crate::profile::Profile::sink_writes_fenced`].
    pub fn new(node: &str, upstream: &str, kafka_override: Option<String>, fenced: bool) -> Self {
        RealBackend {
            node: node.into(),
            upstream: upstream.into(),
            kafka_override,
            write_mode: WriteMode::fenced_if(fenced),
            bugs: Default::default(),
            slots: Arc::default(),
        }
    }

    /// The data-plane bug switches of a `mutants` build.
    pub fn with_bugs(mut self, bugs: crate::mutant::DataPlaneBugs) -> Self {
        self.bugs = bugs;
        self
    }

    /// A handle that reads the managers while the orchestrator owns the backend.
    pub fn views_handle(&self) -> BackendViews {
        BackendViews(self.slots.clone())
    }
}

/// One dispatcher manager as introspection shows it.
#[derive(Debug, Clone)]
pub struct ManagerView {
    pub changefeed: String,
    pub tables: Vec<String>,
    pub watermark: Option<u64>,
    pub error: Option<String>,
}

/// Read access to a [`RealBackend`]'s managers, for introspection.
pub struct BackendViews(Arc<Mutex<HashMap<String, Slot>>>);

impl BackendViews {
    /// Each dispatcher manager's changefeed, tables, watermark and error.
    pub fn views(&self) -> Vec<ManagerView> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(cf, s)| {
                let wm = s
                    .manager
                    .as_ref()
                    .and_then(|m| m.watermark())
                    .map(|w| w.checkpoint_ts);
                let err = s.failed.as_ref().map(|e| e.message.clone()).or_else(|| {
                    s.manager
                        .as_ref()
                        .and_then(|m| m.first_error())
                        .map(|e| e.message)
                });
                ManagerView {
                    changefeed: cf.clone(),
                    tables: s.tables.iter().cloned().collect(),
                    watermark: wm,
                    error: err,
                }
            })
            .collect()
    }
}

impl RealBackend {
    fn add_tables(
        m: Arc<DispatcherManager>,
        tables: Vec<String>,
        start_ts: u64,
        slots: Arc<Mutex<HashMap<String, Slot>>>,
        cf: String,
        node: NodeId,
    ) {
        tokio::spawn(async move {
            for t in tables {
                let Some(name) = parse_table(&t) else {
                    continue;
                };
                let r = m.add_dispatcher(name, start_ts).await;
                if let Some(s) = slots.lock().unwrap().get_mut(&cf) {
                    s.adding.remove(&t);
                }
                if let Err(e) = r {
                    if matches!(e, dm::ManagerError::DuplicateDispatcher { .. }) {
                        continue;
                    }
                    tracing::error!(changefeed = %cf, table = %t, error = %e, "adding a dispatcher failed");
                    if let Some(s) = slots.lock().unwrap().get_mut(&cf) {
                        s.failed.get_or_insert(RunningError {
                            node: node.clone(),
                            code: "CDC:ErrDispatcherFailed".into(),
                            message: e.to_string(),
                        });
                    }
                }
            }
        });
    }
}

impl DispatcherBackend for RealBackend {
    fn create(
        &mut self,
        cf: &str,
        checkpoint_ts: u64,
        config: &ChangefeedConfig,
        tables: &[String],
        _now: u64,
    ) {
        let mut slots = self.slots.lock().unwrap();
        if let Some(s) = slots.get_mut(cf) {
            let new: Vec<String> = tables
                .iter()
                .filter(|t| !s.tables.contains(*t))
                .cloned()
                .collect();
            s.tables.extend(new.iter().cloned());
            s.adding
                .extend(new.iter().map(|t| (t.clone(), checkpoint_ts)));
            if let (Some(m), false) = (s.manager.clone(), new.is_empty()) {
                Self::add_tables(
                    m,
                    new,
                    checkpoint_ts,
                    self.slots.clone(),
                    cf.into(),
                    self.node.clone(),
                );
            }
            return;
        }
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        slots.insert(
            cf.into(),
            Slot {
                manager: None,
                start_ts: checkpoint_ts,
                adding: tables.iter().map(|t| (t.clone(), checkpoint_ts)).collect(),
                tables: tables.iter().cloned().collect(),
                failed: None,
                closing: false,
                inject: false,
                errors: Some(rx),
            },
        );
        let cfg = ManagerConfig {
            changefeed: cf.into(),
            node: self.node.clone(),
            sink_uri: rewrite_brokers(&config.sink_uri, self.kafka_override.as_deref()),
            upstream: self.upstream.clone(),
            error_report_interval: Duration::from_secs(5),
            dispatcher: crate::dispatcher::DispatcherConfig {
                bugs: self.bugs,
                ..Default::default()
            },
            write_mode: self.write_mode,
        };
        let (slots_arc, cf, node) = (self.slots.clone(), cf.to_string(), self.node.clone());
        tokio::spawn(async move {
            match DispatcherManager::new(cfg, tx).await {
                Ok(m) => {
                    let (tables, inject) = {
                        let mut slots = slots_arc.lock().unwrap();
                        let Some(s) = slots.get_mut(&cf) else { return };
                        s.manager = Some(m.clone());
                        (s.tables.iter().cloned().collect::<Vec<_>>(), s.inject)
                    };
                    if inject {
                        m.inject_sink_error();
                    }
                    Self::add_tables(m, tables, checkpoint_ts, slots_arc, cf, node);
                }
                Err(e) => {
                    tracing::error!(changefeed = %cf, error = %e, "creating the dispatcher manager failed");
                    let code = match &e {
                        dm::ManagerError::Sink(s) => s.code().to_string(),
                        dm::ManagerError::Uri(_) => "CDC:ErrSinkURIInvalid".into(),
                        _ => "CDC:ErrDispatcherManagerFailed".into(),
                    };
                    if let Some(s) = slots_arc.lock().unwrap().get_mut(&cf) {
                        s.failed = Some(RunningError {
                            node,
                            code,
                            message: e.to_string(),
                        });
                    }
                }
            }
        });
    }

    fn exists(&self, cf: &str) -> bool {
        self.slots.lock().unwrap().contains_key(cf)
    }

    fn idle(&self, cf: &str) -> bool {
        self.slots
            .lock()
            .unwrap()
            .get(cf)
            .is_some_and(|s| s.tables.is_empty())
    }

    fn watermark(&mut self, cf: &str, _now: u64) -> Option<u64> {
        let mut slots = self.slots.lock().unwrap();
        let s = slots.get_mut(cf)?;
        if let Some(rx) = &mut s.errors {
            while rx.try_recv().is_ok() {}
        }
        let wm = s
            .manager
            .as_ref()
            .and_then(|m| m.watermark())
            .map(|w| w.checkpoint_ts)
            .unwrap_or(s.start_ts)
            .max(s.start_ts);
        Some(s.adding.values().fold(wm, |a, b| a.min(*b)))
    }

    fn error(&self, cf: &str) -> Option<RunningError> {
        let slots = self.slots.lock().unwrap();
        let s = slots.get(cf)?;
        s.failed.clone().or_else(|| {
            s.manager
                .as_ref()
                .and_then(|m| m.first_error())
                .map(|e| RunningError {
                    node: self.node.clone(),
                    code: e.code,
                    message: e.message,
                })
        })
    }

    fn closing(&self, cf: &str) -> bool {
        self.slots
            .lock()
            .unwrap()
            .get(cf)
            .is_some_and(|s| s.closing)
    }

    fn try_close(&mut self, cf: &str) -> bool {
        let mut slots = self.slots.lock().unwrap();
        let Some(s) = slots.get_mut(cf) else {
            return true;
        };
        s.closing = true;
        let done = match &s.manager {
            Some(m) => m.try_close(),
            // Still being created (or failed to be): nothing holds a producer once it fails.
            None => s.failed.is_some(),
        };
        if done {
            slots.remove(cf);
        }
        done
    }

    fn tables(&self, cf: &str) -> Vec<String> {
        self.slots
            .lock()
            .unwrap()
            .get(cf)
            .map(|s| s.tables.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn inject_sink_error(&mut self, cf: &str) -> bool {
        let mut slots = self.slots.lock().unwrap();
        match slots.get_mut(cf) {
            Some(s) => {
                s.inject = true;
                if let Some(m) = &s.manager {
                    m.inject_sink_error();
                }
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn broker_rewrite_keeps_topic_and_parameters() {
        let u = "kafka://kafka:9092,k2:9093/cdc?protocol=canal-json&partition-num=3";
        assert_eq!(
            super::rewrite_brokers(u, Some("toxiproxy:19101")),
            "kafka://toxiproxy:19101/cdc?protocol=canal-json&partition-num=3"
        );
        assert_eq!(super::rewrite_brokers(u, None), u);
        assert_eq!(super::parse_table("db.t").unwrap().table, "t");
        assert!(super::parse_table("nodot").is_none() && super::parse_table(".t").is_none());
    }
}

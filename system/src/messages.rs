//! Control messages between coordinator, maintainer managers, maintainers and
//! dispatcher orchestrators (TiCDC's `heartbeatpb`, docs/control-plane.md
//! §2.2). Every message names its changefeed and, where TiCDC has one, the
//! maintainer epoch; whether receivers check epochs is a [`crate::profile`]
//! question.

use serde::{Deserialize, Serialize};

/// A node's identity: fresh at every process start (a restart is a new node).
pub type NodeId = String;
pub type ChangefeedId = String;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ComponentState {
    Working,
    Stopped,
}

/// An error as it travels up from a dispatcher manager.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningError {
    pub node: NodeId,
    pub code: String,
    pub message: String,
}

/// What a changefeed replicates and where to; persisted with it and carried
/// by the add and bootstrap requests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangefeedConfig {
    pub sink_uri: String,
    /// Tables as `schema.table`; each is one dispatcher (span). Shared:
    /// every add, bootstrap request and persisted copy of one changefeed
    /// points at one list, so a copy costs the same at 4 tables and at
    /// 1,000,000 (`make bench-scale`).
    pub tables: std::sync::Arc<Vec<String>>,
}

fn config_without_tables<S: serde::Serializer>(
    c: &ChangefeedConfig,
    s: S,
) -> Result<S::Ok, S::Error> {
    ChangefeedConfig {
        sink_uri: c.sink_uri.clone(),
        tables: Default::default(),
    }
    .serialize(s)
}

/// A maintainer's report to the coordinator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MaintainerStatus {
    pub changefeed: ChangefeedId,
    pub state: ComponentState,
    pub bootstrap_done: bool,
    pub checkpoint_ts: u64,
    pub epoch: u64,
    /// For introspection only: the coordinator cannot see this in TiCDC and
    /// must not use it.
    pub removal_only: bool,
    pub errors: Vec<RunningError>,
}

/// A control message. [`MessageKind`] names its type as TiCDC does (the
/// names failpoints and fault filters use).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, strum::EnumDiscriminants)]
#[strum_discriminants(
    name(MessageKind),
    derive(
        Hash,
        PartialOrd,
        Ord,
        strum::EnumString,
        strum::IntoStaticStr,
        strum::Display,
        strum::VariantNames,
        strum::EnumIter,
        strum::EnumCount
    )
)]
pub enum Message {
    // coordinator -> maintainer manager
    #[strum_discriminants(strum(serialize = "AddMaintainerRequest"))]
    AddMaintainer {
        changefeed: ChangefeedId,
        epoch: u64,
        checkpoint_ts: u64,
        config: ChangefeedConfig,
    },
    #[strum_discriminants(strum(serialize = "RemoveMaintainerRequest"))]
    RemoveMaintainer {
        changefeed: ChangefeedId,
        epoch: u64,
        cascade: bool,
    },
    #[strum_discriminants(strum(serialize = "CoordinatorBootstrapRequest"))]
    CoordinatorBootstrapRequest { version: u64 },
    // maintainer manager -> coordinator
    #[strum_discriminants(strum(serialize = "MaintainerHeartbeat"))]
    MaintainerStatuses { statuses: Vec<MaintainerStatus> },
    #[strum_discriminants(strum(serialize = "CoordinatorBootstrapResponse"))]
    CoordinatorBootstrapResponse {
        version: u64,
        statuses: Vec<MaintainerStatus>,
    },
    // maintainer -> dispatcher orchestrator
    #[strum_discriminants(strum(serialize = "MaintainerBootstrapRequest"))]
    BootstrapRequest {
        changefeed: ChangefeedId,
        epoch: u64,
        checkpoint_ts: u64,
        /// On the wire without its table list: a node needs the sink, and
        /// its share of the tables is `tables` (with the list, a bootstrap
        /// of T tables on N nodes sent T x N names; `make bench-scale`).
        #[serde(serialize_with = "config_without_tables")]
        config: ChangefeedConfig,
        /// The tables this node hosts (all of them is the maintainer's choice).
        tables: Vec<String>,
    },
    #[strum_discriminants(strum(serialize = "MaintainerCloseRequest"))]
    CloseRequest {
        changefeed: ChangefeedId,
        epoch: u64,
        removed: bool,
    },
    // dispatcher orchestrator / manager -> maintainer (manager topic)
    #[strum_discriminants(strum(serialize = "MaintainerBootstrapResponse"))]
    BootstrapResponse {
        changefeed: ChangefeedId,
        epoch: u64,
        checkpoint_ts: u64,
        /// The tables the node's dispatcher manager hosts now.
        tables: Vec<String>,
    },
    #[strum_discriminants(strum(serialize = "MaintainerCloseResponse"))]
    CloseResponse {
        changefeed: ChangefeedId,
        epoch: u64,
        success: bool,
    },
    #[strum_discriminants(strum(serialize = "HeartBeatRequest"))]
    HeartBeat {
        changefeed: ChangefeedId,
        epoch: u64,
        watermark: u64,
        error: Option<RunningError>,
    },
}

impl Message {
    /// The message type's name, as failpoints and fault filters use it
    /// (TiCDC's names where they exist).
    pub fn kind(&self) -> MessageKind {
        self.into()
    }

    /// How many table names the message carries when serialized.
    pub fn table_names(&self) -> usize {
        match self {
            Message::AddMaintainer { config, .. } => config.tables.len(),
            Message::BootstrapRequest { tables, .. } => tables.len(),
            Message::BootstrapResponse { tables, .. } => tables.len(),
            _ => 0,
        }
    }

    pub fn changefeed(&self) -> Option<&str> {
        match self {
            Message::AddMaintainer { changefeed, .. }
            | Message::RemoveMaintainer { changefeed, .. }
            | Message::BootstrapRequest { changefeed, .. }
            | Message::CloseRequest { changefeed, .. }
            | Message::BootstrapResponse { changefeed, .. }
            | Message::CloseResponse { changefeed, .. }
            | Message::HeartBeat { changefeed, .. } => Some(changefeed),
            _ => None,
        }
    }

    /// TiCDC's topic (docs/control-plane.md §2.1): which component of the
    /// receiving node handles the message.
    pub fn topic(&self) -> Topic {
        match self {
            Message::MaintainerStatuses { .. } | Message::CoordinatorBootstrapResponse { .. } => {
                Topic::Coordinator
            }
            Message::BootstrapRequest { .. } | Message::CloseRequest { .. } => {
                Topic::DispatcherManagerManager
            }
            Message::CloseResponse { .. } => Topic::Maintainer,
            _ => Topic::MaintainerManager,
        }
    }

    /// Whether this is a cascade `RemoveMaintainerRequest`.
    pub fn is_cascade_remove(&self) -> bool {
        matches!(self, Message::RemoveMaintainer { cascade: true, .. })
    }
}

/// The receiving component of a message (TiCDC's messaging topics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Topic {
    /// The coordinator: maintainer statuses, coordinator-bootstrap answers.
    Coordinator,
    /// The maintainer manager: add/remove, coordinator bootstrap, and the
    /// dispatcher side's bootstrap answers and heartbeats.
    MaintainerManager,
    /// The maintainer's close responses.
    Maintainer,
    /// The dispatcher orchestrator: bootstrap and close requests.
    DispatcherManagerManager,
}

/// A message with its route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    pub from: NodeId,
    pub to: NodeId,
    pub msg: Message,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bootstrap request carries the node's share of the tables, not the
    /// changefeed's whole list; an add request carries the list (its
    /// maintainer schedules it).
    #[test]
    fn a_bootstrap_request_carries_only_its_share_of_the_tables() {
        let config = ChangefeedConfig {
            sink_uri: "kafka://k:9092/t".into(),
            tables: std::sync::Arc::new((0..1000).map(|i| format!("db.t{i}")).collect()),
        };
        let req = Message::BootstrapRequest {
            changefeed: "cf1".into(),
            epoch: 2,
            checkpoint_ts: 7,
            config: config.clone(),
            tables: vec!["db.t5".into()],
        };
        let wire = serde_json::to_string(&req).unwrap();
        assert!(wire.contains("db.t5") && !wire.contains("db.t6"), "{wire}");
        let Message::BootstrapRequest {
            config: got,
            tables,
            ..
        } = serde_json::from_str(&wire).unwrap()
        else {
            panic!("{wire}")
        };
        assert_eq!(got.sink_uri, config.sink_uri);
        assert!(got.tables.is_empty() && tables == ["db.t5"]);
        assert_eq!(req.table_names(), 1);
        // Negative: the add request keeps the whole list.
        let add = Message::AddMaintainer {
            changefeed: "cf1".into(),
            epoch: 2,
            checkpoint_ts: 7,
            config,
        };
        let wire = serde_json::to_string(&add).unwrap();
        assert!(wire.contains("db.t999"));
        assert_eq!(add.table_names(), 1000);
    }
}

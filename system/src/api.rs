//! The wire types of every JSON body a node serves or accepts (routes in
//! [`crate::node::api`]). The server builds them and the harness reads them
//! back with the same types, so a renamed field breaks the harness's build
//! instead of reading as a default.

use serde::{Deserialize, Serialize};

use crate::coordinator::operator::Operator;
use crate::maintainer::Maintainer;
use crate::messages::NodeId;
use crate::profile::Profile;

pub use crate::coordinator::FeedState;
pub use crate::failpoint::FailpointView;

/// An error answer: `{"error_code", "error_msg"}` with a 4xx/5xx status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiError {
    pub error_code: String,
    pub error_msg: String,
}

/// The longest changefeed id accepted (TiCDC's limit).
pub const MAX_CHANGEFEED_ID_LEN: usize = 128;

/// `POST /api/v2/changefeeds`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateChangefeed {
    pub changefeed_id: String,
    pub sink_uri: String,
    /// `schema.table` names that exist upstream.
    pub tables: Vec<String>,
    /// Where replication starts; the upstream's current ts when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_ts: Option<u64>,
}

/// The answer to a create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Created {
    pub id: String,
}

/// `POST /api/v2/changefeeds/{id}/move`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoveRequest {
    pub target_node: NodeId,
}

/// The answer to a move.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moving {
    pub moving_to: NodeId,
}

/// Where the coordinator believes a changefeed's maintainer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::Display)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum SchedulingState {
    Absent,
    Scheduling,
    Replicating,
    Stopped,
}

/// A changefeed's error as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedError {
    pub code: String,
    pub message: String,
}

/// One changefeed (`GET /api/v2/changefeeds/{id}`, and the list's items).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangefeedView {
    pub id: String,
    pub state: FeedState,
    pub checkpoint_tso: u64,
    pub error: Option<FeedError>,
    pub sink_uri: String,
    pub tables: std::sync::Arc<Vec<String>>,
    pub epoch: u64,
    /// Where the coordinator believes the maintainer is.
    pub maintainer_node: Option<NodeId>,
    pub scheduling: SchedulingState,
}

impl From<&crate::coordinator::Changefeed> for ChangefeedView {
    fn from(c: &crate::coordinator::Changefeed) -> Self {
        use crate::coordinator::Scheduling;
        let (scheduling, node) = match &c.scheduling {
            Scheduling::Absent { .. } => (SchedulingState::Absent, None),
            Scheduling::Scheduling { node } => (SchedulingState::Scheduling, Some(node.clone())),
            Scheduling::Replicating { node } => (SchedulingState::Replicating, Some(node.clone())),
            Scheduling::Stopped => (SchedulingState::Stopped, None),
        };
        ChangefeedView {
            id: c.info.id.clone(),
            state: c.info.state,
            checkpoint_tso: c.info.checkpoint_ts,
            error: c.info.error.as_ref().map(|e| FeedError {
                code: e.code.clone(),
                message: e.message.clone(),
            }),
            sink_uri: c.info.config.sink_uri.clone(),
            tables: c.info.config.tables.clone(),
            epoch: c.info.epoch,
            maintainer_node: node,
            scheduling,
        }
    }
}

/// `GET /api/v2/changefeeds`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangefeedList {
    pub total: usize,
    pub items: Vec<ChangefeedView>,
}

/// One alive node (`GET /api/v2/captures` items).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureView {
    pub id: NodeId,
    pub address: String,
    pub http_address: String,
    pub is_coordinator: bool,
}

/// What a node publishes about itself (its capture key in etcd, and
/// `/debug/node`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureInfo {
    pub id: NodeId,
    /// The message center's address as peers dial it.
    pub advertise_addr: String,
    /// The HTTP API's address as peers and the harness dial it.
    pub http_addr: String,
}

/// `GET /api/v2/captures`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureList {
    pub total: usize,
    pub items: Vec<CaptureView>,
}

/// `GET /api/v2/health`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    pub status: String,
    pub id: NodeId,
    pub profile: Profile,
}

/// `POST /api/v2/owner/resign`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resigned {
    pub resigned: bool,
}

/// An empty success body (`{}`): pause, resume, remove.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Done {}

/// `GET /debug/failpoints`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailpointList {
    pub items: Vec<FailpointView>,
}

/// `POST /debug/failpoints/{name}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailpointSet {
    pub name: String,
    pub actions: String,
}

/// `DELETE /debug/failpoints/{name}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailpointRemoved {
    pub removed: String,
}

/// `POST /debug/failpoints/sink-async-send-error/{changefeed}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkErrorInjected {
    pub failpoint: String,
    pub changefeed: String,
    pub hit: bool,
}

/// A dispatcher manager as its node shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DispatcherManagerView {
    pub changefeed: String,
    pub owner: Option<NodeId>,
    pub epoch: Option<u64>,
    pub tables: Vec<String>,
    pub watermark: Option<u64>,
    pub error: Option<String>,
}

/// The coordinator's state, on the coordinator's node only.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CoordinatorView {
    pub node: NodeId,
    pub version: u64,
    pub bootstrapped: bool,
    pub changefeeds: Vec<ChangefeedView>,
    pub operators: Vec<Operator>,
}

/// `GET /debug/node`: what the node shows about itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeSnapshot {
    pub id: NodeId,
    pub profile: Profile,
    pub started_ms: u64,
    pub now_ms: u64,
    /// The coordinator this node's maintainer manager follows: (id, term).
    pub coordinator: Option<(NodeId, u64)>,
    pub maintainers: Vec<Maintainer>,
    pub dispatcher_managers: Vec<DispatcherManagerView>,
    /// Present on the coordinator only.
    pub coordinator_view: Option<CoordinatorView>,
    pub captures: Vec<CaptureInfo>,
}

impl NodeSnapshot {
    /// Whether this node is the bootstrapped coordinator.
    pub fn is_coordinator(&self) -> bool {
        self.coordinator_view
            .as_ref()
            .is_some_and(|c| c.bootstrapped)
    }

    /// Whether this node hosts dispatchers of `cf`.
    pub fn hosts_dispatchers_of(&self, cf: &str) -> bool {
        self.dispatcher_managers
            .iter()
            .any(|m| m.changefeed == cf && !m.tables.is_empty())
    }

    /// `changefeed: error` of every dispatcher manager in error.
    pub fn errors(&self) -> Vec<String> {
        self.dispatcher_managers
            .iter()
            .filter_map(|m| m.error.as_ref().map(|e| format!("{}: {e}", m.changefeed)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wire names the harness reads; renaming a field on the server side
    /// fails this test and, the types being shared, the harness's build.
    #[test]
    fn the_wire_names_are_stable() {
        let v = ChangefeedView {
            id: "cf1".into(),
            state: FeedState::Normal,
            checkpoint_tso: 7,
            error: None,
            sink_uri: "kafka://k:9092/t".into(),
            tables: vec!["shop.t0".into()].into(),
            epoch: 2,
            maintainer_node: Some("n1".into()),
            scheduling: SchedulingState::Replicating,
        };
        let j = serde_json::to_value(&v).unwrap();
        assert_eq!(j["checkpoint_tso"], 7);
        assert_eq!(j["state"], "normal");
        assert_eq!(j["scheduling"], "replicating");
        assert_eq!(serde_json::from_value::<ChangefeedView>(j).unwrap(), v);
        let missing = serde_json::json!({"id": "cf1", "state": "normal"});
        assert!(
            serde_json::from_value::<ChangefeedView>(missing).is_err(),
            "a missing field is an error, not a zero"
        );
        assert!(
            serde_json::from_value::<ChangefeedView>(serde_json::json!({
                "id": "cf1", "state": "finished", "checkpoint_tso": 1, "error": null,
                "sink_uri": "", "tables": [], "epoch": 1, "maintainer_node": null,
                "scheduling": "absent"
            }))
            .is_err(),
            "a state the system does not have is refused"
        );
    }
}

//! Failpoints (the `fail` crate), named after TiCDC's where one exists
//! (reference §5), switchable at runtime over each node's HTTP API with
//! TiCDC's term syntax (`10%return`, `1*return(3000)`, `off`).
//!
//! Delays are written `return(<ms>)`: a `sleep` action would block a runtime
//! thread of the async node. Every hit is counted, so a scenario can show
//! that its fault bit.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

pub const DROP_REMOTE_MESSAGE: &str = "pkg/messaging/InjectDropRemoteMessage";
pub const KAFKA_ASYNC_SEND_ERROR: &str = "pkg/sink/kafka/KafkaSinkAsyncSendError";
pub const NEW_CHANGEFEED_RETRY_ERROR: &str = "maintainer/NewChangefeedRetryError";
pub const BLOCK_BEFORE_STOP: &str = "coordinator/BlockBeforeStopChangefeed";
pub const COORDINATOR_RUN_ERROR: &str = "coordinator/coordinator-run-with-error";
pub const CAMPAIGN_ERROR: &str = "server/campaign-compacted-error";
pub const RESIGN_FAILED: &str = "server/resign-failed";
pub const DONT_UPDATE_CHECKPOINT: &str =
    "coordinator/changefeed/CoordinatorDontUpdateChangefeedCheckpoint";
pub const DELAY_CASCADE_REMOVE: &str = "cdc-chaos/DelayCascadeRemove";
pub const PLACE_RETRY_ON_PREVIOUS: &str = "cdc-chaos/PlaceRetryOnPreviousNode";
pub const DELAY_CLOSE_REQUEST: &str = "cdc-chaos/DelayCloseRequest";
pub const HOLD_CLOSE_ACK: &str = "cdc-chaos/HoldCloseAck";
pub const DELAY_MESSAGE_TYPE: &str = "cdc-chaos/DelayMessageType";
pub const DUPLICATE_MESSAGE_TYPE: &str = "cdc-chaos/DuplicateMessageType";

/// Every failpoint this system evaluates, with what it does.
pub const ALL: &[(&str, &str)] = &[
    (DROP_REMOTE_MESSAGE, "drop each remote control message sent (e.g. `10%return`)"),
    (KAFKA_ASYNC_SEND_ERROR, "fail this node's Kafka sinks as an async send error would"),
    (NEW_CHANGEFEED_RETRY_ERROR, "a maintainer created here reports a retryable error"),
    (BLOCK_BEFORE_STOP, "the coordinator does not stop a changefeed in error while active"),
    (COORDINATOR_RUN_ERROR, "the coordinator fails and gives up its office"),
    (CAMPAIGN_ERROR, "an election campaign fails (and is retried)"),
    (RESIGN_FAILED, "resigning the coordinator fails"),
    (DONT_UPDATE_CHECKPOINT, "the coordinator ignores checkpoint progress"),
    (DELAY_CASCADE_REMOVE, "a cascade RemoveMaintainerRequest received here is handled, and a copy again after `return(<ms>)`"),
    (PLACE_RETRY_ON_PREVIOUS, "the coordinator retries a changefeed in error on its previous maintainer's node"),
    (DELAY_CLOSE_REQUEST, "this node's outgoing MaintainerCloseRequests are delayed by `return(<ms>)`"),
    (HOLD_CLOSE_ACK, "this node's dispatcher managers do not answer close requests"),
    (DELAY_MESSAGE_TYPE, "delay this node's outgoing messages of one type: `return(<MessageType>:<ms>)`"),
    (DUPLICATE_MESSAGE_TYPE, "send this node's outgoing messages of one type twice: `return(<MessageType>)`"),
];

fn hits_map() -> &'static Mutex<BTreeMap<String, u64>> {
    static HITS: std::sync::OnceLock<Mutex<BTreeMap<String, u64>>> = std::sync::OnceLock::new();
    HITS.get_or_init(Default::default)
}

fn record(name: &str) {
    *hits_map().lock().unwrap().entry(name.into()).or_default() += 1;
    tracing::info!(failpoint = name, "failpoint hit");
}

/// Whether the failpoint fires now (its `return` action triggered).
pub fn hit(name: &str) -> bool {
    let fired = fail::eval(name, |_| ()).is_some();
    if fired {
        record(name);
    }
    fired
}

/// The delay of a `return(<ms>)` failpoint that fires now.
pub fn hit_ms(name: &str) -> Option<Duration> {
    let d = fail::eval(name, |arg| {
        arg.and_then(|a| a.trim().parse::<u64>().ok()).unwrap_or(0)
    })?;
    record(name);
    Some(Duration::from_millis(d))
}

/// The delay a `return(<MessageType>:<ms>)` failpoint asks for `kind` now.
pub fn hit_kind_ms(name: &str, kind: &str) -> Option<Duration> {
    // Peek first: evaluating would spend a count on other message types.
    let cfgd = fail::list().into_iter().find(|(n, _)| n == name)?.1;
    if !cfgd.contains(&format!("({kind}:")) {
        return None;
    }
    let d = fail::eval(name, |arg| {
        arg.and_then(|a| {
            a.split_once(':')
                .and_then(|(_, ms)| ms.trim().parse::<u64>().ok())
        })
        .unwrap_or(0)
    })?;
    record(name);
    Some(Duration::from_millis(d))
}

/// Whether a `return(<MessageType>)` failpoint fires now for `kind`.
pub fn hit_kind(name: &str, kind: &str) -> bool {
    let Some((_, cfgd)) = fail::list().into_iter().find(|(n, _)| n == name) else {
        return false;
    };
    if !cfgd.contains(&format!("({kind})")) {
        return false;
    }
    let fired = fail::eval(name, |_| ()).is_some();
    if fired {
        record(name);
    }
    fired
}

/// Configures a failpoint; unknown names are refused with the known ones.
pub fn configure(name: &str, actions: &str) -> Result<(), String> {
    if !ALL.iter().any(|(n, _)| *n == name) {
        return Err(format!(
            "unknown failpoint {name:?}; known: {}",
            ALL.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
        ));
    }
    fail::cfg(name, actions).map_err(|e| format!("failpoint {name}: {e}"))
}

pub fn remove(name: &str) {
    fail::remove(name);
}

/// (name, configured actions, hits) of every known failpoint.
pub fn list() -> Vec<(String, String, u64)> {
    let cfgd: BTreeMap<String, String> = fail::list().into_iter().collect();
    let hits = hits_map().lock().unwrap();
    ALL.iter()
        .map(|(n, _)| {
            (
                n.to_string(),
                cfgd.get(*n).cloned().unwrap_or_default(),
                hits.get(*n).copied().unwrap_or(0),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn configure_fires_counts_and_refuses_unknown_names() {
        // A name no other test evaluates (the registry is process-wide).
        let name = super::RESIGN_FAILED;
        super::configure(name, "2*return(150)").unwrap();
        assert_eq!(
            super::hit_ms(name),
            Some(std::time::Duration::from_millis(150))
        );
        assert!(super::hit(name));
        assert!(!super::hit(name), "a count of 2 fires twice");
        assert!(super::list().iter().any(|(n, _, h)| n == name && *h == 2));
        super::remove(name);
        assert!(super::configure("no/such", "return")
            .unwrap_err()
            .contains("unknown failpoint"));
        assert!(super::configure(name, "bogus(").is_err());
    }
}

#[cfg(test)]
mod kind_tests {
    #[test]
    fn message_type_failpoints_match_only_their_type() {
        let name = super::DELAY_MESSAGE_TYPE;
        super::configure(name, "1*return(RemoveMaintainerRequest:2500)").unwrap();
        assert_eq!(
            super::hit_kind_ms(name, "AddMaintainerRequest"),
            None,
            "another type spends nothing"
        );
        assert_eq!(
            super::hit_kind_ms(name, "RemoveMaintainerRequest"),
            Some(std::time::Duration::from_millis(2500))
        );
        assert_eq!(
            super::hit_kind_ms(name, "RemoveMaintainerRequest"),
            None,
            "count 1"
        );
        super::remove(name);
        let dup = super::DUPLICATE_MESSAGE_TYPE;
        super::configure(dup, "return(MaintainerCloseRequest)").unwrap();
        assert!(super::hit_kind(dup, "MaintainerCloseRequest"));
        assert!(!super::hit_kind(dup, "HeartBeatRequest"));
        super::remove(dup);
    }
}

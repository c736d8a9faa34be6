//! Operations: what a user does through a node's API while faults happen
//! (pause, resume, move, create and remove a changefeed). They are not
//! faults: nothing heals them and no effect must show. A request goes to the
//! coordinator's node first, then to the others (every node forwards
//! changefeed requests to the coordinator). A refusal (4xx) is the answer at
//! once; no answer or a 5xx (no coordinator, an operator in flight, a
//! removal under way, a term that ended before the change was persisted) is
//! tried again every 500 ms for at most [`Request::timeout`], as a user's
//! script would. A move to the node where the maintainer already runs has
//! nothing to do: it is done. Every answer is recorded in `run.json`
//! (`Run::operations`), where the *operations* checker judges it.

use std::time::{Duration, Instant};

use anyhow::Result;
use cdc_system::api::{ApiError, CreateChangefeed, MoveRequest};

use super::world::World;
use crate::run_model::{OperationAnswer, OperationKind};
use crate::slot::Slot;

/// How long an operation is retried while the cluster cannot take it.
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(30);

/// How long one request may take: a node answers an operation once its
/// change is persisted, or refuses it after the system's own bound.
pub const ANSWER_TIMEOUT: Duration =
    Duration::from_millis(cdc_system::node::server::PERSIST_TIMEOUT_MS + 2_000);

/// How long a create is retried: a removal of the same changefeed may still
/// be waiting for a slow node's close (TTL plus removal delay and more).
pub const CREATE_TIMEOUT: Duration = Duration::from_secs(90);

/// One request of a user.
#[derive(Debug, Clone)]
pub enum Request {
    Pause(String),
    Resume(String),
    /// Move the changefeed's maintainer to this node ID.
    Move(String, String),
    Create(CreateChangefeed),
    Remove(String),
}

impl Request {
    /// What the operation is, on which changefeed, and a move's destination.
    pub fn describe(&self) -> (OperationKind, String, Option<String>) {
        match self {
            Request::Pause(cf) => (OperationKind::Pause, cf.clone(), None),
            Request::Resume(cf) => (OperationKind::Resume, cf.clone(), None),
            Request::Move(cf, to) => (OperationKind::Move, cf.clone(), Some(to.clone())),
            Request::Create(body) => (OperationKind::Create, body.changefeed_id.clone(), None),
            Request::Remove(cf) => (OperationKind::Remove, cf.clone(), None),
        }
    }

    fn path(&self) -> String {
        match self {
            Request::Pause(cf) => format!("/api/v2/changefeeds/{cf}/pause"),
            Request::Resume(cf) => format!("/api/v2/changefeeds/{cf}/resume"),
            Request::Move(cf, _) => format!("/api/v2/changefeeds/{cf}/move"),
            Request::Create(_) => "/api/v2/changefeeds".to_string(),
            Request::Remove(cf) => format!("/api/v2/changefeeds/{cf}"),
        }
    }

    fn timeout(&self) -> Duration {
        match self {
            Request::Create(_) => CREATE_TIMEOUT,
            _ => OPERATION_TIMEOUT,
        }
    }

    fn build(&self, http: &reqwest::Client, url: String) -> reqwest::RequestBuilder {
        let r = match self {
            Request::Move(_, to) => http.post(url).json(&MoveRequest {
                target_node: to.clone(),
            }),
            Request::Create(body) => http.post(url).json(body),
            Request::Remove(_) => http.delete(url),
            Request::Pause(_) | Request::Resume(_) => http.post(url),
        };
        r.timeout(ANSWER_TIMEOUT)
    }
}

/// How a request was answered.
#[derive(Debug)]
pub struct Taken {
    pub tries: u32,
    pub answer: OperationAnswer,
}

/// Sends `req` until a node takes or refuses it, or the timeout passes.
pub async fn perform(w: &World, req: &Request) -> Result<Taken> {
    let started = Instant::now();
    let mut tries = 0;
    // An earlier try that got no answer may have taken the operation: a
    // refusal after it ("not found" for a remove) is then no refusal of it.
    let mut unanswered_before = false;
    loop {
        let mut last = String::from("no node answered");
        let mut declined = false;
        for slot in order(w).await {
            tries += 1;
            let Ok(node) = w.cluster.node(slot) else {
                continue;
            };
            let url = format!("{}{}", node.api, req.path());
            match req.build(w.probe.http(), url).send().await {
                Err(e) => {
                    unanswered_before = true;
                    last = format!("node {slot}: {e}");
                }
                Ok(resp) if resp.status().is_success() => {
                    return Ok(Taken {
                        tries,
                        answer: OperationAnswer::Acknowledged,
                    })
                }
                Ok(resp) => {
                    let status = resp.status();
                    let why = match resp.json::<ApiError>().await {
                        Ok(e) => format!("{}: {}", e.error_code, e.error_msg),
                        Err(e) => format!("(no error body: {e})"),
                    };
                    if matches!(req, Request::Move(..)) && why.contains("already runs on") {
                        return Ok(Taken {
                            tries,
                            answer: OperationAnswer::NoOp { message: why },
                        });
                    }
                    if status.is_client_error() && unanswered_before {
                        return Ok(Taken {
                            tries,
                            answer: OperationAnswer::NoOp {
                                message: format!(
                                    "node {slot}: {status} {why}, after a try that got no answer (it may have taken the operation)"
                                ),
                            },
                        });
                    }
                    if status.is_client_error() {
                        return Ok(Taken {
                            tries,
                            answer: OperationAnswer::Refused {
                                status: status.as_u16(),
                                message: format!("node {slot}: {why}"),
                            },
                        });
                    }
                    declined = status == reqwest::StatusCode::SERVICE_UNAVAILABLE
                        && why.contains("retry later");
                    last = format!("node {slot}: {status} {why}");
                }
            }
        }
        if started.elapsed() >= req.timeout() {
            let message = format!(
                "{} {} not taken within {} s ({tries} tries); last: {last}",
                req.describe().0,
                req.describe().1,
                req.timeout().as_secs()
            );
            let answer = if declined {
                OperationAnswer::Declined { message }
            } else {
                OperationAnswer::Unanswered { message }
            };
            return Ok(Taken { tries, answer });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The coordinator's node first, then the other observed nodes in slot order.
async fn order(w: &World) -> Vec<Slot> {
    let v = w.view().await;
    let first = v.coordinator_slot();
    first
        .into_iter()
        .chain(v.nodes.iter().map(|n| n.slot).filter(|s| Some(*s) != first))
        .collect()
}

//! The node's HTTP API, in the shape of TiCDC's OpenAPI v2 where it
//! overlaps, plus introspection and metrics:
//!
//! | route | what |
//! |---|---|
//! | `POST /api/v2/changefeeds` | create `{changefeed_id, sink_uri, tables, start_ts?}` |
//! | `GET /api/v2/changefeeds`, `GET /api/v2/changefeeds/{id}` | `state`, `checkpoint_tso`, `error` |
//! | `POST /api/v2/changefeeds/{id}/pause`, `.../resume` | |
//! | `DELETE /api/v2/changefeeds/{id}` | remove (stop, then forget) |
//! | `POST /api/v2/changefeeds/{id}/move` | move the maintainer `{target_node}` |
//! | `GET /api/v2/captures` | alive nodes, which is coordinator |
//! | `GET /api/v2/health` | liveness |
//! | `POST /api/v2/owner/resign` | the coordinator resigns |
//! | `GET /debug/node` | maintainers, dispatcher managers, coordinator view |
//! | `POST /debug/failpoints/sink-async-send-error/{changefeed}` | fail this node's sink of a changefeed |
//! | `GET /debug/failpoints`, `POST`/`DELETE /debug/failpoints/{name}` | failpoints: list with hits, set (body: actions), remove |
//! | `GET /metrics` | Prometheus text |
//!
//! Changefeed requests to a node that is not the coordinator are forwarded
//! to the coordinator. Errors are `{"error_code", "error_msg"}` with a 4xx/5xx.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use super::server::{Command, NodeHandle};
use crate::coordinator::{Changefeed, Scheduling};
use crate::messages::ChangefeedConfig;
use crate::sink::SinkUri;

#[derive(Clone)]
struct Api {
    node: NodeHandle,
    http: reqwest::Client,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ApiError {
    pub error_code: String,
    pub error_msg: String,
}

fn err(status: StatusCode, code: &str, msg: impl Into<String>) -> Response {
    (
        status,
        Json(ApiError {
            error_code: code.into(),
            error_msg: msg.into(),
        }),
    )
        .into_response()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateChangefeed {
    pub changefeed_id: String,
    pub sink_uri: String,
    pub tables: Vec<String>,
    #[serde(default)]
    pub start_ts: Option<u64>,
}

#[derive(Debug, Serialize, Deserialize, Clone)]
pub struct ChangefeedView {
    pub id: String,
    pub state: String,
    pub checkpoint_tso: u64,
    pub error: Option<ApiError2>,
    pub sink_uri: String,
    pub tables: Vec<String>,
    pub epoch: u64,
    /// Where the coordinator believes the maintainer is.
    pub maintainer_node: Option<String>,
    pub scheduling: String,
}

#[derive(Debug, Serialize, Deserialize, Clone)]
pub struct ApiError2 {
    pub code: String,
    pub message: String,
}

fn view(c: &Changefeed) -> ChangefeedView {
    let (scheduling, node) = match &c.scheduling {
        Scheduling::Absent { .. } => ("absent", None),
        Scheduling::Scheduling { node } => ("scheduling", Some(node.clone())),
        Scheduling::Replicating { node } => ("replicating", Some(node.clone())),
        Scheduling::Stopped => ("stopped", None),
    };
    ChangefeedView {
        id: c.info.id.clone(),
        state: serde_json::to_value(c.info.state)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default(),
        checkpoint_tso: c.info.checkpoint_ts,
        error: c.info.error.as_ref().map(|e| ApiError2 {
            code: e.code.clone(),
            message: e.message.clone(),
        }),
        sink_uri: c.info.config.sink_uri.clone(),
        tables: c.info.config.tables.clone(),
        epoch: c.info.epoch,
        maintainer_node: node,
        scheduling: scheduling.into(),
    }
}

// Handlers answer errors as ready HTTP responses; boxing them buys nothing.
#[allow(clippy::result_large_err)]
impl Api {
    /// The coordinator's HTTP address when this node is not it.
    fn coordinator_http(&self) -> Result<Option<String>, Response> {
        let s = self.node.snapshot.borrow();
        if s.coordinator_view.is_some() {
            return Ok(None);
        }
        let Some((cid, _)) = &s.coordinator else {
            return Err(err(
                StatusCode::SERVICE_UNAVAILABLE,
                "CDC:ErrNoCoordinator",
                "no coordinator is elected yet; retry shortly",
            ));
        };
        match s.captures.iter().find(|c| &c.id == cid) {
            Some(c) => Ok(Some(c.http_addr.clone())),
            None => Err(err(
                StatusCode::SERVICE_UNAVAILABLE,
                "CDC:ErrNoCoordinator",
                format!("coordinator {cid} is not in the membership"),
            )),
        }
    }

    async fn forward(
        &self,
        addr: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Response {
        let mut req = self.http.request(method, format!("http://{addr}{path}"));
        if let Some(b) = body {
            req = req.json(&b);
        }
        match req.send().await {
            Ok(r) => {
                let status =
                    StatusCode::from_u16(r.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
                let bytes = r.bytes().await.unwrap_or_default();
                (status, [("content-type", "application/json")], bytes).into_response()
            }
            Err(e) => err(
                StatusCode::BAD_GATEWAY,
                "CDC:ErrForwardToCoordinator",
                format!("forwarding to the coordinator at {addr}: {e}"),
            ),
        }
    }

    async fn command<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> Command,
    ) -> Result<T, Response> {
        let (tx, rx) = oneshot::channel();
        self.node.commands.send(make(tx)).await.map_err(|_| {
            err(
                StatusCode::SERVICE_UNAVAILABLE,
                "CDC:ErrNodeStopping",
                "the node is stopping",
            )
        })?;
        rx.await.map_err(|_| {
            err(
                StatusCode::SERVICE_UNAVAILABLE,
                "CDC:ErrNodeStopping",
                "the node is stopping",
            )
        })
    }
}

async fn create(State(api): State<Api>, body: axum::body::Bytes) -> Response {
    let req: CreateChangefeed = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return err(StatusCode::BAD_REQUEST, "CDC:ErrAPIInvalidParam", format!("invalid changefeed request: {e}; expected {{\"changefeed_id\", \"sink_uri\", \"tables\": [\"schema.table\"], \"start_ts\"?}}")),
    };
    if req.changefeed_id.is_empty()
        || !req
            .changefeed_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return err(
            StatusCode::BAD_REQUEST,
            "CDC:ErrAPIInvalidParam",
            format!(
                "changefeed_id {:?} must be non-empty [A-Za-z0-9_-]",
                req.changefeed_id
            ),
        );
    }
    if let Err(e) = SinkUri::parse(&req.sink_uri) {
        return err(
            StatusCode::BAD_REQUEST,
            "CDC:ErrSinkURIInvalid",
            e.to_string(),
        );
    }
    if req.tables.is_empty() {
        return err(
            StatusCode::BAD_REQUEST,
            "CDC:ErrAPIInvalidParam",
            "tables must name at least one schema.table",
        );
    }
    if let Some(t) = req
        .tables
        .iter()
        .find(|t| super::backend::parse_table(t).is_none())
    {
        return err(
            StatusCode::BAD_REQUEST,
            "CDC:ErrAPIInvalidParam",
            format!("table {t:?} is not schema.table"),
        );
    }
    match api.coordinator_http() {
        Err(r) => return r,
        Ok(Some(addr)) => {
            return api
                .forward(
                    &addr,
                    reqwest::Method::POST,
                    "/api/v2/changefeeds",
                    serde_json::from_slice(&body).ok(),
                )
                .await
        }
        Ok(None) => {}
    }
    let start_ts = req.start_ts.unwrap_or(0);
    let config = ChangefeedConfig {
        sink_uri: req.sink_uri,
        tables: req.tables,
    };
    let id = req.changefeed_id.clone();
    match api
        .command(|reply| Command::CreateChangefeed {
            id: id.clone(),
            start_ts,
            config,
            reply,
        })
        .await
    {
        Err(r) => r,
        Ok(Ok(())) => (StatusCode::CREATED, Json(serde_json::json!({"id": id}))).into_response(),
        Ok(Err(e)) if e.contains("already exists") => {
            err(StatusCode::CONFLICT, "CDC:ErrChangeFeedAlreadyExists", e)
        }
        Ok(Err(e)) => err(StatusCode::SERVICE_UNAVAILABLE, "CDC:ErrNotCoordinator", e),
    }
}

async fn list(State(api): State<Api>) -> Response {
    match api.coordinator_http() {
        Err(r) => r,
        Ok(Some(addr)) => {
            api.forward(&addr, reqwest::Method::GET, "/api/v2/changefeeds", None)
                .await
        }
        Ok(None) => {
            let s = api.node.snapshot.borrow();
            let items: Vec<ChangefeedView> = s
                .coordinator_view
                .as_ref()
                .map(|c| c.changefeeds.iter().map(view).collect())
                .unwrap_or_default();
            Json(serde_json::json!({"total": items.len(), "items": items})).into_response()
        }
    }
}

async fn get_one(State(api): State<Api>, Path(id): Path<String>) -> Response {
    match api.coordinator_http() {
        Err(r) => r,
        Ok(Some(addr)) => {
            api.forward(
                &addr,
                reqwest::Method::GET,
                &format!("/api/v2/changefeeds/{id}"),
                None,
            )
            .await
        }
        Ok(None) => {
            let s = api.node.snapshot.borrow();
            match s
                .coordinator_view
                .as_ref()
                .and_then(|c| c.changefeeds.iter().find(|f| f.info.id == id))
            {
                Some(c) => Json(view(c)).into_response(),
                None => err(
                    StatusCode::NOT_FOUND,
                    "CDC:ErrChangeFeedNotExists",
                    format!("changefeed {id} does not exist"),
                ),
            }
        }
    }
}

async fn pause_resume(api: Api, id: String, pause: bool) -> Response {
    let path = format!(
        "/api/v2/changefeeds/{id}/{}",
        if pause { "pause" } else { "resume" }
    );
    match api.coordinator_http() {
        Err(r) => r,
        Ok(Some(addr)) => api.forward(&addr, reqwest::Method::POST, &path, None).await,
        Ok(None) => {
            let r = if pause {
                api.command(|reply| Command::Pause {
                    id: id.clone(),
                    reply,
                })
                .await
            } else {
                api.command(|reply| Command::Resume {
                    id: id.clone(),
                    reply,
                })
                .await
            };
            match r {
                Err(r) => r,
                Ok(Ok(())) => Json(serde_json::json!({})).into_response(),
                Ok(Err(e)) if e.contains("not found") => {
                    err(StatusCode::NOT_FOUND, "CDC:ErrChangeFeedNotExists", e)
                }
                Ok(Err(e)) => err(StatusCode::BAD_REQUEST, "CDC:ErrAPIInvalidParam", e),
            }
        }
    }
}

async fn pause(State(api): State<Api>, Path(id): Path<String>) -> Response {
    pause_resume(api, id, true).await
}

async fn resume(State(api): State<Api>, Path(id): Path<String>) -> Response {
    pause_resume(api, id, false).await
}

async fn remove(State(api): State<Api>, Path(id): Path<String>) -> Response {
    match api.coordinator_http() {
        Err(r) => r,
        Ok(Some(addr)) => {
            api.forward(
                &addr,
                reqwest::Method::DELETE,
                &format!("/api/v2/changefeeds/{id}"),
                None,
            )
            .await
        }
        Ok(None) => match api
            .command(|reply| Command::Remove {
                id: id.clone(),
                reply,
            })
            .await
        {
            Err(r) => r,
            Ok(Ok(())) => Json(serde_json::json!({})).into_response(),
            Ok(Err(e)) if e.contains("not found") => {
                err(StatusCode::NOT_FOUND, "CDC:ErrChangeFeedNotExists", e)
            }
            Ok(Err(e)) => err(StatusCode::BAD_REQUEST, "CDC:ErrAPIInvalidParam", e),
        },
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MoveRequest {
    target_node: String,
}

/// `POST /api/v2/changefeeds/{id}/move` `{"target_node": "<node id>"}`.
async fn move_cf(
    State(api): State<Api>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let req: MoveRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return err(
                StatusCode::BAD_REQUEST,
                "CDC:ErrAPIInvalidParam",
                format!("invalid move request: {e}; expected {{\"target_node\": \"<node id>\"}}"),
            )
        }
    };
    match api.coordinator_http() {
        Err(r) => r,
        Ok(Some(addr)) => {
            api.forward(
                &addr,
                reqwest::Method::POST,
                &format!("/api/v2/changefeeds/{id}/move"),
                serde_json::from_slice(&body).ok(),
            )
            .await
        }
        Ok(None) => match api
            .command(|reply| Command::Move {
                id: id.clone(),
                target: req.target_node.clone(),
                reply,
            })
            .await
        {
            Err(r) => r,
            Ok(Ok(())) => Json(serde_json::json!({"moving_to": req.target_node})).into_response(),
            Ok(Err(e)) if e.contains("not found") => {
                err(StatusCode::NOT_FOUND, "CDC:ErrChangeFeedNotExists", e)
            }
            Ok(Err(e)) => err(StatusCode::BAD_REQUEST, "CDC:ErrAPIInvalidParam", e),
        },
    }
}

async fn captures(State(api): State<Api>) -> Response {
    let s = api.node.snapshot.borrow();
    let coord = s.coordinator.as_ref().map(|c| c.0.clone());
    let items: Vec<serde_json::Value> = s
        .captures
        .iter()
        .map(|c| serde_json::json!({"id": c.id, "address": c.advertise_addr, "http_address": c.http_addr, "is_coordinator": Some(&c.id) == coord.as_ref()}))
        .collect();
    Json(serde_json::json!({"total": items.len(), "items": items})).into_response()
}

async fn health(State(api): State<Api>) -> Response {
    let s = api.node.snapshot.borrow();
    Json(serde_json::json!({"status": "ok", "id": s.id, "profile": s.profile})).into_response()
}

async fn resign(State(api): State<Api>) -> Response {
    match api.command(|reply| Command::Resign { reply }).await {
        Err(r) => r,
        Ok(Ok(true)) => Json(serde_json::json!({"resigned": true})).into_response(),
        Ok(Ok(false)) => err(
            StatusCode::BAD_REQUEST,
            "CDC:ErrNotCoordinator",
            "this node is not the coordinator",
        ),
        Ok(Err(e)) => err(StatusCode::INTERNAL_SERVER_ERROR, "CDC:ErrResign", e),
    }
}

async fn debug_node(State(api): State<Api>) -> Response {
    let s = api.node.snapshot.borrow().clone();
    Json(s).into_response()
}

async fn fail_sink(State(api): State<Api>, Path(cf): Path<String>) -> Response {
    match api.command(|reply| Command::InjectSinkError { changefeed: cf.clone(), reply }).await {
        Err(r) => r,
        Ok(true) => Json(serde_json::json!({"failpoint": "sink-async-send-error", "changefeed": cf, "hit": true})).into_response(),
        Ok(false) => err(StatusCode::NOT_FOUND, "CDC:ErrDispatcherManagerNotExists", format!("this node hosts no dispatcher manager of {cf}")),
    }
}

async fn failpoints() -> Response {
    let items: Vec<serde_json::Value> = crate::failpoint::list()
        .into_iter()
        .zip(crate::failpoint::ALL)
        .map(|((name, actions, hits), (_, what))| serde_json::json!({"name": name, "actions": actions, "hits": hits, "what": what}))
        .collect();
    Json(serde_json::json!({"items": items})).into_response()
}

/// `POST /debug/failpoints/<name>` with the actions as the body, e.g. `10%return`.
async fn set_failpoint(Path(name): Path<String>, body: String) -> Response {
    let name = name.trim_start_matches('/');
    match crate::failpoint::configure(name, body.trim()) {
        Ok(()) => Json(serde_json::json!({"name": name, "actions": body.trim()})).into_response(),
        Err(e) if e.contains("unknown failpoint") => {
            err(StatusCode::NOT_FOUND, "CDC:ErrUnknownFailpoint", e)
        }
        Err(e) => err(StatusCode::BAD_REQUEST, "CDC:ErrAPIInvalidParam", e),
    }
}

async fn remove_failpoint(Path(name): Path<String>) -> Response {
    crate::failpoint::remove(name.trim_start_matches('/'));
    Json(serde_json::json!({"removed": name})).into_response()
}

async fn metrics(State(api): State<Api>) -> Response {
    use prometheus::{Encoder, IntCounter, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder};
    let s = api.node.snapshot.borrow().clone();
    let r = Registry::new();
    let g = |name: &str, help: &str, v: i64| {
        let x = IntGauge::new(name, help).unwrap();
        x.set(v);
        r.register(Box::new(x)).unwrap();
    };
    g(
        "cdc_node_is_coordinator",
        "1 when this node is the coordinator",
        s.coordinator_view.is_some() as i64,
    );
    g(
        "cdc_node_captures",
        "alive nodes in this node's view",
        s.captures.len() as i64,
    );
    let m = IntGaugeVec::new(
        Opts::new("cdc_maintainers", "maintainers hosted here"),
        &["changefeed", "bootstrap_done", "removal_only"],
    )
    .unwrap();
    for x in &s.maintainers {
        m.with_label_values(&[
            x.changefeed.as_str(),
            &x.bootstrap_done.to_string(),
            &x.removal_only.to_string(),
        ])
        .inc();
    }
    r.register(Box::new(m)).unwrap();
    g(
        "cdc_dispatcher_managers",
        "dispatcher managers hosted here",
        s.dispatcher_managers.len() as i64,
    );
    if let Some(c) = &s.coordinator_view {
        let cp = IntGaugeVec::new(
            Opts::new("cdc_changefeed_checkpoint_ts", "persisted checkpoint"),
            &["changefeed"],
        )
        .unwrap();
        let st = IntGaugeVec::new(
            Opts::new(
                "cdc_changefeed_state",
                "1 for the changefeed's current state",
            ),
            &["changefeed", "state"],
        )
        .unwrap();
        for f in &c.changefeeds {
            cp.with_label_values(&[f.info.id.as_str()])
                .set(f.info.checkpoint_ts as i64);
            st.with_label_values(&[f.info.id.as_str(), &view(f).state])
                .set(1);
        }
        r.register(Box::new(cp)).unwrap();
        r.register(Box::new(st)).unwrap();
        g(
            "cdc_coordinator_version",
            "the coordinator's term",
            c.version as i64,
        );
        g(
            "cdc_coordinator_operators",
            "operators in flight",
            c.operators.len() as i64,
        );
    }
    let ms = &api.node.message_stats;
    for (name, v) in [
        ("cdc_message_center_sent_total", &ms.sent),
        ("cdc_message_center_received_total", &ms.received),
        (
            "cdc_message_center_dropped_queue_full_total",
            &ms.dropped_queue_full,
        ),
        (
            "cdc_message_center_rejected_wrong_target_total",
            &ms.rejected_wrong_target,
        ),
        ("cdc_message_center_reconnects_total", &ms.reconnects),
    ] {
        let c = IntCounter::new(name, name).unwrap();
        c.inc_by(v.load(std::sync::atomic::Ordering::Relaxed));
        r.register(Box::new(c)).unwrap();
    }
    let mut buf = Vec::new();
    TextEncoder::new().encode(&r.gather(), &mut buf).unwrap();
    (
        StatusCode::OK,
        [("content-type", "text/plain; version=0.0.4")],
        buf,
    )
        .into_response()
}

/// The router of a node's API.
pub fn router(node: NodeHandle) -> Router {
    let api = Api {
        node,
        http: reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(10))
            .build()
            .expect("http client"),
    };
    Router::new()
        .route("/api/v2/changefeeds", post(create).get(list))
        .route("/api/v2/changefeeds/{id}", get(get_one).delete(remove))
        .route("/api/v2/changefeeds/{id}/move", post(move_cf))
        .route("/api/v2/changefeeds/{id}/pause", post(pause))
        .route("/api/v2/changefeeds/{id}/resume", post(resume))
        .route("/api/v2/captures", get(captures))
        .route("/api/v2/health", get(health))
        .route("/api/v2/owner/resign", post(resign))
        .route("/debug/node", get(debug_node))
        .route(
            "/debug/failpoints/sink-async-send-error/{changefeed}",
            post(fail_sink),
        )
        .route("/debug/failpoints", get(failpoints))
        .route(
            "/debug/failpoints/{*name}",
            post(set_failpoint).delete(remove_failpoint),
        )
        .route("/metrics", get(metrics))
        .with_state(api)
}

/// Serves a node's API on `listener` until the task is aborted.
pub fn serve(listener: tokio::net::TcpListener, node: NodeHandle) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router(node)).await {
            tracing::error!(error = %e, "the HTTP API stopped");
        }
    })
}

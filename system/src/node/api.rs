//! The node's HTTP API, in the shape of TiCDC's OpenAPI v2 where it
//! overlaps, plus introspection and metrics:
//!
//! | route | what |
//! |---|---|
//! | `POST /api/v2/changefeeds` | create [`CreateChangefeed`] |
//! | `GET /api/v2/changefeeds`, `GET /api/v2/changefeeds/{id}` | `state`, `checkpoint_tso`, `error` |
//! | `POST /api/v2/changefeeds/{id}/pause`, `.../resume` | |
//! | `DELETE /api/v2/changefeeds/{id}` | remove (stop, then forget) |
//! | `POST /api/v2/changefeeds/{id}/move` | move the maintainer `{target_node}` |
//! | `GET /api/v2/captures` | alive nodes, which is coordinator |
//! | `GET /api/v2/health` | liveness |
//! | `POST /api/v2/owner/resign` | the coordinator resigns |
//! | `GET /debug/node` | maintainers, dispatcher managers, coordinator view |
//! | `POST /debug/failpoints/sink-async-send-error/{changefeed}` | fail this node's sink of a changefeed (with `--enable-failpoints` only) |
//! | `GET /debug/failpoints`, `POST`/`DELETE /debug/failpoints/{name}` | failpoints: list with hits, set (body: a term), remove (with `--enable-failpoints` only) |
//! | `GET /metrics` | Prometheus text |
//!
//! A create, remove, pause or resume is answered 2xx only once its change
//! is persisted in etcd under the coordinator's term; a refusal (4xx)
//! changed nothing; a 503 "retry later" or no answer means the outcome is
//! unknown and the request may be retried (docs/control-plane.md §3.7).
//!
//! Bodies are the types of [`crate::api`]. Changefeed requests to a node
//! that is not the coordinator are forwarded to the coordinator. Errors are
//! [`ApiError`] with a 4xx/5xx. A create is checked against the upstream on
//! the coordinator ([`check_create`]): the start ts lies between the oldest
//! ts the upstream keeps and its current ts, and every table exists.

use std::collections::BTreeSet;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use tokio::sync::oneshot;

use super::server::{Command, NodeHandle};
use crate::api::{
    ApiError, CaptureList, CaptureView, ChangefeedList, ChangefeedView, CreateChangefeed, Created,
    Done, FailpointList, FailpointRemoved, FailpointSet, Health, MoveRequest, Moving, Resigned,
    SinkErrorInjected, MAX_CHANGEFEED_ID_LEN,
};
use crate::failpoint::Failpoint;
use crate::messages::ChangefeedConfig;
use crate::proto::upstream_client::UpstreamClient;
use crate::sink::SinkUri;

/// How a node's API is served.
#[derive(Debug, Clone, Default)]
pub struct ApiOptions {
    /// Serve the `/debug/failpoints` routes (`cdc-server --enable-failpoints`).
    pub enable_failpoints: bool,
    /// The upstream's gRPC endpoint, for checking create requests.
    pub upstream: String,
}

#[derive(Clone)]
struct Api {
    node: NodeHandle,
    http: reqwest::Client,
    upstream: String,
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

/// A refused request: (status, TiCDC error code, message).
pub type Refusal = (StatusCode, &'static str, String);

fn invalid(msg: String) -> Refusal {
    (StatusCode::BAD_REQUEST, "CDC:ErrAPIInvalidParam", msg)
}

/// Checks what a create request says by itself (any node, before forwarding).
pub fn check_request(req: &CreateChangefeed) -> Result<(), Refusal> {
    let id = &req.changefeed_id;
    if id.is_empty()
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(invalid(format!(
            "changefeed_id {id:?} must be non-empty [A-Za-z0-9_-]"
        )));
    }
    if id.len() > MAX_CHANGEFEED_ID_LEN {
        return Err(invalid(format!(
            "changefeed_id is {} characters long; at most {MAX_CHANGEFEED_ID_LEN} are allowed",
            id.len()
        )));
    }
    if let Err(e) = SinkUri::parse(&req.sink_uri) {
        return Err((
            StatusCode::BAD_REQUEST,
            "CDC:ErrSinkURIInvalid",
            e.to_string(),
        ));
    }
    if req.tables.is_empty() {
        return Err(invalid("tables must name at least one schema.table".into()));
    }
    if let Some(t) = req
        .tables
        .iter()
        .find(|t| super::backend::parse_table(t).is_none())
    {
        return Err(invalid(format!("table {t:?} is not schema.table")));
    }
    Ok(())
}

/// What the upstream says, for checking a create request.
#[derive(Debug, Clone, Default)]
pub struct UpstreamFacts {
    /// A ts the upstream just handed out.
    pub now_ts: u64,
    /// The oldest ts whose changes the upstream still serves.
    pub kept_since_ts: u64,
    /// `schema.table` of every table.
    pub tables: BTreeSet<String>,
}

/// Checks a create request against the upstream; returns the start ts (the
/// oldest kept ts when the request names none, so everything the upstream
/// holds is replicated).
pub fn check_create(req: &CreateChangefeed, up: &UpstreamFacts) -> Result<u64, Refusal> {
    check_request(req)?;
    let start_ts = req.start_ts.unwrap_or(up.kept_since_ts);
    if start_ts > up.now_ts {
        return Err(invalid(format!(
            "start_ts {start_ts} is beyond the upstream's current ts {}; omit it or give a ts the upstream has reached",
            up.now_ts
        )));
    }
    if start_ts < up.kept_since_ts {
        return Err(invalid(format!(
            "start_ts {start_ts} is older than the upstream keeps (its oldest ts is {}); give a later one",
            up.kept_since_ts
        )));
    }
    let missing: Vec<&str> = req
        .tables
        .iter()
        .filter(|t| !up.tables.contains(*t))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(invalid(format!(
            "table(s) {} do not exist upstream; create them first (existing: {})",
            missing.join(", "),
            up.tables.iter().cloned().collect::<Vec<_>>().join(", ")
        )));
    }
    Ok(start_ts)
}

async fn upstream_facts(addr: &str) -> Result<UpstreamFacts, String> {
    let mut c = UpstreamClient::connect(addr.to_string())
        .await
        .map_err(|e| format!("connecting to the upstream at {addr}: {e}"))?;
    let ts = c
        .get_ts(crate::proto::GetTsRequest {})
        .await
        .map_err(|e| format!("upstream GetTs: {}", e.message()))?
        .into_inner();
    let tables = c
        .list_tables(crate::proto::ListTablesRequest {})
        .await
        .map_err(|e| format!("upstream ListTables: {}", e.message()))?
        .into_inner()
        .tables
        .into_iter()
        .filter_map(|t| t.name.map(|n| format!("{}.{}", n.schema, n.table)))
        .collect();
    Ok(UpstreamFacts {
        now_ts: ts.ts,
        kept_since_ts: ts.kept_since_ts,
        tables,
    })
}

// Handlers answer errors as ready HTTP responses; boxing them buys nothing.
#[allow(clippy::result_large_err)]
impl Api {
    /// The coordinator's HTTP address when this node is not it.
    fn coordinator_http(&self) -> Result<Option<String>, Response> {
        if self.node.session_expired() {
            return Err(err(
                StatusCode::SERVICE_UNAVAILABLE,
                "CDC:ErrNoCoordinator",
                "this node's etcd session may have run out; ask another node",
            ));
        }
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

    async fn forward<B: serde::Serialize>(
        &self,
        addr: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<&B>,
    ) -> Response {
        let mut req = self.http.request(method, format!("http://{addr}{path}"));
        if let Some(b) = body {
            req = req.json(b);
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
    if let Err((status, code, msg)) = check_request(&req) {
        return err(status, code, msg);
    }
    match api.coordinator_http() {
        Err(r) => return r,
        Ok(Some(addr)) => {
            return api
                .forward(
                    &addr,
                    reqwest::Method::POST,
                    "/api/v2/changefeeds",
                    Some(&req),
                )
                .await
        }
        Ok(None) => {}
    }
    let facts = match upstream_facts(&api.upstream).await {
        Ok(f) => f,
        Err(e) => {
            return err(
                StatusCode::SERVICE_UNAVAILABLE,
                "CDC:ErrUpstreamUnavailable",
                format!("cannot check the request against the upstream: {e}; retry shortly"),
            )
        }
    };
    let start_ts = match check_create(&req, &facts) {
        Ok(ts) => ts,
        Err((status, code, msg)) => return err(status, code, msg),
    };
    let config = ChangefeedConfig {
        sink_uri: req.sink_uri,
        tables: req.tables.into(),
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
        Ok(Ok(())) => (StatusCode::CREATED, Json(Created { id })).into_response(),
        Ok(Err(e)) if e.contains("already exists") => {
            err(StatusCode::CONFLICT, "CDC:ErrChangeFeedAlreadyExists", e)
        }
        Ok(Err(e)) => err(StatusCode::SERVICE_UNAVAILABLE, "CDC:ErrNotCoordinator", e),
    }
}

/// The coordinator's changefeeds, when this node is the coordinator.
fn changefeeds(api: &Api) -> Vec<ChangefeedView> {
    api.node
        .snapshot
        .borrow()
        .coordinator_view
        .as_ref()
        .map(|c| c.changefeeds.clone())
        .unwrap_or_default()
}

async fn list(State(api): State<Api>) -> Response {
    match api.coordinator_http() {
        Err(r) => r,
        Ok(Some(addr)) => {
            api.forward::<()>(&addr, reqwest::Method::GET, "/api/v2/changefeeds", None)
                .await
        }
        Ok(None) => {
            let items = changefeeds(&api);
            Json(ChangefeedList {
                total: items.len(),
                items,
            })
            .into_response()
        }
    }
}

async fn get_one(State(api): State<Api>, Path(id): Path<String>) -> Response {
    match api.coordinator_http() {
        Err(r) => r,
        Ok(Some(addr)) => {
            api.forward::<()>(
                &addr,
                reqwest::Method::GET,
                &format!("/api/v2/changefeeds/{id}"),
                None,
            )
            .await
        }
        Ok(None) => match changefeeds(&api).into_iter().find(|f| f.id == id) {
            Some(c) => Json(c).into_response(),
            None => err(
                StatusCode::NOT_FOUND,
                "CDC:ErrChangeFeedNotExists",
                format!("changefeed {id} does not exist"),
            ),
        },
    }
}

/// The answer to a coordinator command on a changefeed.
fn changefeed_answer<T: serde::Serialize>(r: Result<Result<T, String>, Response>) -> Response {
    match r {
        Err(r) => r,
        Ok(Ok(body)) => Json(body).into_response(),
        Ok(Err(e)) if e.contains("not found") => {
            err(StatusCode::NOT_FOUND, "CDC:ErrChangeFeedNotExists", e)
        }
        // A refusal of the moment (an operator in flight, not yet
        // replicating): the same request may succeed later.
        Ok(Err(e)) if e.contains("retry later") => err(
            StatusCode::SERVICE_UNAVAILABLE,
            "CDC:ErrSchedulerRequestFailed",
            e,
        ),
        Ok(Err(e)) => err(StatusCode::BAD_REQUEST, "CDC:ErrAPIInvalidParam", e),
    }
}

/// Forwards a changefeed command to the coordinator, or runs it here.
async fn on_coordinator<B: serde::Serialize, T: serde::Serialize>(
    api: &Api,
    method: reqwest::Method,
    path: &str,
    body: Option<&B>,
    make: impl FnOnce(oneshot::Sender<Result<(), String>>) -> Command,
    answer: T,
) -> Response {
    match api.coordinator_http() {
        Err(r) => r,
        Ok(Some(addr)) => api.forward(&addr, method, path, body).await,
        Ok(None) => changefeed_answer(api.command(make).await.map(|r| r.map(|()| answer))),
    }
}

async fn pause(State(api): State<Api>, Path(id): Path<String>) -> Response {
    let path = format!("/api/v2/changefeeds/{id}/pause");
    let make = |reply| Command::Pause { id, reply };
    on_coordinator::<(), _>(&api, reqwest::Method::POST, &path, None, make, Done {}).await
}

async fn resume(State(api): State<Api>, Path(id): Path<String>) -> Response {
    let path = format!("/api/v2/changefeeds/{id}/resume");
    let make = |reply| Command::Resume { id, reply };
    on_coordinator::<(), _>(&api, reqwest::Method::POST, &path, None, make, Done {}).await
}

async fn remove(State(api): State<Api>, Path(id): Path<String>) -> Response {
    let path = format!("/api/v2/changefeeds/{id}");
    let make = |reply| Command::Remove { id, reply };
    on_coordinator::<(), _>(&api, reqwest::Method::DELETE, &path, None, make, Done {}).await
}

/// `POST /api/v2/changefeeds/{id}/move` with a [`MoveRequest`].
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
    let path = format!("/api/v2/changefeeds/{id}/move");
    let answer = Moving {
        moving_to: req.target_node.clone(),
    };
    let target = req.target_node.clone();
    let make = |reply| Command::Move { id, target, reply };
    on_coordinator(&api, reqwest::Method::POST, &path, Some(&req), make, answer).await
}

async fn captures(State(api): State<Api>) -> Response {
    let s = api.node.snapshot.borrow();
    let coord = s.coordinator.as_ref().map(|c| c.0.clone());
    let items: Vec<CaptureView> = s
        .captures
        .iter()
        .map(|c| CaptureView {
            id: c.id.clone(),
            address: c.advertise_addr.clone(),
            http_address: c.http_addr.clone(),
            is_coordinator: Some(&c.id) == coord.as_ref(),
        })
        .collect();
    Json(CaptureList {
        total: items.len(),
        items,
    })
    .into_response()
}

async fn health(State(api): State<Api>) -> Response {
    let s = api.node.snapshot.borrow();
    Json(Health {
        status: "ok".into(),
        id: s.id.clone(),
        profile: s.profile,
    })
    .into_response()
}

async fn resign(State(api): State<Api>) -> Response {
    match api.command(|reply| Command::Resign { reply }).await {
        Err(r) => r,
        Ok(Ok(true)) => Json(Resigned { resigned: true }).into_response(),
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
    match api
        .command(|reply| Command::InjectSinkError {
            changefeed: cf.clone(),
            reply,
        })
        .await
    {
        Err(r) => r,
        Ok(true) => Json(SinkErrorInjected {
            failpoint: "sink-async-send-error".into(),
            changefeed: cf,
            hit: true,
        })
        .into_response(),
        Ok(false) => err(
            StatusCode::NOT_FOUND,
            "CDC:ErrDispatcherManagerNotExists",
            format!("this node hosts no dispatcher manager of {cf}"),
        ),
    }
}

async fn failpoints(State(api): State<Api>) -> Response {
    Json(FailpointList {
        items: api.node.faults.list(),
    })
    .into_response()
}

/// `POST /debug/failpoints/<name>` with a term as the body, e.g. `10%return`.
async fn set_failpoint(State(api): State<Api>, Path(name): Path<String>, body: String) -> Response {
    let name = name.trim_start_matches('/');
    match api.node.faults.configure(name, body.trim()) {
        Ok(()) => Json(FailpointSet {
            name: name.into(),
            actions: body.trim().into(),
        })
        .into_response(),
        Err(e) if e.contains("unknown failpoint") => {
            err(StatusCode::NOT_FOUND, "CDC:ErrUnknownFailpoint", e)
        }
        Err(e) => err(StatusCode::BAD_REQUEST, "CDC:ErrAPIInvalidParam", e),
    }
}

async fn remove_failpoint(State(api): State<Api>, Path(name): Path<String>) -> Response {
    let name = name.trim_start_matches('/');
    match Failpoint::parse(name) {
        Ok(p) => {
            api.node.faults.remove(p);
            Json(FailpointRemoved {
                removed: name.into(),
            })
            .into_response()
        }
        Err(e) => err(StatusCode::NOT_FOUND, "CDC:ErrUnknownFailpoint", e),
    }
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
            cp.with_label_values(&[f.id.as_str()])
                .set(f.checkpoint_tso as i64);
            st.with_label_values(&[f.id.as_str(), f.state.into()])
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
pub fn router(node: NodeHandle, opts: ApiOptions) -> Router {
    let api = Api {
        node,
        http: reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(10))
            .build()
            .expect("http client"),
        upstream: opts.upstream,
    };
    let mut r = Router::new()
        .route("/api/v2/changefeeds", post(create).get(list))
        .route("/api/v2/changefeeds/{id}", get(get_one).delete(remove))
        .route("/api/v2/changefeeds/{id}/move", post(move_cf))
        .route("/api/v2/changefeeds/{id}/pause", post(pause))
        .route("/api/v2/changefeeds/{id}/resume", post(resume))
        .route("/api/v2/captures", get(captures))
        .route("/api/v2/health", get(health))
        .route("/api/v2/owner/resign", post(resign))
        .route("/debug/node", get(debug_node))
        .route("/metrics", get(metrics));
    if opts.enable_failpoints {
        r = r
            .route(
                "/debug/failpoints/sink-async-send-error/{changefeed}",
                post(fail_sink),
            )
            .route("/debug/failpoints", get(failpoints))
            .route(
                "/debug/failpoints/{*name}",
                post(set_failpoint).delete(remove_failpoint),
            );
    }
    r.with_state(api)
}

/// Serves a node's API on `listener` until the task is aborted.
pub fn serve(
    listener: tokio::net::TcpListener,
    node: NodeHandle,
    opts: ApiOptions,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router(node, opts)).await {
            tracing::error!(error = %e, "the HTTP API stopped");
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::NodeSnapshot;
    use crate::failpoint::Faults;
    use crate::profile::Profile;

    fn facts() -> UpstreamFacts {
        UpstreamFacts {
            now_ts: 1_000,
            kept_since_ts: 100,
            tables: ["shop.t0".to_string(), "shop.t1".to_string()].into(),
        }
    }

    fn req() -> CreateChangefeed {
        CreateChangefeed {
            changefeed_id: "cf1".into(),
            sink_uri: "kafka://kafka:9092/cdc-chaos-cf1?protocol=canal-json".into(),
            tables: vec!["shop.t0".into()],
            start_ts: None,
        }
    }

    #[test]
    fn a_create_is_refused_with_the_reason() {
        type Edit = fn(&mut CreateChangefeed);
        let cases: &[(&str, Edit, &str)] = &[
            (
                "start_ts beyond now",
                |r| r.start_ts = Some(1_001),
                "beyond the upstream's current ts",
            ),
            (
                "start_ts u64::MAX",
                |r| r.start_ts = Some(u64::MAX),
                "beyond the upstream's current ts",
            ),
            (
                "start_ts too old",
                |r| r.start_ts = Some(99),
                "older than the upstream keeps",
            ),
            (
                "id of 129 chars",
                |r| r.changefeed_id = "a".repeat(129),
                "at most 128",
            ),
            (
                "id of 5000 chars",
                |r| r.changefeed_id = "a".repeat(5000),
                "at most 128",
            ),
            ("empty id", |r| r.changefeed_id.clear(), "non-empty"),
            (
                "id with a slash",
                |r| r.changefeed_id = "a/b".into(),
                "[A-Za-z0-9_-]",
            ),
            (
                "missing table",
                |r| r.tables = vec!["shop.t9".into()],
                "do not exist upstream",
            ),
            ("no tables", |r| r.tables.clear(), "at least one"),
            (
                "table not schema.table",
                |r| r.tables = vec!["t0".into()],
                "not schema.table",
            ),
            ("bad sink", |r| r.sink_uri = "mysql://x".into(), ""),
        ];
        for (what, edit, why) in cases {
            let mut r = req();
            edit(&mut r);
            let (status, code, msg) = check_create(&r, &facts()).expect_err(what);
            assert_eq!(status, StatusCode::BAD_REQUEST, "{what}");
            assert!(code.starts_with("CDC:Err"), "{what}: {code}");
            assert!(msg.contains(why), "{what}: {msg}");
        }
    }

    #[test]
    fn a_good_create_starts_where_asked_or_at_the_oldest_kept_ts() {
        assert_eq!(check_create(&req(), &facts()), Ok(100));
        let edge = |ts| CreateChangefeed {
            start_ts: Some(ts),
            ..req()
        };
        assert_eq!(check_create(&edge(100), &facts()), Ok(100));
        assert_eq!(check_create(&edge(1_000), &facts()), Ok(1_000));
        let long = CreateChangefeed {
            changefeed_id: "a".repeat(128),
            ..req()
        };
        assert!(check_create(&long, &facts()).is_ok());
    }

    /// A handle with no node loop behind it: enough for routes that only
    /// read the snapshot or the failpoint registry.
    fn handle() -> NodeHandle {
        let (commands, _rx) = tokio::sync::mpsc::channel(1);
        let (_tx, snapshot) = tokio::sync::watch::channel(NodeSnapshot {
            id: "n1".into(),
            profile: Profile::Hardened,
            started_ms: 0,
            now_ms: 0,
            coordinator: None,
            maintainers: vec![],
            dispatcher_managers: vec![],
            coordinator_view: None,
            captures: vec![],
        });
        NodeHandle {
            id: "n1".into(),
            commands,
            snapshot,
            message_stats: Default::default(),
            faults: Faults::seeded(0),
            fenced_until: None,
        }
    }

    async fn serve_on_port(opts: ApiOptions) -> (String, tokio::task::JoinHandle<()>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = format!("http://{}", l.local_addr().unwrap());
        (addr, serve(l, handle(), opts))
    }

    #[tokio::test]
    async fn failpoint_routes_exist_only_when_enabled() {
        let http = reqwest::Client::new();
        for enabled in [false, true] {
            let (addr, task) = serve_on_port(ApiOptions {
                enable_failpoints: enabled,
                upstream: String::new(),
            })
            .await;
            let list = http
                .get(format!("{addr}/debug/failpoints"))
                .send()
                .await
                .unwrap();
            let set = http
                .post(format!("{addr}/debug/failpoints/cdc-chaos/HoldCloseAck"))
                .body("return")
                .send()
                .await
                .unwrap();
            let health = http
                .get(format!("{addr}/api/v2/health"))
                .send()
                .await
                .unwrap();
            assert_eq!(health.status(), 200);
            let h: Health = health.json().await.unwrap();
            assert_eq!(h.id, "n1");
            if enabled {
                assert_eq!(list.status(), 200);
                assert_eq!(set.status(), 200);
                let bad = http
                    .post(format!("{addr}/debug/failpoints/cdc-chaos/HoldCloseAck"))
                    .body("sleep(100)")
                    .send()
                    .await
                    .unwrap();
                assert_eq!(bad.status(), 400, "a blocking term is refused");
                let l: FailpointList = http
                    .get(format!("{addr}/debug/failpoints"))
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                assert!(l
                    .items
                    .iter()
                    .any(|f| f.name == "cdc-chaos/HoldCloseAck" && f.actions == "return"));
            } else {
                assert_eq!(list.status(), 404);
                assert_eq!(set.status(), 404);
            }
            task.abort();
        }
    }
}

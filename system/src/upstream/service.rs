//! The upstream's gRPC service (tonic) and its change streams.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::store::{Store, WriteError};
use super::table_str;
use super::workload::Workload;
use crate::proto::upstream_server::{Upstream, UpstreamServer};
use crate::proto::{self as pb, subscribe_event::Event, SubscribeEvent, TableName};

/// How often a fresh resolved ts is published.
pub const RESOLVED_INTERVAL: Duration = Duration::from_millis(100);

pub struct Service {
    store: Arc<Store>,
    workload: Workload,
}

fn status(e: anyhow::Error) -> Status {
    match e.downcast_ref::<WriteError>() {
        Some(WriteError::UnknownTable(_)) => Status::not_found(e.to_string()),
        Some(WriteError::Invalid(_)) => Status::invalid_argument(e.to_string()),
        None => Status::internal(format!("{e:#}")),
    }
}

fn table_arg(t: Option<TableName>) -> Result<TableName, Status> {
    t.filter(|t| !t.schema.is_empty() && !t.table.is_empty())
        .ok_or_else(|| Status::invalid_argument("name a table: {schema, table}"))
}

/// Streams every change of `table` with commit ts > `start_ts` in commit-ts
/// order, and a resolved ts whenever every change at or below it was sent.
pub fn subscribe(
    store: Arc<Store>,
    table: TableName,
    start_ts: u64,
) -> tokio::sync::mpsc::Receiver<SubscribeEvent> {
    let (tx, rx) = tokio::sync::mpsc::channel(1024);
    tokio::spawn(async move {
        let mut progress = store.progress();
        let mut pos = 0usize;
        let mut last_resolved = start_ts;
        loop {
            let p = *progress.borrow_and_update();
            for txn in store.entries(pos, p.log_len) {
                if txn.commit_ts <= start_ts {
                    continue;
                }
                for ch in txn
                    .changes
                    .iter()
                    .filter(|c| c.table.as_ref() == Some(&table))
                {
                    if tx
                        .send(SubscribeEvent {
                            event: Some(Event::Change(ch.clone())),
                        })
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            }
            pos = pos.max(p.log_len);
            if p.resolved_ts > last_resolved && p.resolved_log_len <= pos {
                last_resolved = p.resolved_ts;
                if tx
                    .send(SubscribeEvent {
                        event: Some(Event::ResolvedTs(p.resolved_ts)),
                    })
                    .await
                    .is_err()
                {
                    return;
                }
            }
            tokio::select! {
                r = progress.changed() => if r.is_err() { return },
                _ = tx.closed() => return,
            }
        }
    });
    rx
}

#[tonic::async_trait]
impl Upstream for Service {
    async fn get_ts(&self, _: Request<pb::GetTsRequest>) -> Result<Response<pb::Ts>, Status> {
        Ok(Response::new(pb::Ts {
            ts: self.store.next_ts().map_err(status)?,
            kept_since_ts: self.store.kept_since_ts(),
        }))
    }

    async fn create_table(
        &self,
        r: Request<pb::CreateTableRequest>,
    ) -> Result<Response<pb::CreateTableResponse>, Status> {
        let def = r
            .into_inner()
            .table
            .ok_or_else(|| Status::invalid_argument("CreateTable needs a table definition"))?;
        let created = self.store.create_table(def).map_err(status)?;
        Ok(Response::new(pb::CreateTableResponse { created }))
    }

    async fn list_tables(
        &self,
        _: Request<pb::ListTablesRequest>,
    ) -> Result<Response<pb::ListTablesResponse>, Status> {
        Ok(Response::new(pb::ListTablesResponse {
            tables: self.store.tables(),
        }))
    }

    async fn commit(
        &self,
        r: Request<pb::CommitRequest>,
    ) -> Result<Response<pb::CommitResponse>, Status> {
        let (start_ts, commit_ts) = self.store.commit(&r.into_inner().writes).map_err(status)?;
        Ok(Response::new(pb::CommitResponse {
            start_ts,
            commit_ts,
        }))
    }

    type SubscribeStream = ReceiverStream<Result<SubscribeEvent, Status>>;

    async fn subscribe(
        &self,
        r: Request<pb::SubscribeRequest>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        let r = r.into_inner();
        let table = table_arg(r.table)?;
        if !self.store.has_table(&table) {
            return Err(Status::not_found(format!(
                "table {} does not exist: create it first or check ListTables",
                table_str(&table)
            )));
        }
        let mut events = subscribe(self.store.clone(), table, r.start_ts);
        let (tx, rx) = tokio::sync::mpsc::channel(1024);
        tokio::spawn(async move {
            while let Some(e) = events.recv().await {
                if tx.send(Ok(e)).await.is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn read_changes(
        &self,
        r: Request<pb::ReadChangesRequest>,
    ) -> Result<Response<pb::ReadChangesResponse>, Status> {
        let r = r.into_inner();
        let table = table_arg(r.table)?;
        let changes = self
            .store
            .changes(&table, r.from_ts, r.to_ts)
            .map_err(|e| status(e.into()))?;
        Ok(Response::new(pb::ReadChangesResponse { changes }))
    }

    async fn read_rows(
        &self,
        r: Request<pb::ReadRowsRequest>,
    ) -> Result<Response<pb::ReadRowsResponse>, Status> {
        let table = table_arg(r.into_inner().table)?;
        let (rows, read_ts) = self.store.rows(&table).map_err(|e| status(e.into()))?;
        Ok(Response::new(pb::ReadRowsResponse {
            rows: rows
                .into_iter()
                .map(|columns| pb::Row { columns })
                .collect(),
            read_ts,
        }))
    }

    async fn start_workload(
        &self,
        r: Request<pb::WorkloadSpec>,
    ) -> Result<Response<pb::WorkloadStatus>, Status> {
        let st = self
            .workload
            .start(self.store.clone(), r.into_inner())
            .await
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        Ok(Response::new(st))
    }

    async fn stop_workload(
        &self,
        _: Request<pb::StopWorkloadRequest>,
    ) -> Result<Response<pb::WorkloadStatus>, Status> {
        Ok(Response::new(self.workload.stop().await))
    }

    async fn get_workload(
        &self,
        _: Request<pb::GetWorkloadRequest>,
    ) -> Result<Response<pb::WorkloadStatus>, Status> {
        Ok(Response::new(self.workload.status()))
    }
}

/// Publishes a resolved ts every [`RESOLVED_INTERVAL`] until the store is dropped.
pub fn spawn_resolver(store: Arc<Store>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(RESOLVED_INTERVAL);
        loop {
            tick.tick().await;
            if let Err(e) = store.advance_resolved() {
                tracing::error!(error = %e, "cannot advance the resolved ts");
            }
        }
    })
}

/// A running upstream server (used by the binary and by in-process tests).
pub struct Server {
    pub addr: SocketAddr,
    pub store: Arc<Store>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
    resolver: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Serves `store` on `addr` (port 0 picks a free port).
    pub async fn start(store: Arc<Store>, addr: SocketAddr) -> anyhow::Result<Server> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let svc = Service {
            store: store.clone(),
            workload: Workload::default(),
        };
        let task = tokio::spawn(async move {
            let r = tonic::transport::Server::builder()
                .add_service(UpstreamServer::new(svc))
                .serve_with_incoming_shutdown(
                    tokio_stream::wrappers::TcpListenerStream::new(listener),
                    async {
                        let _ = rx.await;
                    },
                )
                .await;
            if let Err(e) = r {
                tracing::error!(error = %e, "upstream server stopped");
            }
        });
        let resolver = spawn_resolver(store.clone());
        Ok(Server {
            addr,
            store,
            shutdown: Some(tx),
            task,
            resolver,
        })
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.resolver.abort();
        let _ = (&mut self.task).await;
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.resolver.abort();
        self.task.abort();
    }
}

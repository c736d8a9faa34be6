//! Container logs of a run, with Docker's timestamps turned into the run
//! clock, for `run.json` (the report shows windows of them around each
//! finding).

use bollard::query_parameters::LogsOptions;
use futures::StreamExt;

use super::observer::Clock;
use crate::cluster::Cluster;
use crate::run_model::{ContainerLog, LogLine};

/// Lines kept per container (the newest); a run of minutes stays far below.
pub const MAX_LINES: usize = 20_000;

/// Splits Docker's `<RFC 3339 timestamp> <text>` line.
fn parse(line: &str, started_at_ms: i64) -> LogLine {
    let (ts, text) = line.split_once(' ').unwrap_or(("", line));
    let t_ms = chrono::DateTime::parse_from_rfc3339(ts)
        .map(|t| (t.timestamp_millis() - started_at_ms).max(0) as u64)
        .unwrap_or(0);
    LogLine {
        t_ms,
        text: text.trim_end().to_string(),
    }
}

/// Every container's log (stdout and stderr), oldest first. Failures to read
/// one are recorded as its only line rather than failing the run.
pub async fn collect(cluster: &Cluster, clock: Option<&Clock>) -> Vec<ContainerLog> {
    let started = clock.map(|c| c.started_at_ms).unwrap_or(0);
    let docker = match crate::docker::connect() {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(error = %e, "no Docker for the logs");
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for (name, index, id) in cluster.containers() {
        let mut lines = Vec::new();
        let mut stream = docker.logs(
            &id,
            Some(LogsOptions {
                stdout: true,
                stderr: true,
                timestamps: true,
                ..Default::default()
            }),
        );
        while let Some(item) = stream.next().await {
            match item {
                Ok(chunk) => {
                    let text = chunk.to_string();
                    for l in text.lines().filter(|l| !l.trim().is_empty()) {
                        lines.push(parse(l, started));
                    }
                }
                Err(e) => {
                    lines.push(LogLine {
                        t_ms: 0,
                        text: format!("(cdc-chaos: reading this log failed: {e})"),
                    });
                    break;
                }
            }
        }
        lines.sort_by_key(|l| l.t_ms);
        if lines.len() > MAX_LINES {
            lines.drain(..lines.len() - MAX_LINES);
        }
        out.push(ContainerLog {
            container: name,
            node: index.map(|s| s.number()),
            lines,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_timestamps_become_run_time() {
        let t0 = chrono::DateTime::parse_from_rfc3339("2026-12-02T15:00:00Z")
            .unwrap()
            .timestamp_millis();
        let l = parse(
            "2026-12-02T15:00:01.250000000Z INFO coordinator elected",
            t0,
        );
        assert_eq!(l.t_ms, 1250);
        assert_eq!(l.text, "INFO coordinator elected");
        // Before the run started: clamped to 0.
        assert_eq!(parse("2026-12-02T14:59:59Z setup", t0).t_ms, 0);
        // No timestamp: kept whole at 0.
        assert_eq!(parse("garbage", t0).text, "garbage");
    }
}

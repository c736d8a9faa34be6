//! `make bench`: message-center throughput between two nodes on loopback
//! (heartbeat-sized control messages, one peer stream, FIFO).

use std::time::{Duration, Instant};

use cdc_system::messages::{Envelope, Message};
use cdc_system::node::message_center::{MessageCenter, PEER_QUEUE};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let n: u64 = std::env::var("BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300_000);
    let la = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let lb = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (a, _arx) = MessageCenter::new("a#1".into(), 1024);
    let (b, mut brx) = MessageCenter::new("b#1".into(), 65_536);
    let b_addr = lb.local_addr().unwrap().to_string();
    let _sa = a.serve(la);
    let _sb = b.serve(lb);
    a.set_peers(&[("b#1".to_string(), b_addr)].into());
    let msg = |i: u64| Envelope {
        from: "a#1".into(),
        to: "b#1".into(),
        msg: Message::HeartBeat {
            changefeed: "cf-bench".into(),
            epoch: 7,
            watermark: 470_000_000_000_000_000 + i,
            error: None,
        },
    };
    let bytes = serde_json::to_vec(&msg(0).msg).unwrap().len();
    // Warm up the stream.
    a.send(msg(0));
    brx.recv().await.unwrap();
    let t = Instant::now();
    let mut sent = 0u64;
    let mut received = 0u64;
    let mut stalled = false;
    while received < n {
        // Keep the queue below its bound so nothing is dropped there.
        while sent < n && sent - received < (PEER_QUEUE as u64) / 2 {
            assert!(a.send(msg(sent)));
            sent += 1;
        }
        match tokio::time::timeout(Duration::from_secs(5), brx.recv()).await {
            Ok(Some(_)) => received += 1,
            // A broken stream loses what it had taken (by design); stop here.
            _ => {
                stalled = true;
                break;
            }
        }
    }
    let secs = t.elapsed().as_secs_f64() - if stalled { 5.0 } else { 0.0 };
    let reconnects = a
        .stats
        .reconnects
        .load(std::sync::atomic::Ordering::Relaxed);
    println!("| messages | payload | time | throughput | lost at a broken stream | reconnects |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| {received} of {sent} | {bytes} B JSON | {secs:.2} s | {:.0} msg/s ({:.1} MB/s payload) | {} | {reconnects} |",
        received as f64 / secs,
        (received * bytes as u64) as f64 / secs / 1e6,
        sent - received
    );
}

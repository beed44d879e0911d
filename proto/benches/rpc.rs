//! One channel's round trip in one process: `RpcClient::call` of a `Ping` over a
//! socketpair to `rpc::serve`, which answers at once. What every hop between two workers
//! costs on top of the kernel's own work, without the processes. Prints the median and
//! p99 µs per call at one caller, and calls/s with 32 callers, each over 5 rounds.
//!
//! Run: `cargo bench -p nl2sh-proto --bench rpc` (about 15 s).

use std::time::{Duration, Instant};

use nl2sh_proto::channels::{StoreRequest, StoreResponse};
use nl2sh_proto::rpc::{self, RpcClient};
use nl2sh_proto::topology::{pair, NetdApprovald};

const WARMUP: usize = 2_000;
const CALLS: usize = 20_000;
const ROUNDS: usize = 5;

async fn client() -> RpcClient<NetdApprovald> {
    let (asker, answerer) = pair::<NetdApprovald>().expect("socketpair");
    tokio::spawn(rpc::serve(answerer, |req: StoreRequest| async move {
        match req {
            StoreRequest::Ping => Ok(StoreResponse::Pong),
            other => Err(rpc::OutOfState(format!("{other:?}"))),
        }
    }));
    RpcClient::start(asker).await.expect("handshake").0
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let client = client().await;
        for _ in 0..WARMUP {
            client.call(&StoreRequest::Ping).await.expect("ping");
        }
        let mut medians = Vec::new();
        let mut p99s = Vec::new();
        let mut rates = Vec::new();
        for _ in 0..ROUNDS {
            let mut took = Vec::with_capacity(CALLS);
            for _ in 0..CALLS {
                let start = Instant::now();
                client.call(&StoreRequest::Ping).await.expect("ping");
                took.push(start.elapsed());
            }
            took.sort_unstable();
            medians.push(took[CALLS / 2]);
            p99s.push(took[CALLS * 99 / 100]);

            let start = Instant::now();
            let callers: Vec<_> = (0..32)
                .map(|_| {
                    let c = client.clone();
                    tokio::spawn(async move {
                        for _ in 0..CALLS / 32 {
                            c.call(&StoreRequest::Ping).await.expect("ping");
                        }
                    })
                })
                .collect();
            for c in callers {
                c.await.expect("caller");
            }
            rates.push((CALLS / 32 * 32) as f64 / start.elapsed().as_secs_f64());
        }
        let mid = |v: &mut Vec<Duration>| {
            v.sort_unstable();
            v[v.len() / 2].as_secs_f64() * 1e6
        };
        rates.sort_by(f64::total_cmp);
        println!(
            "rpc round trip, one process, current-thread runtime: 1 caller median {:.1} µs, p99 {:.1} µs; 32 callers {:.0} calls/s (medians of {ROUNDS} rounds)",
            mid(&mut medians),
            mid(&mut p99s),
            rates[ROUNDS / 2]
        );
    });
}

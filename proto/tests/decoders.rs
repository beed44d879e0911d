//! Every channel's decoders fed random, truncated and mutated bytes: each must return an
//! error or a value, never panic, and never accept trailing bytes.

use nl2sh_proto::channels::{
    ApprovalId, AuthorityRequest, AuthorityResponse, CallId, CallOrigin, CliRequest, CliResponse,
    ControlRequest, ControlResponse, Correlation, ExecutorRequest, ExecutorResponse, FromWorker,
    InvokeRequest, SandboxCall, SandboxPayload, SandboxPlan, StoreRequest, StoreResponse,
};
use nl2sh_proto::frame::{decode, encode, Wire};
use nl2sh_proto::handshake::Hello;

/// xorshift: deterministic breadth without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn hammer<T: Wire + std::fmt::Debug>(seed_frame: Vec<u8>, rng: &mut Rng) {
    let body = &seed_frame[4..];
    // The valid frame decodes; every truncation of it fails.
    assert!(
        decode::<T>(body).is_ok(),
        "{}: seed frame does not decode",
        T::NAME
    );
    for cut in 0..body.len() {
        assert!(
            decode::<T>(&body[..cut]).is_err(),
            "{}: truncated frame accepted",
            T::NAME
        );
    }
    // Trailing bytes are refused.
    let mut longer = body.to_vec();
    longer.push(0);
    assert!(
        decode::<T>(&longer).is_err(),
        "{}: trailing byte accepted",
        T::NAME
    );
    // Mutations and pure noise: any result but a panic.
    for _ in 0..2000 {
        let mut m = body.to_vec();
        for _ in 0..(1 + rng.next() % 4) {
            let i = (rng.next() as usize) % m.len();
            m[i] = rng.next() as u8;
        }
        let _ = decode::<T>(&m);
        let n = (rng.next() % 96) as usize;
        let _ = decode::<T>(&rng.bytes(n));
    }
}

#[test]
fn every_decoder_survives_hostile_bytes() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let invoke = InvokeRequest {
        correlation: Correlation(9),
        origin: CallOrigin::McpHttp,
        task: None,
        after_reading: Default::default(),
        client: None,
        tool: "shell.exec".into(),
        arguments: r#"{"command":"ls"}"#.into(),
    };
    hammer::<ExecutorRequest>(
        encode(1, &ExecutorRequest::Invoke(invoke)).unwrap(),
        &mut rng,
    );
    hammer::<ExecutorResponse>(
        encode(1, &ExecutorResponse::Cancelled { found: true }).unwrap(),
        &mut rng,
    );
    hammer::<StoreRequest>(encode(1, &StoreRequest::Ping).unwrap(), &mut rng);
    hammer::<StoreResponse>(encode(1, &StoreResponse::Pong).unwrap(), &mut rng);
    hammer::<AuthorityRequest>(
        encode(1, &AuthorityRequest::Withdraw { call_id: CallId(3) }).unwrap(),
        &mut rng,
    );
    hammer::<AuthorityResponse>(encode(1, &AuthorityResponse::Recorded).unwrap(), &mut rng);
    hammer::<CliRequest>(
        encode(
            1,
            &CliRequest::Approve {
                id: ApprovalId("abcdef".into()),
                phrase: Some("approve critical abcdef".into()),
            },
        )
        .unwrap(),
        &mut rng,
    );
    hammer::<CliResponse>(encode(1, &CliResponse::Done).unwrap(), &mut rng);
    hammer::<ControlRequest>(
        encode(1, &ControlRequest::Drain { grace_ms: 5 }).unwrap(),
        &mut rng,
    );
    hammer::<FromWorker>(
        encode(
            1,
            &FromWorker::Answer(ControlResponse::Refused("no".into())),
        )
        .unwrap(),
        &mut rng,
    );
    hammer::<SandboxPlan>(
        encode(
            0,
            &SandboxPlan {
                uid: nl2sh_proto::channels::Uid(65534),
                gid: nl2sh_proto::channels::Gid(65534),
                masks: vec!["/etc/shadow".into()],
                scratch_bytes: 1 << 20,
                limits: nl2sh_proto::config::Config::default().sandbox_limits(),
                cgroup_procs: Vec::new(),
            },
        )
        .unwrap(),
        &mut rng,
    );
    hammer::<SandboxCall>(
        encode(
            0,
            &SandboxCall {
                cwd: Some("/".into()),
                path_var: Some("/usr/bin:/bin".into()),
                payload: SandboxPayload::Exec {
                    argv: vec!["/bin/sh".into(), "-c".into(), "true".into()],
                },
            },
        )
        .unwrap(),
        &mut rng,
    );
    let hello = Hello {
        magic: nl2sh_proto::handshake::MAGIC,
        version: nl2sh_proto::handshake::PROTOCOL_VERSION,
        channel: nl2sh_proto::handshake::ChannelKind::NetdExecutor,
        role: nl2sh_proto::handshake::Role::Netd,
    };
    hammer::<Hello>(encode(0, &hello).unwrap(), &mut rng);
}

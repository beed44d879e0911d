//! Every channel decoder (and the sandbox plan and call, and the handshake) fed arbitrary bytes:
//! it may refuse them, it must never panic, and what it accepts must encode again and
//! decode to a message that encodes the same way. (bincode's varints accept non-minimal
//! forms, so the accepted bytes need not be canonical; nothing hashes frames.)
#![no_main]

use libfuzzer_sys::fuzz_target;
use nl2sh_proto::channels::{
    AuthorityRequest, AuthorityResponse, CliRequest, CliResponse, ControlRequest, ExecutorRequest,
    ExecutorResponse, FromWorker, SandboxCall, SandboxPlan, StoreRequest, StoreResponse,
};
use nl2sh_proto::frame::{decode, encode, Wire};
use nl2sh_proto::handshake::Hello;

fn check<T: Wire>(bytes: &[u8]) {
    if let Ok((id, message)) = decode::<T>(bytes) {
        let again = encode(id, &message).expect("an accepted message encodes");
        let (id2, message2) = decode::<T>(&again[4..]).expect("our own encoding decodes");
        assert_eq!(id, id2);
        let third = encode(id2, &message2).expect("encodes");
        assert_eq!(again, third, "{} does not round-trip", T::NAME);
    }
}

fuzz_target!(|data: &[u8]| {
    // The first byte picks the decoder, so each one sees the whole corpus.
    let Some((which, bytes)) = data.split_first() else {
        return;
    };
    match which % 14 {
        0 => check::<ControlRequest>(bytes),
        1 => check::<FromWorker>(bytes),
        2 => check::<ExecutorRequest>(bytes),
        3 => check::<ExecutorResponse>(bytes),
        4 => check::<StoreRequest>(bytes),
        5 => check::<StoreResponse>(bytes),
        6 => check::<AuthorityRequest>(bytes),
        7 => check::<AuthorityResponse>(bytes),
        8 => check::<CliRequest>(bytes),
        9 => check::<CliResponse>(bytes),
        10 => check::<SandboxPlan>(bytes),
        11 => check::<Hello>(bytes),
        12 => check::<SandboxCall>(bytes),
        _ => {
            // A frame as it arrives on a socket: length prefix included.
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("runtime");
            rt.block_on(async {
                let mut input = bytes;
                let _ = nl2sh_proto::frame::read_frame::<ExecutorRequest, _>(&mut input).await;
            });
        }
    }
});

//! An exclusive `flock` taken with a bounded wait: the state directory's lock, the
//! service's control lock and a configuration edit's lock all wait the same way.

use std::fs::File;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// Take an exclusive `flock` on `file`, trying again every `poll` for up to `wait`. On
/// failure the file comes back with why (`EWOULDBLOCK`: still held by another).
pub fn lock_exclusive_within(
    mut file: File,
    wait: Duration,
    poll: Duration,
) -> Result<Flock<File>, (File, Errno)> {
    let deadline = Instant::now() + wait;
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => return Ok(lock),
            Err((back, Errno::EWOULDBLOCK)) if Instant::now() < deadline => {
                file = back;
                std::thread::sleep(poll);
            }
            Err(failed) => return Err(failed),
        }
    }
}

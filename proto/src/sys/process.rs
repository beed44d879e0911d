//! This process's capability sets: what proto's thread priorities ask (may it raise a
//! thread's priority?) and what a worker that confines itself checks are empty before it
//! does (`nl2sh_http_worker::confine`, which asks the kernel the rest about itself in its
//! own `sys`).

use std::io;

/// The capability sets of this thread, 64 bits each.
#[derive(Debug, Clone, Copy)]
pub struct Capabilities {
    pub effective: u64,
    pub permitted: u64,
}

/// `struct __user_cap_header_struct` of `<linux/capability.h>`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct` of `<linux/capability.h>`.
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`: two data structs, 64 capabilities.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// Read this thread's capability sets (`capget`; libc has no wrapper).
pub fn capabilities() -> io::Result<Capabilities> {
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capget reads the header we own and, for version 3, writes exactly two
    // data structs into the array we own; both outlive the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut CapHeader,
            data.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let wide = |low: u32, high: u32| u64::from(low) | (u64::from(high) << 32);
    Ok(Capabilities {
        effective: wide(data[0].effective, data[1].effective),
        permitted: wide(data[0].permitted, data[1].permitted),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_its_own_capabilities() {
        let caps = capabilities().unwrap();
        if nix::unistd::geteuid().is_root() {
            // Root (outside a user namespace that strips it) holds some.
            assert_ne!(caps.permitted, 0, "{caps:?}");
        }
        assert_eq!(caps.effective & !caps.permitted, 0, "{caps:?}");
    }
}

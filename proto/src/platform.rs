//! What platform this is, decided in one place: Android is recognised at run time by its
//! build properties (no Android build target exists here; docs/TESTING.md, "Android without an Android device"), so one binary
//! serves both and tests can present an Android profile with stand-in programs.

use std::path::Path;

/// The file whose presence means Android.
pub const ANDROID_MARKER: &str = "/system/build.prop";

/// Whether this device runs Android.
pub fn is_android() -> bool {
    Path::new(ANDROID_MARKER).exists()
}

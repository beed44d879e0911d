//! One log line format for every process of the tree, so interleaved stderr says who spoke.

use std::fmt;

use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

pub struct RoleFormat {
    role: &'static str,
    pid: u32,
}

impl RoleFormat {
    pub fn new(role: &'static str) -> Self {
        Self {
            role,
            pid: std::process::id(),
        }
    }
}

impl<S, N> FormatEvent<S, N> for RoleFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        SystemTime.format_time(&mut writer)?;
        write!(
            writer,
            " {:>5} nl2sh-{}[{}]: ",
            event.metadata().level(),
            self.role,
            self.pid
        )?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

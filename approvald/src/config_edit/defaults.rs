//! What `get` shows for a key the file does not set: the value the program uses.

use std::path::Path;

use super::Named;

/// The value the program uses when `named` is absent.
pub(super) fn default_of(named: &Named, path: &Path) -> Option<String> {
    use nl2sh_proto::config::*;
    let defaults = Config::default();
    Some(match (named.table, named.spec.name) {
        (None, "protocol_auto_approve" | "protocol_start_with_service") => "false".into(),
        (None, "protocol_service_port") => DEFAULT_PROTOCOL_PORT.to_string(),
        (None, "state_dir") => state_dir(&defaults, &absolute(path)).display().to_string(),
        (None, "netd_uid") => defaults.netd_ids().0.to_string(),
        (None, "netd_gid") => defaults.netd_ids().1.to_string(),
        (None, "sandbox_uid_base") => defaults.sandbox_uids().0.to_string(),
        (None, "sandbox_uid_count") => defaults.sandbox_uids().1.to_string(),
        (None, "sandbox_max_processes") => defaults.sandbox_limits().processes.to_string(),
        (None, "sandbox_memory_mib") => (defaults.sandbox_limits().memory_bytes >> 20).to_string(),
        (None, "sandbox_cpu_secs") => defaults.sandbox_limits().cpu_secs.to_string(),
        (None, "sandbox_total_memory_mib") => {
            (defaults.sandbox_ceiling().memory_bytes >> 20).to_string()
        }
        (None, "sandbox_total_processes") => defaults.sandbox_ceiling().processes.to_string(),
        (None, "approval_policy") => ApprovalPolicy::default().as_str().into(),
        (None, "approval_timeout_secs") => defaults.approval_timeout().as_secs().to_string(),
        (None, "approval_grants") => "[]".into(),
        (None, "audit_max_rows") => DEFAULT_AUDIT_MAX_ROWS.to_string(),
        (None, "audit_max_bytes") => DEFAULT_AUDIT_MAX_BYTES.to_string(),
        (None, "web_host") => DEFAULT_WEB_HOST.into(),
        (None, "web_port") => DEFAULT_WEB_PORT.to_string(),
        (None, "web_allow_insecure_http") => "false".into(),
        (None, "web_uid") => defaults.web_ids().0.to_string(),
        (None, "web_gid") => defaults.web_ids().1.to_string(),
        (None, "approval_notifications") => "true".into(),
        (Some(_), "base_url") => DEFAULT_MODEL_BASE_URL.into(),
        (Some(_), "api_key_env") => DEFAULT_MODEL_API_KEY_ENV.into(),
        (Some(_), "max_steps") => DEFAULT_MODEL_MAX_STEPS.to_string(),
        (Some(_), "request_timeout_secs") => DEFAULT_MODEL_REQUEST_TIMEOUT_SECS.to_string(),
        _ => return None,
    })
}

//! The Web console's owner channel over a socketpair: logins, session proofs and CSRF
//! tokens, and what a logged-in owner may do (decide, read, save settings through the
//! configuration editor, on a configuration file in the rig's directory).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{summary, Rig};
use nl2sh_approvald::dispatch::{answer_web, serve_web};
use nl2sh_approvald::store::tasks::TaskStore;
use nl2sh_proto::announcement::ConnectionInfo;
use nl2sh_proto::channels::{
    csrf_for, CallId, CallOrigin, CliRequest, CliResponse, ContextId, Decision, OwnerAction,
    OwnerErrorKind, OwnerProof, OwnerRequest, OwnerResponse, RiskLevel, TaskId, TaskRecord,
    TaskState,
};
use nl2sh_proto::limits::{MAX_WEB_LOGIN_FAILURES, WEB_SESSION_TTL};
use nl2sh_proto::rpc::RpcClient;
use nl2sh_proto::secret::Secret;
use nl2sh_proto::state_layout;
use nl2sh_proto::topology::{pair, WebApprovald};

type WebClient = RpcClient<WebApprovald>;

struct Web {
    rig: Rig,
    tasks: Arc<TaskStore>,
    client: WebClient,
}

impl Web {
    async fn new() -> Web {
        let rig = Rig::new().await;
        let tasks = Arc::new(rig.authority.store().tasks(&[]).unwrap());
        let (asker, answerer) = pair::<WebApprovald>().unwrap();
        tokio::spawn(serve_web(
            answerer,
            rig.authority.clone(),
            tasks.clone(),
            rig.sessions.clone(),
        ));
        let (client, _) = WebClient::start(asker).await.unwrap();
        Web { rig, tasks, client }
    }

    async fn call(&self, req: OwnerRequest) -> OwnerResponse {
        self.client.call(&req).await.unwrap()
    }

    /// A code from the CLI, as `nl2sh web login` gets it.
    async fn code(&self) -> Secret {
        match self.rig.cli(CliRequest::WebLogin).await {
            CliResponse::LoginCode { code, valid_secs } => {
                assert_eq!(valid_secs, 120);
                code
            }
            other => panic!("expected a code, got {other:?}"),
        }
    }

    /// A logged-in session's proof, with its CSRF token.
    async fn login(&self) -> OwnerProof {
        let code = self.code().await;
        match self.call(OwnerRequest::RedeemLogin { code }).await {
            OwnerResponse::LoggedIn {
                session,
                csrf,
                expires_in_secs,
            } => {
                assert_eq!(csrf, csrf_for(&session));
                assert_eq!(expires_in_secs, WEB_SESSION_TTL.as_secs());
                OwnerProof {
                    session,
                    csrf: Some(csrf),
                }
            }
            other => panic!("expected a session, got {other:?}"),
        }
    }

    async fn act(&self, proof: &OwnerProof, action: OwnerAction) -> OwnerResponse {
        self.call(OwnerRequest::Act {
            proof: proof.clone(),
            action,
        })
        .await
    }
}

fn without_csrf(proof: &OwnerProof) -> OwnerProof {
    OwnerProof {
        session: proof.session.clone(),
        csrf: None,
    }
}

#[track_caller]
fn refused_kind(resp: OwnerResponse) -> OwnerErrorKind {
    match resp {
        OwnerResponse::Refused { kind, message } => {
            assert!(!message.is_empty());
            kind
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_code_logs_in_once() {
    let web = Web::new().await;
    let code = web.code().await;
    let OwnerResponse::LoggedIn { session, csrf, .. } = web
        .call(OwnerRequest::RedeemLogin { code: code.clone() })
        .await
    else {
        panic!("expected a session");
    };
    let proof = OwnerProof {
        session,
        csrf: Some(csrf),
    };
    assert!(matches!(
        web.call(OwnerRequest::Check {
            proof: proof.clone()
        })
        .await,
        OwnerResponse::Owner { expires_in_secs } if expires_in_secs <= WEB_SESSION_TTL.as_secs()
            && expires_in_secs > WEB_SESSION_TTL.as_secs() - 60
    ));
    // Used: refused as any wrong code.
    assert_eq!(
        refused_kind(web.call(OwnerRequest::RedeemLogin { code }).await),
        OwnerErrorKind::NotLoggedIn
    );
    // The session it gave is still good.
    assert!(matches!(
        web.call(OwnerRequest::Check { proof }).await,
        OwnerResponse::Owner { .. }
    ));
}

#[tokio::test]
async fn a_wrong_code_is_not_logged_in() {
    let web = Web::new().await;
    let _real = web.code().await;
    for wrong in [
        "0".repeat(64),
        "nope".into(),
        String::new(),
        "x".repeat(100_000),
    ] {
        assert_eq!(
            refused_kind(
                web.call(OwnerRequest::RedeemLogin {
                    code: Secret::new(wrong)
                })
                .await
            ),
            OwnerErrorKind::NotLoggedIn
        );
    }
}

#[tokio::test]
async fn failed_logins_past_the_limit_are_rate_limited_but_the_owners_code_works() {
    let web = Web::new().await;
    let code = web.code().await;
    let wrong = Secret::new("f".repeat(64));
    for _ in 0..MAX_WEB_LOGIN_FAILURES {
        assert_eq!(
            refused_kind(
                web.call(OwnerRequest::RedeemLogin {
                    code: wrong.clone()
                })
                .await
            ),
            OwnerErrorKind::NotLoggedIn
        );
    }
    assert_eq!(
        refused_kind(web.call(OwnerRequest::RedeemLogin { code: wrong }).await),
        OwnerErrorKind::RateLimited
    );
    assert!(matches!(
        web.call(OwnerRequest::RedeemLogin { code }).await,
        OwnerResponse::LoggedIn { .. }
    ));
}

#[tokio::test]
async fn nothing_is_done_without_a_session() {
    let web = Web::new().await;
    let _real = web.login().await;
    let stranger = Secret::new("a".repeat(64));
    let proof = OwnerProof {
        csrf: Some(csrf_for(&stranger)),
        session: stranger,
    };
    for action in [
        OwnerAction::ListPending,
        OwnerAction::Grants,
        OwnerAction::Audit { limit: 10 },
        OwnerAction::Settings,
        OwnerAction::RotateToken,
        OwnerAction::SaveSetting {
            key: "protocol_auto_approve".into(),
            value: Secret::new("true".into()),
        },
    ] {
        assert_eq!(
            refused_kind(web.act(&proof, action).await),
            OwnerErrorKind::NotLoggedIn
        );
    }
    assert_eq!(
        refused_kind(web.call(OwnerRequest::Check { proof }).await),
        OwnerErrorKind::NotLoggedIn
    );
    // Nothing was saved: the configuration file was never written.
    assert!(!web.rig.config.exists());
}

#[tokio::test]
async fn pending_requests_are_listed_and_decided_with_the_csrf_token() {
    let web = Web::new().await;
    let proof = web.login().await;
    let waiting = web.rig.decide_later(summary(1, RiskLevel::Medium));
    web.rig.wait_pending(1).await;
    // Reading needs only the session.
    let list = match web
        .act(&without_csrf(&proof), OwnerAction::ListPending)
        .await
    {
        OwnerResponse::Pending(list) => list,
        other => panic!("{other:?}"),
    };
    assert_eq!(list, web.rig.pending().await);
    let id = list[0].id.clone();
    // A decision without the token (a page of another origin cannot know it) is refused
    // and leaves the request pending.
    let decide = |approve| OwnerAction::Decide {
        id: id.clone(),
        approve,
        phrase: None,
    };
    assert_eq!(
        refused_kind(web.act(&without_csrf(&proof), decide(true)).await),
        OwnerErrorKind::BadCsrf
    );
    let wrong = OwnerProof {
        session: proof.session.clone(),
        csrf: Some(Secret::new("0".repeat(64))),
    };
    assert_eq!(
        refused_kind(web.act(&wrong, decide(true)).await),
        OwnerErrorKind::BadCsrf
    );
    assert_eq!(web.rig.pending().await.len(), 1);
    assert!(matches!(
        web.act(&proof, decide(true)).await,
        OwnerResponse::Done
    ));
    let (decision, reason) = waiting.await.unwrap();
    assert_eq!(decision, Decision::Approved);
    assert_eq!(
        reason,
        format!("approved in the Web console (request {id})")
    );
    // Decided: gone, as for the CLI.
    assert_eq!(
        refused_kind(web.act(&proof, decide(false)).await),
        OwnerErrorKind::NoSuchRequest
    );
    // The audit says who decided, in the reason.
    let rows = web.rig.rows().await;
    assert!(rows
        .iter()
        .any(|r| r.record.reason.as_deref() == Some(reason.as_str())));
}

#[tokio::test]
async fn reject_by_origin_needs_the_csrf_token_and_says_where() {
    let web = Web::new().await;
    let proof = web.login().await;
    let mut remote = summary(1, RiskLevel::Medium);
    remote.origin = CallOrigin::McpHttp;
    let mut local = summary(2, RiskLevel::Medium);
    local.origin = CallOrigin::McpStdio;
    let flood = web.rig.decide_later(remote);
    let other = web.rig.decide_later(local);
    web.rig.wait_pending(2).await;
    let reject = || OwnerAction::RejectOrigin {
        origin: CallOrigin::McpHttp,
    };
    assert_eq!(
        refused_kind(web.act(&without_csrf(&proof), reject()).await),
        OwnerErrorKind::BadCsrf
    );
    assert_eq!(web.rig.pending().await.len(), 2);
    let rejected = match web.act(&proof, reject()).await {
        OwnerResponse::Rejected(list) => list,
        other => panic!("{other:?}"),
    };
    assert_eq!(rejected.len(), 1);
    assert_eq!(rejected[0].call_id, CallId(1));
    let (decision, reason) = flood.await.unwrap();
    assert_eq!(decision, Decision::Rejected);
    assert_eq!(
        reason,
        format!(
            "needs local approval: rejected in the Web console, with every request from \
             mcp_http (request {})",
            rejected[0].id
        )
    );
    let left = web.rig.pending().await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].call_id, CallId(2));
    web.rig.reject(&left[0].id.0).await.unwrap();
    assert_eq!(other.await.unwrap().0, Decision::Rejected);
}

#[tokio::test]
async fn the_phrase_rules_are_the_clis() {
    let web = Web::new().await;
    let proof = web.login().await;
    let waiting = web.rig.decide_later(summary(1, RiskLevel::Critical));
    let p = web.rig.wait_pending(1).await.remove(0);
    let phrase = p.phrase.clone().unwrap();
    let approve = |phrase: Option<&str>| OwnerAction::Decide {
        id: p.id.clone(),
        approve: true,
        phrase: phrase.map(str::to_owned),
    };
    assert_eq!(
        refused_kind(web.act(&proof, approve(None)).await),
        OwnerErrorKind::PhraseRequired
    );
    assert_eq!(
        refused_kind(
            web.act(&proof, approve(Some("approve critical nope")))
                .await
        ),
        OwnerErrorKind::WrongPhrase
    );
    assert_eq!(
        refused_kind(
            web.act(
                &proof,
                OwnerAction::Decide {
                    id: "zzzzzz".into(),
                    approve: true,
                    phrase: None
                }
            )
            .await
        ),
        OwnerErrorKind::NoSuchRequest
    );
    assert_eq!(
        refused_kind(
            web.act(
                &proof,
                OwnerAction::Decide {
                    id: "z".repeat(10_000).as_str().into(),
                    approve: false,
                    phrase: None
                }
            )
            .await
        ),
        OwnerErrorKind::Invalid
    );
    // Rejecting needs no phrase.
    assert!(matches!(
        web.act(
            &proof,
            OwnerAction::Decide {
                id: p.id.clone(),
                approve: false,
                phrase: None
            }
        )
        .await,
        OwnerResponse::Done
    ));
    let (decision, reason) = waiting.await.unwrap();
    assert_eq!(decision, Decision::Rejected);
    assert!(reason.contains("rejected in the Web console"), "{reason}");
    assert!(!phrase.is_empty());
}

#[tokio::test]
async fn settings_reach_the_editor_only_with_the_csrf_token() {
    let web = Web::new().await;
    let proof = web.login().await;
    let save = || OwnerAction::SaveSetting {
        key: "protocol_service_port".into(),
        value: Secret::new("9000".into()),
    };
    assert_eq!(
        refused_kind(web.act(&without_csrf(&proof), save()).await),
        OwnerErrorKind::BadCsrf
    );
    assert_eq!(
        refused_kind(
            web.act(&without_csrf(&proof), OwnerAction::RotateToken)
                .await
        ),
        OwnerErrorKind::BadCsrf
    );
    assert!(!web.rig.config.exists());
    // Saved as `nl2sh config set` saves it, and said so (nothing runs for this
    // configuration here: a port applies at the next start).
    let config = web.rig.config.clone();
    assert!(matches!(
        web.act(&proof, save()).await,
        OwnerResponse::Saved { message, restart_needed: true }
            if message.starts_with(&format!("Saved protocol_service_port = 9000 in {}.", config.display()))
                && message.ends_with(&format!(
                    "(a running service needs `{}`).",
                    nl2sh_proto::hint::service_restart(&config)
                ))
    ));
    // A rotated token is answered once, for the owner to copy; the file holds it.
    let OwnerResponse::TokenRotated { token, message } =
        web.act(&proof, OwnerAction::RotateToken).await
    else {
        panic!("the token was not rotated")
    };
    assert!(
        message.starts_with("Saved protocol_token (value not shown) in "),
        "{message}"
    );
    assert!(!message.contains(token.expose()), "{message}");
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains(token.expose()), "{text}");
    assert!(
        text.starts_with("protocol_service_port = 9000\nprotocol_token = \""),
        "{text}"
    );
    // Reading them needs only the session; a credential is only said to be set.
    let OwnerResponse::Settings(list) = web.act(&without_csrf(&proof), OwnerAction::Settings).await
    else {
        panic!("no settings")
    };
    let port = list
        .iter()
        .find(|s| s.key == "protocol_service_port")
        .unwrap();
    assert_eq!((port.value.as_str(), port.set), ("9000", true));
    let token = list.iter().find(|s| s.key == "protocol_token").unwrap();
    assert_eq!(
        (token.value.as_str(), token.set, token.credential),
        ("set", true, true)
    );
    // Keys and values out of any bound never reach it.
    for (key, value) in [
        (String::new(), "1".to_string()),
        ("k".repeat(129), "1".into()),
        ("protocol_token".into(), "v".repeat(64 * 1024)),
    ] {
        assert_eq!(
            refused_kind(
                web.act(
                    &proof,
                    OwnerAction::SaveSetting {
                        key,
                        value: Secret::new(value)
                    }
                )
                .await
            ),
            OwnerErrorKind::Invalid
        );
    }
    assert_eq!(std::fs::read_to_string(&config).unwrap(), text);
}

/// approvald runs inside the protocol process its supervisor announced: a saved setting's
/// message names that process, as `config set` would.
#[tokio::test]
async fn a_saved_setting_names_the_process_approvald_runs_in() {
    let web = Web::new().await;
    let proof = web.login().await;
    let mut info: ConnectionInfo = serde_json::from_value(serde_json::json!({
        "pid": 4242, "start_time": 1, "uid": 0, "config_path": "/c.toml",
        "transport": "service", "mcp_url": null, "a2a_url": null,
        "agent_card_url": null, "token": null,
    }))
    .unwrap();
    let record = state_layout::CONNECTION_JSON.in_dir(web.rig.dir.path());
    std::fs::write(&record, serde_json::to_vec(&info).unwrap()).unwrap();
    let save = |key: &str, value: &str| OwnerAction::SaveSetting {
        key: key.into(),
        value: Secret::new(value.into()),
    };
    assert!(matches!(
        web.act(&proof, save("protocol_service_port", "9000")).await,
        OwnerResponse::Saved { message, restart_needed: true }
            if message.ends_with(&format!(
                "The running service (pid 4242) keeps the old value until it restarts: {}",
                nl2sh_proto::hint::service_restart(&web.rig.config)
            ))
    ));
    info.pid = 4343;
    std::fs::write(&record, serde_json::to_vec(&info).unwrap()).unwrap();
    assert!(matches!(
        web.act(&proof, save("protocol_auto_approve", "false")).await,
        OwnerResponse::Saved { message, restart_needed: false }
            if message.ends_with(
                "The running protocol process (pid 4343) applies it from its next approval \
                 decision."
            )
    ));
}

/// The console's one form: every value checked, then all saved in one write, or none.
#[tokio::test]
async fn one_save_writes_every_setting_or_none() {
    let web = Web::new().await;
    let proof = web.login().await;
    let values = |pairs: &[(&str, &str)]| OwnerAction::SaveSettings {
        values: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Secret::new(v.to_string())))
            .collect(),
    };
    // One bad value refuses the whole form; the file is not even created.
    for bad in [
        values(&[
            ("protocol_service_port", "9000"),
            ("protocol_auto_approve", "perhaps"),
        ]),
        values(&[("protocol_service_port", "9000"), ("netd_uid", "0")]),
        values(&[
            ("protocol_service_port", "9000"),
            ("protocol_service_port", "9001"),
        ]),
        values(&[]),
    ] {
        assert_eq!(
            refused_kind(web.act(&proof, bad).await),
            OwnerErrorKind::Invalid
        );
    }
    assert!(!web.rig.config.exists());
    // Without the CSRF token: nothing.
    assert_eq!(
        refused_kind(
            web.act(
                &without_csrf(&proof),
                values(&[("protocol_auto_approve", "true")])
            )
            .await
        ),
        OwnerErrorKind::BadCsrf
    );
    let answer = web
        .act(
            &proof,
            values(&[
                ("protocol_service_port", "9000"),
                ("protocol_auto_approve", "true"),
                ("approval_notifications", "false"),
            ]),
        )
        .await;
    assert!(
        matches!(&answer, OwnerResponse::Saved { message, restart_needed: true }
            if message.starts_with("Saved protocol_service_port = 9000, protocol_auto_approve = true, approval_notifications = false in ")),
        "{answer:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&web.rig.config).unwrap(),
        "protocol_service_port = 9000\nprotocol_auto_approve = true\napproval_notifications = false\n"
    );
    // Live settings alone need no restart.
    assert!(matches!(
        web.act(&proof, values(&[("protocol_auto_approve", "false")]))
            .await,
        OwnerResponse::Saved {
            restart_needed: false,
            ..
        }
    ));
}

/// "Restart now" reaches the supervisor only from a session with its CSRF token, and only
/// for the managed service.
#[tokio::test]
async fn a_restart_is_asked_for_the_managed_service_only_with_the_csrf_token() {
    let web = Web::new().await;
    let proof = web.login().await;
    let record = state_layout::CONNECTION_JSON.in_dir(web.rig.dir.path());
    let announce = |transport: &str| {
        let info = serde_json::json!({
            "pid": 4242, "start_time": 1, "uid": 0, "config_path": "/c.toml",
            "transport": transport, "mcp_url": null, "a2a_url": null,
            "agent_card_url": null, "token": null,
        });
        std::fs::write(&record, serde_json::to_vec(&info).unwrap()).unwrap();
    };
    let asked = || {
        let sessions = web.rig.sessions.clone();
        async move {
            tokio::time::timeout(Duration::from_millis(200), sessions.restart_requested())
                .await
                .is_ok()
        }
    };
    announce("service");
    assert_eq!(
        refused_kind(web.act(&without_csrf(&proof), OwnerAction::Restart).await),
        OwnerErrorKind::BadCsrf
    );
    assert!(!asked().await, "asked without the CSRF token");
    announce("console");
    assert_eq!(
        refused_kind(web.act(&proof, OwnerAction::Restart).await),
        OwnerErrorKind::Invalid
    );
    assert!(!asked().await, "asked for a process started by hand");
    // A saved file that would not start the service: said, and nothing restarts.
    announce("service");
    std::fs::write(&web.rig.config, "protocol_start_with_service = false\n").unwrap();
    assert!(matches!(
        web.act(&proof, OwnerAction::Restart).await,
        OwnerResponse::Refused { kind: OwnerErrorKind::Invalid, message }
            if message.contains("protocol_start_with_service is off")
    ));
    std::fs::write(
        &web.rig.config,
        "protocol_start_with_service = true\nnetd_uid = 0\n",
    )
    .unwrap();
    assert!(matches!(
        web.act(&proof, OwnerAction::Restart).await,
        OwnerResponse::Refused { kind: OwnerErrorKind::Invalid, message }
            if message.contains("would not start")
    ));
    assert!(!asked().await, "asked for a restart that cannot start");
    std::fs::write(&web.rig.config, "protocol_start_with_service = true\n").unwrap();
    assert!(matches!(
        web.act(&proof, OwnerAction::Restart).await,
        OwnerResponse::Done
    ));
    assert!(asked().await, "the restart was not asked for");
    // A token the file does not set is said as what runs: a generated one.
    let info = serde_json::json!({
        "pid": 4242, "start_time": 1, "uid": 0, "config_path": "/c.toml",
        "transport": "service", "mcp_url": "http://127.0.0.1:1/mcp", "a2a_url": null,
        "agent_card_url": null, "token": "t".repeat(64), "token_source": "generated",
    });
    std::fs::write(&record, serde_json::to_vec(&info).unwrap()).unwrap();
    let OwnerResponse::Settings(list) = web.act(&proof, OwnerAction::Settings).await else {
        panic!("no settings")
    };
    let token = list.iter().find(|s| s.key == "protocol_token").unwrap();
    assert_eq!(
        (token.value.as_str(), token.set),
        ("generated, rotates on restart", false)
    );
}

#[tokio::test]
async fn the_editors_refusals_are_mapped() {
    let web = Web::new().await;
    let proof = web.login().await;
    let save = || OwnerAction::SaveSetting {
        key: "protocol_service_port".into(),
        value: Secret::new("no".into()),
    };
    // A value the editor refuses: invalid, in its words.
    assert!(matches!(
        web.act(&proof, save()).await,
        OwnerResponse::Refused { kind: OwnerErrorKind::Invalid, message }
            if message == "protocol_service_port takes a whole number, not \"no\""
    ));
    // A file it cannot read: unavailable, for saving, rotating and reading alike.
    std::fs::create_dir(&web.rig.config).unwrap();
    assert!(matches!(
        web.act(&proof, OwnerAction::SaveSetting {
            key: "protocol_service_port".into(),
            value: Secret::new("9000".into()),
        }).await,
        OwnerResponse::Refused { kind: OwnerErrorKind::Unavailable, message }
            if message.ends_with("is not a regular file")
    ));
    assert_eq!(
        refused_kind(web.act(&proof, OwnerAction::RotateToken).await),
        OwnerErrorKind::Unavailable
    );
    assert_eq!(
        refused_kind(web.act(&proof, OwnerAction::Settings).await),
        OwnerErrorKind::Unavailable
    );
}

#[tokio::test]
async fn logout_needs_the_token_and_ends_the_session() {
    let web = Web::new().await;
    let proof = web.login().await;
    let other = web.login().await;
    assert_eq!(
        refused_kind(
            web.call(OwnerRequest::Logout {
                proof: without_csrf(&proof)
            })
            .await
        ),
        OwnerErrorKind::BadCsrf
    );
    assert!(matches!(
        web.call(OwnerRequest::Logout {
            proof: proof.clone()
        })
        .await,
        OwnerResponse::Done
    ));
    assert_eq!(
        refused_kind(web.act(&proof, OwnerAction::ListPending).await),
        OwnerErrorKind::NotLoggedIn
    );
    assert!(matches!(
        web.act(&other, OwnerAction::ListPending).await,
        OwnerResponse::Pending(_)
    ));
    // `nl2sh web logout --all` ends the rest.
    assert!(matches!(
        web.rig.cli(CliRequest::WebLogoutAll).await,
        CliResponse::LoggedOut { sessions: 1 }
    ));
    assert_eq!(
        refused_kind(web.act(&other, OwnerAction::ListPending).await),
        OwnerErrorKind::NotLoggedIn
    );
}

#[tokio::test]
async fn grants_tasks_and_the_audit_can_be_read() {
    let web = Web::new().await;
    let proof = without_csrf(&web.login().await);
    web.rig.write_config(
        "[[approval_grants]]\ntool = 'shell.exec'\ncommand = ['ls', '**']\nmax_risk = 'high'\n",
    );
    assert_eq!(
        match web.act(&proof, OwnerAction::Grants).await {
            OwnerResponse::Grants(lines) => lines,
            other => panic!("{other:?}"),
        },
        [r#"shell.exec: command ["ls", "**"] (up to high risk)"#]
    );
    web.rig.write_config("approval_policy = 'lenient'\n");
    assert_eq!(
        refused_kind(web.act(&proof, OwnerAction::Grants).await),
        OwnerErrorKind::Unavailable
    );
    std::fs::remove_file(&web.rig.config).unwrap();
    assert!(matches!(
        web.act(&proof, OwnerAction::Grants).await,
        OwnerResponse::Grants(lines) if lines.is_empty()
    ));

    // Tasks: newest first, and a missing one is said so.
    for (i, id) in ["t-old", "t-new"].into_iter().enumerate() {
        let (id, context_id) = (TaskId(id.into()), ContextId("c".into()));
        web.tasks.admit_for_test(id.clone(), context_id.clone());
        let updated_ms = 1_700_000_000_000 + i as i64;
        web.tasks
            .put(TaskRecord {
                document: task_document(&id, &context_id, updated_ms),
                id,
                context_id,
                state: TaskState::Completed,
                updated_ms,
            })
            .await
            .unwrap();
    }
    let listed = |resp| match resp {
        OwnerResponse::Tasks(tasks) => tasks
            .into_iter()
            .map(|t: TaskRecord| t.id.0)
            .collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        listed(web.act(&proof, OwnerAction::Tasks { limit: 0 }).await),
        ["t-new"]
    );
    assert_eq!(
        listed(web.act(&proof, OwnerAction::Tasks { limit: 1000 }).await),
        ["t-new", "t-old"]
    );
    assert!(matches!(
        web.act(&proof, OwnerAction::Task { id: TaskId("t-old".into()) }).await,
        OwnerResponse::Task(t) if t.id.0 == "t-old"
    ));
    assert_eq!(
        refused_kind(
            web.act(
                &proof,
                OwnerAction::Task {
                    id: TaskId("t-none".into())
                }
            )
            .await
        ),
        OwnerErrorKind::NoSuchTask
    );
    assert_eq!(
        refused_kind(
            web.act(
                &proof,
                OwnerAction::Task {
                    id: TaskId(String::new())
                }
            )
            .await
        ),
        OwnerErrorKind::Invalid
    );

    // The audit: newest first, as `protocol audit --json` prints each row, and intact.
    for call_id in 1..=3 {
        let _ = web.rig.decide(summary(call_id, RiskLevel::ReadOnly)).await;
    }
    let rows = match web.act(&proof, OwnerAction::Audit { limit: 2 }).await {
        OwnerResponse::Audit(rows) => rows,
        other => panic!("{other:?}"),
    };
    assert_eq!(rows.len(), 2);
    let rows: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| serde_json::from_str(r).unwrap())
        .collect();
    let stored = web.rig.rows().await;
    assert_eq!(rows[0], stored[stored.len() - 1].to_json());
    assert_eq!(rows[1], stored[stored.len() - 2].to_json());
    assert_eq!(rows[0]["call_id"], 3);
    assert!(matches!(
        web.act(&proof, OwnerAction::Audit { limit: 0 }).await,
        OwnerResponse::Audit(rows) if rows.len() == 1
    ));
    match web.act(&proof, OwnerAction::VerifyAudit).await {
        OwnerResponse::Verified { intact, message } => {
            assert!(intact, "{message}");
            assert!(message.starts_with("audit trail intact: "), "{message}");
            assert!(!message.contains('\n'), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

fn task_document(id: &TaskId, context_id: &ContextId, updated_ms: i64) -> String {
    let time = nl2sh_proto::clock::rfc3339_millis(updated_ms);
    serde_json::json!({
        "id": id.0,
        "contextId": context_id.0,
        "status": {"state": "TASK_STATE_COMPLETED", "timestamp": time},
        "history": [],
        "artifacts": [],
    })
    .to_string()
}

/// Sessions end when their time is up, read on tokio's clock.
#[tokio::test]
async fn a_session_expires() {
    let web = Web::new().await;
    let proof = web.login().await;
    let answer = |req| answer_web(&web.rig.authority, &web.tasks, &web.rig.sessions, req);
    tokio::time::pause();
    tokio::time::advance(WEB_SESSION_TTL - Duration::from_secs(1)).await;
    assert!(matches!(
        answer(OwnerRequest::Check {
            proof: proof.clone()
        })
        .await,
        OwnerResponse::Owner { expires_in_secs: 1 }
    ));
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(
        refused_kind(answer(OwnerRequest::Check { proof }).await),
        OwnerErrorKind::NotLoggedIn
    );
}

/// A console that goes away (even before it greeted) is a peer exiting, not an error.
#[tokio::test]
async fn a_closed_console_channel_ends_serving_cleanly() {
    let rig = Rig::new().await;
    let tasks = Arc::new(rig.authority.store().tasks(&[]).unwrap());
    // Closed before its hello.
    let (asker, answerer) = pair::<WebApprovald>().unwrap();
    drop(asker);
    let served = serve_web(
        answerer,
        rig.authority.clone(),
        tasks.clone(),
        rig.sessions.clone(),
    );
    assert!(served.await.is_ok());
    // Closed after some requests.
    let (asker, answerer) = pair::<WebApprovald>().unwrap();
    let serving = tokio::spawn(serve_web(
        answerer,
        rig.authority.clone(),
        tasks,
        rig.sessions.clone(),
    ));
    let (client, reader) = WebClient::start(asker).await.unwrap();
    assert!(matches!(
        client
            .call(&OwnerRequest::RedeemLogin {
                code: Secret::new("0".repeat(64))
            })
            .await
            .unwrap(),
        OwnerResponse::Refused { .. }
    ));
    drop(client);
    drop(reader);
    assert!(serving.await.unwrap().is_ok());
}

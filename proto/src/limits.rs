//! Limits of the product contract (docs/PROTOCOLS.md, "Limits") and of what crosses a
//! channel (docs/ARCHITECTURE.md, "Where each limit lives"), named once so every process
//! enforces the same value.

use std::time::Duration;

/// HTTP request body for MCP and A2A.
pub const MAX_HTTP_BODY_BYTES: usize = 32 * 1024;
/// MCP tool-call argument JSON.
pub const MAX_ARGUMENT_JSON_BYTES: usize = 16 * 1024;
/// Agent user text (A2A message parts joined, `nl2sh_ask` message).
pub const MAX_AGENT_TEXT_BYTES: usize = 8192;
/// Tool name, UTF-8 bytes.
pub const MAX_TOOL_NAME_BYTES: usize = 128;
/// Task, context and message ids, UTF-8 bytes.
pub const MAX_ID_BYTES: usize = 256;
/// Active tasks, including those waiting for a context or an approval.
pub const MAX_ACTIVE_TASKS: usize = 16;
/// The owner's own tasks (the terminal console's Ask) active at once, apart from the
/// protocol's [`MAX_ACTIVE_TASKS`]: callers holding the token cannot starve the owner.
/// A console runs one goal at a time; this bounds what several consoles can hold.
pub const MAX_OWNER_TASKS: usize = 4;
/// MCP tool calls that reach the executor (`nl2sh_invoke`, `nl2sh_read_screen`) running at
/// once. One more is refused at once as busy, so long calls cannot take every connection
/// netd has (256): cheap requests and the task tools always find room.
pub const MAX_CONCURRENT_TOOL_CALLS: usize = 64;
/// What a caller refused as busy is told to wait before retrying (`Retry-After`).
pub const BUSY_RETRY_AFTER: Duration = Duration::from_secs(1);
/// Pending local approvals, everyone's together.
pub const MAX_PENDING_APPROVALS: usize = 8;
/// Of [`MAX_PENDING_APPROVALS`], the slots only the owner's own sessions (origin
/// `owner_tui`) may take, as [`MAX_OWNER_TASKS`] keeps tasks for them: callers holding
/// the token cannot fill the queue the owner's own Ask needs.
pub const OWNER_RESERVED_APPROVALS: usize = 2;
/// Pending approvals one protocol caller holds at most: half of the slots not reserved
/// for the owner, so a flood over HTTP leaves the local stdio client room, and the other
/// way round. A caller is a way in (HTTP, stdio), not a session: a caller can open new
/// sessions and delegate new tasks at will, and direct and delegated calls of one way in
/// count together.
pub const MAX_PENDING_APPROVALS_PER_CALLER: usize =
    (MAX_PENDING_APPROVALS - OWNER_RESERVED_APPROVALS) / 2;
/// How long a pending approval waits; configurable downward only.
pub const APPROVAL_TIMEOUT: Duration = Duration::from_secs(120);
/// A Web console login code (`nl2sh web login`) is valid this long, once.
pub const WEB_LOGIN_CODE_TTL: Duration = Duration::from_secs(120);
/// A Web console session lasts this long from its login, then the owner logs in again.
pub const WEB_SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// Web console sessions alive at once; a new one beyond ends the oldest.
pub const MAX_WEB_SESSIONS: usize = 16;
/// Login codes waiting to be used at once; a new one beyond ends the oldest.
pub const MAX_WEB_LOGIN_CODES: usize = 8;
/// Failed login attempts allowed per [`WEB_LOGIN_FAILURE_WINDOW`]; past it every attempt
/// is refused until the window passes (a code is 128 random bits, so this only stops
/// a flood from filling the log and the CPU).
pub const MAX_WEB_LOGIN_FAILURES: u32 = 10;
pub const WEB_LOGIN_FAILURE_WINDOW: Duration = Duration::from_secs(60);
/// Request body of the Web console's API.
pub const MAX_WEB_BODY_BYTES: usize = 16 * 1024;
/// One stored task document.
pub const MAX_TASK_DOCUMENT_BYTES: usize = 4 * 1024 * 1024;
/// Bytes of task documents approvald's store answers hold at once, from the read until
/// the answer's frame is written to netd (`GetTask` counts the document, `ListTasks` its
/// page): concurrent reads of large tasks queue instead of each holding its own copies.
pub const MAX_STORE_ANSWER_BYTES_IN_FLIGHT: usize = 4 * MAX_TASK_DOCUMENT_BYTES;
/// Bytes of one request body the built-in Agent sends its model, at most. Before each
/// request the oldest messages of the conversation are shortened (tool outputs replaced
/// by a note of their size, long texts and tool-call arguments cut) until it fits; the
/// system prompt and the task's text never are. A conversation that still does not fit
/// fails its task saying so.
pub const MAX_MODEL_REQUEST_BYTES: usize = 2 * 1024 * 1024;
/// Retained tasks, count.
pub const MAX_RETAINED_TASKS: usize = 200;
/// Retained tasks, total document bytes.
pub const MAX_RETAINED_DOCUMENT_BYTES: usize = 64 * 1024 * 1024;
/// Base64 of one MCP screen image.
pub const MAX_SCREEN_BASE64_BYTES: usize = 3 * 1024 * 1024;
/// Failed tools reported in an Agent result.
pub const MAX_FAILED_TOOLS: usize = 8;
/// Evidence entries in an Agent result, and bytes of output each.
pub const MAX_EVIDENCE_ENTRIES: usize = 64;
pub const MAX_EVIDENCE_OUTPUT_BYTES: usize = 4096;

// ---- What crosses a channel ------------------------------------------------------------
// One table for the bounds of the fields the workers send each other. The sender keeps to
// each (cutting with a visible marker, or refusing the call with a clear error before
// anything is sent); the receiver checks the same bound and treats a violation as a
// hostile peer, fatal to that channel.

/// The rendered action of an approval request or audit row: what the owner approves, so
/// never cut; a longer action is refused before it is sent.
pub const MAX_ACTION_BYTES: usize = 16 * 1024;
/// Outcome summary of an audited call.
pub const MAX_SUMMARY_BYTES: usize = 4 * 1024;
/// Assessment reasons per action, and bytes of each.
pub const MAX_REASONS: usize = 16;
pub const MAX_REASON_BYTES: usize = 1024;

/// Explicit protocol tokens: printable ASCII without spaces, this many characters.
pub const TOKEN_MIN_CHARS: usize = 32;
pub const TOKEN_MAX_CHARS: usize = 256;
/// Generated tokens: 256 bits from the OS random source, hex encoded.
pub const GENERATED_TOKEN_BYTES: usize = 32;

/// Largest frame any channel accepts. It must hold the largest legitimate message:
/// a stored task document (4 MiB) or a screen image (3 MiB of base64) plus framing.
pub const MAX_FRAME_BYTES: usize = 5 * 1024 * 1024;
/// Refusals of requests without a valid credential (no bearer token at netd, a bad
/// Host or Origin at netd or the Web console) are logged as one line for the first and
/// then at most one summary line per this interval, with the count by reason and the
/// distinct peer addresses: a flood of refused requests cannot fill the log.
pub const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);
/// Requests one channel serves at once; more wait for a slot, so a peer cannot make
/// the receiver allocate without bound.
pub const MAX_IN_FLIGHT_PER_CHANNEL: usize = 256;
/// Bound on JSON text crossing a channel (inspect results, tool results).
pub const MAX_JSON_TEXT_BYTES: usize = 4 * 1024 * 1024;

/// `output` text of a direct tool result; longer output is cut with a marker.
pub const MAX_TOOL_OUTPUT_BYTES: usize = 64 * 1024;
/// Default and largest per-call timeout of a tool.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);
pub const MAX_TOOL_TIMEOUT: Duration = Duration::from_secs(600);
/// Longest wait for a resource lock (the screen, a path being written).
pub const RESOURCE_LOCK_WAIT: Duration = Duration::from_secs(30);

/// Commands of one shell action sent with its approval request for grant matching
/// (`ActionSummary.commands`); a line that runs more is sent without them, and no
/// command grant covers it.
pub const MAX_ACTION_COMMANDS: usize = 64;
/// Bytes of one such command's argv (each word plus one for its end); a longer command
/// is sent without its argv, and no grant matches it.
pub const MAX_COMMAND_ARGV_BYTES: usize = 4096;

/// `ListTasks` page size (`TaskQuery.page_size`): netd refuses a request outside it, and
/// approvald checks it again.
pub const MIN_PAGE_SIZE: u32 = 1;
pub const MAX_PAGE_SIZE: u32 = 100;
/// A `ListTasks` page token, as approvald issues it (`TaskPage.next_page_token`) and a
/// client hands it back; netd refuses a longer one either way.
pub const MAX_PAGE_TOKEN_BYTES: usize = 1024;

/// Calls approvald let run that have not finished, at most. The executor runs far fewer
/// at once (its channel carries at most [`MAX_IN_FLIGHT_PER_CHANNEL`] requests); more
/// means it is not asking the way it should, which is fatal to its channel.
pub const MAX_RUNNING_CALLS: usize = 4096;
/// Rows of answered calls the executor reports in one `AuthorityRequest::Kept`, and
/// their encoded bytes (each row's own bounds keep one far below this): the executor
/// gathers rows for [`KEPT_ROWS_LINGER`] and sends no more than this in one frame;
/// approvald refuses more.
pub const MAX_KEPT_ROWS: usize = 64;
pub const MAX_KEPT_ROWS_BYTES: usize = MAX_FRAME_BYTES / 2;
/// How long the executor gathers answered calls' rows before reporting them together:
/// one wake of approvald for a stream of calls instead of one each.
pub const KEPT_ROWS_LINGER: Duration = Duration::from_millis(2);
/// How long approvald waits, before committing for the owner to read, for the rows of
/// calls answered until then: the linger, and room for a busy executor to send them.
pub const KEPT_ROWS_ARRIVE: Duration = Duration::from_millis(25);
/// Decided call ids approvald remembers to refuse a second decision for one call.
pub const MAX_RECENT_DECISIONS: usize = 4096;
/// Policy snapshots approvald remembers (a configuration edited in a burst gives
/// several; the executor reports calls under the newest or one just before it).
pub const MAX_ISSUED_SNAPSHOTS: usize = 8;

/// Grace for in-flight requests when the service is asked to stop.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

// The frame must hold the largest legitimate message; checked at compile time.
const _: () = {
    assert!(MAX_FRAME_BYTES > MAX_TASK_DOCUMENT_BYTES);
    // Any one answer fits the budget, and the budget counts in u32 permits.
    assert!(MAX_STORE_ANSWER_BYTES_IN_FLIGHT >= MAX_TASK_DOCUMENT_BYTES);
    assert!(MAX_STORE_ANSWER_BYTES_IN_FLIGHT <= u32::MAX as usize);
    assert!(MAX_FRAME_BYTES > MAX_SCREEN_BASE64_BYTES);
    assert!(MAX_JSON_TEXT_BYTES < MAX_FRAME_BYTES);
    assert!(MAX_ARGUMENT_JSON_BYTES < MAX_HTTP_BODY_BYTES);
    // An approval request's parsed commands fit a frame beside everything else in it.
    assert!(MAX_ACTION_COMMANDS * (MAX_COMMAND_ARGV_BYTES + 16) < MAX_FRAME_BYTES / 4);
    // A page token carries a cursor (an id and a time) and a MAC, hex encoded.
    assert!(2 * (1 + 8 + MAX_ID_BYTES + 16) <= MAX_PAGE_TOKEN_BYTES);
    assert!(MAX_RUNNING_CALLS >= MAX_IN_FLIGHT_PER_CHANNEL);
    assert!(KEPT_ROWS_ARRIVE.as_millis() >= 10 * KEPT_ROWS_LINGER.as_millis());
    // Every protocol caller has a share, and the owner's slots stay out of every share.
    assert!(MAX_PENDING_APPROVALS_PER_CALLER >= 1);
    assert!(
        2 * MAX_PENDING_APPROVALS_PER_CALLER + OWNER_RESERVED_APPROVALS <= MAX_PENDING_APPROVALS
    );
    // Direct calls and the Agents' calls together never queue on the executor channel.
    assert!(
        MAX_CONCURRENT_TOOL_CALLS + MAX_ACTIVE_TASKS + MAX_OWNER_TASKS < MAX_IN_FLIGHT_PER_CHANNEL
    );
};

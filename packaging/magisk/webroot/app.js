// nl2sh's module WebUI: the owner's console inside the root manager (KernelSU's and
// APatch's module WebUI, MMRL's WebUI X). It shows whether the service runs, its URLs,
// and the requests waiting for approval, and approves or rejects them, by running the
// nl2sh CLI as root through the manager's bridge. The access token is read only when the
// person presses Reveal (`protocol token`), and forgotten on Hide.
//
// ---- How this page calls the host (what a test's fake must provide) -----------------
//
// The manager injects a global object `ksu` (a Java bridge). This page uses exactly one
// of its methods, called as KernelSU's own `kernelsu` npm package calls it (tiann/KernelSU
// js/index.js, exec()):
//
//     window.ksu.exec(command, "{}", callbackName)
//
//   command       one shell command line, one of the COMMANDS below (a string);
//   "{}"          the options, always the string JSON.stringify({}): no cwd, no env;
//   callbackName  a name not used before, "exec_callback_" + Date.now() + "_" + N
//                 (N counts the page's calls from 0). The page defines
//                 window[callbackName] = function (errno, stdout, stderr) {...} BEFORE the
//                 call; the host calls it once, later, with the command's exit status (a
//                 number) and its stdout and stderr (strings; the managers join the lines
//                 with "\n", without a final newline). The page deletes it when called.
//
// `window.ksu` is looked up at every call, so a fake may be installed before or after
// app.js loads (the first call happens after DOMContentLoaded). Nothing else of the host
// is used: no ksu.spawn, toast, moduleInfo, fullScreen, no network (the page's CSP has
// connect-src 'none'). A call the host never answers fails after a timeout (WebUI X asks
// the person to grant "kernelsu.permission.SHELL" and, until then, answers nothing).
//
// COMMANDS (N stands for the fixed prefix
//   '/data/adb/modules/nl2sh/system/bin/nl2sh' --config '/data/adb/nl2sh/config.toml'):
//   status     N service status --json </dev/null
//   approvals  N protocol approvals --json </dev/null
//   start      ( umask 077; N service start </dev/null >'/data/adb/nl2sh/.webui-start.out'
//              2>&1; s=$?; sed -E ... '/data/adb/nl2sh/.webui-start.out'; rm -f ...; exit $s )
//              (on one line; prints nl2sh's words with credentials redacted)
//   restart    the same as start, with `service restart` and '/data/adb/nl2sh/.webui-restart.out'
//   console    N web login --open </dev/null
//   token      N protocol token </dev/null                  (only on Reveal)
//   auto       N config get protocol_auto_approve </dev/null (while status lacks auto_approve)
//   audit      N protocol audit --json --since 5m --limit 50 </dev/null
//              (once a request this page did not decide is gone: how it ended)
//   approve    N protocol approve ID --yes </dev/null
//              N protocol approve ID --yes --phrase 'approve RISK ID' </dev/null
//   approve-ui N protocol approve ID --yes --ui-minutes M </dev/null   (M: 5, 10, 15 or 30)
//   reject     N protocol reject ID </dev/null
//   ui-grants  N protocol ui-grants --json </dev/null
//   ui-revoke  N protocol ui-grants --revoke ID </dev/null
// The page polls status (and approvals and ui-grants while the service runs) every 2 s.
// Every command hint the page shows is N itself: the binary and the --config in use.
//
// ---- Security rules of this file ---------------------------------------------------
// * Text from a command (the CLI's JSON included) is hostile: it reaches the page only
//   through textContent / createTextNode, never as markup (no innerHTML, no
//   insertAdjacentHTML, no document.write, no eval). A request's fields are shown as
//   nl2sh escaped them (`shown` in `protocol approvals --json`, the one escaping function
//   of proto/src/display.rs), so no control, bidi or invisible character can change what
//   is read; other words from a command are shown only if plain (plain()).
// * Nothing but fixed text, a validated request or grant id (^[a-z0-9]{1,32}$), a
//   validated, single-quoted phrase ('approve dangerous|critical ID', equal to the
//   request's own phrase, risk and id) and minutes from the fixed list UI_MINUTES is ever
//   put into a command line.
// * An approval is sent only after a confirm step; dangerous and critical ones only once
//   the person typed the request's phrase. A timed UI grant is offered only on a request
//   nl2sh says may have one (`ui_app`) and that needs no phrase (a grant never covers a
//   high, dangerous or critical action); a revoke is sent only after a confirm step too.
'use strict';

(function () {
  // ---------------------------------------------------------------------------------
  // Fixed paths and commands
  // ---------------------------------------------------------------------------------

  // The binary in the module directory: KernelSU mounts a module's system/ only with a
  // metamodule, so /system/bin/nl2sh may not exist. The module's configuration.
  var BIN = '/data/adb/modules/nl2sh/system/bin/nl2sh';
  var CONFIG = '/data/adb/nl2sh/config.toml';
  var START_OUT = '/data/adb/nl2sh/.webui-start.out';
  var RESTART_OUT = '/data/adb/nl2sh/.webui-restart.out';
  var N = "'" + BIN + "' --config '" + CONFIG + "'";
  // Credential-shaped text in command output replaced, as the module's scripts do.
  var SED_REDACT = "sed -E -e 's/#login=[^[:space:]]*/#login=[redacted]/g' " +
    "-e 's/[A-Za-z0-9_-]{32,}/[redacted]/g'";

  // `service start` or `restart`: to a file, not a pipe, as a started service must not
  // keep the bridge's pipes open; in a subshell, so that `exit` leaves only it.
  function detached(verb, out) {
    return '( umask 077; ' + N + ' service ' + verb + " </dev/null >'" + out + "' 2>&1; s=$?; " +
      SED_REDACT + " '" + out + "'; rm -f '" + out + "'; exit $s )";
  }

  var COMMANDS = {
    status: N + ' service status --json </dev/null',
    approvals: N + ' protocol approvals --json </dev/null',
    start: detached('start', START_OUT),
    restart: detached('restart', RESTART_OUT),
    console: N + ' web login --open </dev/null',
    uiGrants: N + ' protocol ui-grants --json </dev/null',
    token: N + ' protocol token </dev/null',
    autoApprove: N + ' config get protocol_auto_approve </dev/null',
    // The newest rows only: a gone request was decided within the last poll or two.
    audit: N + ' protocol audit --json --since 5m --limit 50 </dev/null'
  };

  // A command for the person to run in a root shell: the binary and configuration this
  // page uses, so it works as shown (KernelSU may not mount /system/bin/nl2sh).
  function hint(args) {
    return N + ' ' + args;
  }

  // The CLI's exit codes, one table for every command, under the names of its Rust home
  // (supervisor/src/exit.rs; docs/CLI.md, "Exit codes"). A test there reads this object
  // and fails on any difference, and on a bare number compared with an exit status
  // anywhere in this file.
  var EXIT = {
    Success: 0,
    Failure: 1,
    Usage: 2,
    NotRunning: 3,
    NoSuchRequest: 4,
    Expired: 5,
    Phrase: 6,
    NoTerminal: 7,
    Tampered: 8,
    Refused: 9,
    Stale: 10,
    Unknown: 11,
    NotConfigured: 12
  };
  // The shell's own, when it cannot run the binary at all.
  var SHELL_NOT_EXECUTABLE = 126;
  var SHELL_NOT_FOUND = 127;

  var ID_RE = /^[a-z0-9]{1,32}$/;
  // The only phrases approvald makes: `approve <risk> <id>` for dangerous and critical.
  var PHRASE_RE = /^approve (dangerous|critical) ([a-z0-9]{1,32})$/;

  function approveCommand(id, phrase) {
    if (!ID_RE.test(id)) {
      return null;
    }
    var cmd = N + ' protocol approve ' + id + ' --yes';
    if (phrase !== null) {
      var m = PHRASE_RE.exec(phrase);
      if (!m || m[2] !== id) {
        return null;
      }
      cmd += " --phrase '" + phrase + "'";
    }
    return cmd + ' </dev/null';
  }

  // The minutes a timed UI grant may be given for from this page (approvald takes 1 to
  // 30; docs/APPROVALS.md, "Timed UI grants"), and the one offered first.
  var UI_MINUTES = [5, 10, 15, 30];
  var UI_MINUTES_DEFAULT = 10;

  function approveUiCommand(id, minutes) {
    if (!ID_RE.test(id) || UI_MINUTES.indexOf(minutes) < 0) {
      return null;
    }
    return N + ' protocol approve ' + id + ' --yes --ui-minutes ' + minutes + ' </dev/null';
  }

  function revokeUiGrantCommand(id) {
    if (!ID_RE.test(id)) {
      return null;
    }
    return N + ' protocol ui-grants --revoke ' + id + ' </dev/null';
  }

  function rejectCommand(id) {
    if (!ID_RE.test(id)) {
      return null;
    }
    return N + ' protocol reject ' + id + ' </dev/null';
  }

  var POLL_MS = 2000;
  // How long a card this page decided stays, showing the outcome, once it is gone.
  var DECIDED_SHOWN_MS = 5000;
  var TIMEOUT_MS = { status: 20000, approvals: 20000, start: 120000, console: 30000, decide: 30000 };
  // How long "Copied" stays by its button.
  var COPIED_SHOWN_MS = 2000;
  // How long the page's note on a revoked grant stays.
  var UI_GRANT_NOTE_MS = 8000;

  // ---------------------------------------------------------------------------------
  // The bridge
  // ---------------------------------------------------------------------------------

  var callbackCounter = 0;

  function HostError(message) {
    this.message = message;
  }
  HostError.prototype = Object.create(Error.prototype);
  HostError.prototype.name = 'HostError';

  function hasHost() {
    return typeof window.ksu === 'object' && window.ksu !== null &&
      typeof window.ksu.exec === 'function';
  }

  // Run `command` as root; resolves with {errno, stdout, stderr}.
  function exec(command, timeoutMs) {
    return new Promise(function (resolve, reject) {
      if (!hasHost()) {
        reject(new HostError('no root manager bridge (window.ksu) on this page'));
        return;
      }
      var name = 'exec_callback_' + Date.now() + '_' + callbackCounter++;
      var done = false;
      var timer = setTimeout(function () {
        if (done) {
          return;
        }
        done = true;
        // A late answer finds a no-op rather than an error in the console.
        window[name] = function () {
          delete window[name];
        };
        reject(new HostError('the manager did not answer (if it asks for the shell ' +
          'permission, allow it)'));
      }, timeoutMs);
      window[name] = function (errno, stdout, stderr) {
        delete window[name];
        if (done) {
          return;
        }
        done = true;
        clearTimeout(timer);
        resolve({
          errno: typeof errno === 'number' ? errno : Number(errno),
          stdout: typeof stdout === 'string' ? stdout : '',
          stderr: typeof stderr === 'string' ? stderr : ''
        });
      };
      try {
        window.ksu.exec(command, JSON.stringify({}), name);
      } catch (e) {
        done = true;
        clearTimeout(timer);
        delete window[name];
        reject(new HostError('the manager refused the command: ' + String(e && e.message)));
      }
    });
  }

  // ---------------------------------------------------------------------------------
  // Text
  // ---------------------------------------------------------------------------------

  // This page has no escaping of its own, so it cannot drift from nl2sh's one escaping
  // function (proto/src/display.rs). A request's text (id, tool, action, task, reasons)
  // is shown from the `shown` fields of `protocol approvals --json`, escaped there by
  // that function; nl2sh's own output (errors, `service start`) is escaped by the CLI as
  // a terminal shows it. Words nl2sh makes (a risk, an identity, a state) and the service's
  // addresses are shown only if they are what nl2sh makes: printable ASCII.
  var PLAIN_RE = /^[\x21-\x7e]{1,512}$/;

  // `v` if it is printable ASCII without spaces (a word, a URL, an address, a version),
  // else a fixed note: nothing else from a command's JSON is shown as it is.
  function plain(v) {
    var s = str(v);
    return PLAIN_RE.test(s) ? s : '(unexpected characters: see nl2sh in a root shell)';
  }

  // Command output for the page: credentials redacted, bounded (nl2sh escaped it).
  function outputText(s) {
    var t = (typeof s === 'string' ? s : '')
      .replace(/#login=\S*/g, '#login=[redacted]')
      .replace(/[A-Za-z0-9_-]{32,}/g, '[redacted]')
      .trim();
    if (t.length > 1500) {
      t = t.slice(0, 1500) + ' …';
    }
    return t;
  }

  function str(v) {
    if (typeof v === 'string') {
      return v;
    }
    if (typeof v === 'number' || typeof v === 'boolean') {
      return String(v);
    }
    return '';
  }

  // ---------------------------------------------------------------------------------
  // DOM
  // ---------------------------------------------------------------------------------

  // An element with a class and children (strings become text nodes).
  function el(tag, className) {
    var node = document.createElement(tag);
    if (className) {
      node.className = className;
    }
    for (var i = 2; i < arguments.length; i++) {
      var child = arguments[i];
      if (child === null || child === undefined || child === false) {
        continue;
      }
      node.appendChild(typeof child === 'string' ? document.createTextNode(child) : child);
    }
    return node;
  }

  function $(id) {
    return document.getElementById(id);
  }

  function setText(node, text) {
    node.textContent = text;
  }

  function clear(node) {
    while (node.firstChild) {
      node.removeChild(node.firstChild);
    }
  }

  function message(node, text, kind) {
    if (!text) {
      node.hidden = true;
      setText(node, '');
      return;
    }
    node.className = 'message' + (kind ? ' message-' + kind : '');
    setText(node, text);
    node.hidden = false;
  }

  // What an exit status of the CLI means, for a message.
  var FAILURE_TEXT = {};
  FAILURE_TEXT[EXIT.NotRunning] = 'the service is not running';
  FAILURE_TEXT[EXIT.NoSuchRequest] = 'no such request: it was decided elsewhere, or it is gone';
  FAILURE_TEXT[EXIT.Expired] = 'the request expired; its action did not run';
  FAILURE_TEXT[EXIT.Phrase] = 'the phrase was missing or wrong; nothing was approved';
  FAILURE_TEXT[EXIT.NoTerminal] =
    'this nl2sh wants a terminal to approve (it is older than this page): use a root shell';
  FAILURE_TEXT[EXIT.Refused] =
    'nl2sh refused: the command ran inside the service\'s own process tree';
  FAILURE_TEXT[EXIT.NotConfigured] =
    'the service is not configured to start; in a root shell: ' +
    hint('config set protocol_start_with_service true');
  FAILURE_TEXT[SHELL_NOT_EXECUTABLE] = 'nl2sh is not executable at ' + BIN + ': reinstall the module';
  FAILURE_TEXT[SHELL_NOT_FOUND] = 'nl2sh is missing at ' + BIN + ': reinstall the module';

  function failure(what, r) {
    var text = what + ' failed (exit ' + r.errno + ')';
    if (FAILURE_TEXT[r.errno]) {
      text += ': ' + FAILURE_TEXT[r.errno];
    }
    var detail = outputText(r.stderr || r.stdout);
    if (detail) {
      text += '.\n' + detail;
    }
    return text;
  }

  // ---------------------------------------------------------------------------------
  // Service status
  // ---------------------------------------------------------------------------------

  var status = { running: null, web: false, managed: false, autoApprove: null, signature: '' };

  function parseJson(text) {
    try {
      return JSON.parse(text);
    } catch (e) {
      return null;
    }
  }

  // A time from nl2sh (RFC 3339) in the one format of the consoles: local
  // "YYYY-MM-DD HH:MM:SS" (the Web console's too).
  function fmtTime(v) {
    var raw = str(v);
    var d = new Date(raw);
    if (!raw || isNaN(d.getTime())) {
      return raw ? plain(raw) : '';
    }
    var two = function (n) {
      return (n < 10 ? '0' : '') + n;
    };
    return d.getFullYear() + '-' + two(d.getMonth() + 1) + '-' + two(d.getDate()) + ' ' +
      two(d.getHours()) + ':' + two(d.getMinutes()) + ':' + two(d.getSeconds());
  }

  // The service's state from `service status --json`'s exit status: [pill, summary].
  function stateOf(r, obj) {
    if (r.errno === EXIT.Success) {
      return ['running', 'Running.'];
    }
    if (r.errno === EXIT.NotRunning || r.errno === EXIT.Stale) {
      return ['stopped', r.errno === EXIT.Stale ?
        'Stopped (a process of it died; its record is left). Start it again below.' :
        'Stopped. Start it below, or reboot (the module starts it at boot).'];
    }
    if (r.errno === EXIT.Unknown) {
      return ['unknown', 'Cannot tell (' + (str(obj.state) ? plain(obj.state) : 'starting or stopping') +
        '); trying again.'];
    }
    return ['unknown', failure('Reading the status', r)];
  }

  // The rows of the Service card, the Web console's URL and the client settings, from
  // the status's connections.
  function connectionRows(conns) {
    var out = { rows: [], web: '', snippets: null, id: '', tokenSource: '' };
    conns.forEach(function (c) {
      if (c === null || typeof c !== 'object') {
        return;
      }
      if (str(c.transport) === 'web') {
        if (str(c.url)) {
          out.web = str(c.url);
          out.rows.push(['Web console', out.web]);
        }
        return;
      }
      [['MCP', 'mcp_url'], ['A2A', 'a2a_url'], ['Agent Card', 'card_url'], ['Listening', 'listen'],
        ['Transport', 'transport'], ['PID', 'pid'], ['Version', 'version']].forEach(function (f) {
        if (str(c[f[1]])) {
          out.rows.push([f[0], str(c[f[1]])]);
        }
      });
      if (str(c.since)) {
        // Made by fmtTime from numbers: shown as it is.
        out.rows.push(['Since', fmtTime(c.since), true]);
      }
      if (str(c.mcp_url)) {
        out.snippets = { codex: snippetText(c.codex_toml), json: snippetText(c.mcp_servers_json) };
        out.tokenSource = str(c.token_source);
        // Which running service a revealed token belongs to.
        out.id = str(c.pid) + ' ' + str(c.since) + ' ' + str(c.mcp_url);
      }
    });
    return out;
  }

  // A client setting from nl2sh: shown only if it is plain text (printable ASCII lines).
  function snippetText(v) {
    var t = str(v);
    return /^[\x20-\x7e\n]{1,4000}$/.test(t) ? t : '';
  }

  function renderStatus(r) {
    var json = parseJson(r.stdout);
    var obj = json !== null && typeof json === 'object' && !Array.isArray(json) ? json : {};
    var conns = Array.isArray(obj.connections) ? obj.connections : [];
    var running = r.errno === EXIT.Success && obj.running !== false;
    var st = stateOf(r, obj);
    var state = st[0];
    var text = st[1];
    var found = connectionRows(conns);
    var rows = found.rows;
    if (running && rows.length === 0) {
      text = 'Running, with no HTTP endpoint advertised (a local stdio session, or MCP/A2A is off).';
    }

    var signature = JSON.stringify([state, text, rows]);
    if (signature !== status.signature) {
      status.signature = signature;
      $('state').className = 'pill pill-' + state;
      setText($('state'), state);
      setText($('service-summary'), text);
      var dl = $('endpoints');
      clear(dl);
      rows.forEach(function (row) {
        dl.appendChild(el('dt', null, row[0]));
        dl.appendChild(el('dd', 'value', row[2] ? row[1] : plain(row[1])));
      });
      dl.hidden = rows.length === 0;
    }
    status.running = running;
    status.web = running && found.web !== '';
    status.managed = running && obj.managed === true;
    // `auto_approve` of the running service when nl2sh says it; else the saved key (read
    // by the poll), which applies at the next decision.
    status.autoApprove = typeof obj.auto_approve === 'boolean' ? obj.auto_approve : null;
    renderDiffers(running ? obj : null);
    renderConnect(found, running);
    $('start').hidden = !(state === 'stopped') || restart.busy;
    $('restart').hidden = !status.managed && !restart.busy;
    if ($('restart').hidden && !restart.busy) {
      $('restart-confirm').hidden = true;
    }
    $('console').hidden = !status.web;
  }

  // "Running differs from saved": each setting nl2sh names (`differences`: key, saved,
  // running, in nl2sh's words; else only the keys), or why the file cannot be compared.
  var WORDS_RE = /^[\x20-\x7e]{1,200}$/;

  function renderDiffers(obj) {
    var node = $('differs');
    var o = obj || {};
    var lines = [];
    var detailed = Array.isArray(o.differences) ? o.differences : [];
    detailed.forEach(function (d) {
      if (d !== null && typeof d === 'object' && /^[a-z0-9_.]{1,64}$/.test(str(d.key)) &&
        WORDS_RE.test(str(d.saved)) && WORDS_RE.test(str(d.running))) {
        lines.push(str(d.key) + ': saved ' + str(d.saved) + ', running ' + str(d.running));
      }
    });
    if (!lines.length && Array.isArray(o.differs_from_saved)) {
      lines = o.differs_from_saved.map(str).filter(function (k) {
        return /^[a-z0-9_.]{1,64}$/.test(k);
      });
    }
    var text = '';
    if (lines.length) {
      text = 'The running service differs from the saved configuration:\n' + lines.join('\n') +
        '\nRestart now applies the saved one.';
    } else if (str(o.saved_unreadable)) {
      text = 'The saved configuration does not load, so it cannot be compared with the running ' +
        'service: ' + (WORDS_RE.test(str(o.saved_unreadable)) ? str(o.saved_unreadable) :
        'see ' + hint('service status')) + '.';
    }
    node.hidden = text === '';
    setText(node, text);
  }

  // The banner while every request is approved without asking.
  function renderAutoApprove(on) {
    var node = $('auto-approve');
    node.hidden = on !== true;
    setText(node, on === true ? 'Every request is approved automatically (protocol_auto_approve). ' +
      'To ask you again, in a root shell: ' + hint('config set protocol_auto_approve false') : '');
  }

  // ---------------------------------------------------------------------------------
  // Connect an agent: the token (on Reveal) and the client settings, with copy buttons
  // ---------------------------------------------------------------------------------

  // `service` says which running service the shown token belongs to; a restart hides it.
  var token = { service: '', busy: false, source: '' };
  // What the token is: 32-256 printable ASCII characters without spaces (docs/CLI.md).
  var TOKEN_RE = /^[\x21-\x7e]{32,256}$/;

  function renderConnect(found, running) {
    var box = $('snippets');
    var snippets = found.snippets;
    box.hidden = !(running && snippets && snippets.codex && snippets.json);
    if (!box.hidden) {
      if ($('snippet-codex').textContent !== snippets.codex) {
        setText($('snippet-codex'), snippets.codex);
      }
      if ($('snippet-json').textContent !== snippets.json) {
        setText($('snippet-json'), snippets.json);
      }
    }
    var id = running && snippets ? found.id : '';
    token.source = TOKEN_SOURCES[found.tokenSource] || '';
    if (id !== token.service || (!id && !$('token-state'))) {
      token.service = id;
      tokenHidden(id !== '');
    }
  }

  // What the hidden token is, by where it came from (`token_source` of the status).
  var TOKEN_SOURCES = {
    generated: 'hidden · generated, a new one at every start',
    configuration: 'hidden · set as protocol_token in the configuration',
    environment: 'hidden · set in NL2SH_PROTOCOL_TOKEN'
  };

  function tokenHidden(available) {
    var dd = $('token-cell');
    clear(dd);
    if (!available) {
      dd.appendChild(el('span', 'muted', 'none: nothing serves MCP/A2A over HTTP now'));
      dd.firstChild.id = 'token-state';
      return;
    }
    var reveal = el('button', 'btn btn-small', 'Reveal');
    reveal.type = 'button';
    reveal.id = 'reveal-token';
    reveal.disabled = token.busy;
    var hidden = el('span', 'muted', token.source || 'hidden');
    hidden.id = 'token-state';
    dd.appendChild(el('div', 'token-row', hidden, reveal));
    reveal.addEventListener('click', revealToken);
  }

  function revealToken() {
    var service = token.service;
    var out = $('token-message');
    token.busy = true;
    $('reveal-token').disabled = true;
    message(out, 'Reading the token…');
    exec(COMMANDS.token, TIMEOUT_MS.status).then(function (r) {
      var t = r.stdout.trim();
      if (token.service !== service) {
        message(out, 'The service changed meanwhile; press Reveal again.', 'error');
      } else if (r.errno === EXIT.Success && TOKEN_RE.test(t)) {
        message(out, '');
        tokenShown(t);
      } else if (r.errno === EXIT.Success) {
        message(out, 'nl2sh answered something that is not a token.', 'error');
      } else {
        message(out, failure('Reading the token', r), 'error');
      }
    }, function (e) {
      message(out, 'Reading the token failed: ' + e.message + '.', 'error');
    }).then(function () {
      token.busy = false;
      var reveal = $('reveal-token');
      if (reveal) {
        reveal.disabled = false;
      }
    });
  }

  function tokenShown(value) {
    var dd = $('token-cell');
    clear(dd);
    var input = el('input', 'token-value');
    input.id = 'token-value';
    input.type = 'text';
    input.readOnly = true;
    input.value = value;
    input.setAttribute('autocomplete', 'off');
    input.setAttribute('spellcheck', 'false');
    input.setAttribute('aria-label', 'Access token');
    input.addEventListener('focus', function () {
      input.select();
    });
    var copy = el('button', 'btn btn-small copy', 'Copy');
    copy.type = 'button';
    copy.id = 'copy-token';
    copy.addEventListener('click', function () {
      copyText(input.value, copy);
    });
    var hide = el('button', 'btn btn-small', 'Hide');
    hide.type = 'button';
    hide.id = 'hide-token';
    hide.addEventListener('click', function () {
      tokenHidden(true);
    });
    dd.appendChild(el('div', 'token-row', input, copy, hide));
  }

  // Copy `text`, then say "Copied" (or how to copy by hand) next to the button.
  function copyText(text, btn) {
    function done(ok) {
      var next = btn.nextSibling;
      if (next && next.classList && (next.classList.contains('copied') || next.classList.contains('copy-failed'))) {
        next.parentNode.removeChild(next);
      }
      var note = ok ? el('span', 'copied', 'Copied') :
        el('span', 'copy-failed', 'Copy failed: select the text and copy it');
      note.setAttribute('role', 'status');
      btn.parentNode.insertBefore(note, btn.nextSibling);
      setTimeout(function () {
        if (note.parentNode) {
          note.parentNode.removeChild(note);
        }
      }, ok ? COPIED_SHOWN_MS : 2 * COPIED_SHOWN_MS);
    }
    function fallback() {
      var ta = el('textarea', 'offscreen');
      ta.value = text;
      ta.readOnly = true;
      ta.setAttribute('aria-hidden', 'true');
      document.body.appendChild(ta);
      var ok = false;
      try {
        ta.select();
        ta.setSelectionRange(0, text.length);
        ok = document.execCommand('copy');
      } catch (e) {
        ok = false;
      }
      document.body.removeChild(ta);
      btn.focus();
      done(ok);
    }
    if (navigator.clipboard && typeof navigator.clipboard.writeText === 'function' && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () {
        done(true);
      }, fallback);
    } else {
      fallback();
    }
  }

  // ---------------------------------------------------------------------------------
  // Restart now
  // ---------------------------------------------------------------------------------

  var restart = { busy: false };

  function openRestart() {
    if (restart.busy) {
      return;
    }
    message($('service-message'), '');
    $('restart-confirm').hidden = false;
    $('restart').disabled = true;
    $('restart-now').focus();
  }

  function closeRestart() {
    $('restart-confirm').hidden = true;
    $('restart').disabled = restart.busy;
  }

  function restartNow() {
    if (restart.busy) {
      return;
    }
    restart.busy = true;
    closeRestart();
    runButton($('restart'), 'Restarting the service', COMMANDS.restart, TIMEOUT_MS.start,
      'Restarting the service…', function (r) {
        // What it did ("Stopped … Started …"), not the status block after it (shown above).
        var said = outputText(r.stdout).split('\n');
        var end = said.findIndex(function (l) {
          return /^Status:/.test(l);
        });
        said = said.slice(0, end < 0 ? 3 : Math.min(end, 3)).join('\n');
        return 'Restarted with the saved configuration.' + (said ? '\n' + said : '');
      }, function () {
        restart.busy = false;
      });
  }

  // ---------------------------------------------------------------------------------
  // Pending approvals
  // ---------------------------------------------------------------------------------

  // id -> { req, node, parts, mode: null | 'approve' | 'reject', busy, decided }
  var cards = {};

  function requestSignature(req) {
    return JSON.stringify([req.id, req.call_id, req.origin, req.task, req.tool, req.action,
      req.shown.who, req.shown.as, req.shown.command, req.command_escaped, req.action_escaped,
      req.risk, req.requires_root, req.identity, req.reasons, req.phrase, req.shown.after_reading,
      req.data && req.data.header, req.ui_app]);
  }

  // The request as the page keeps it: every field coerced to what is expected.
  function normalize(raw) {
    if (raw === null || typeof raw !== 'object') {
      return null;
    }
    return {
      id: str(raw.id),
      call_id: str(raw.call_id),
      origin: str(raw.origin),
      task: raw.task === null || raw.task === undefined ? '' : str(raw.task),
      tool: str(raw.tool),
      action: str(raw.action),
      risk: str(raw.risk),
      requires_root: raw.requires_root === true,
      identity: str(raw.identity),
      reasons: Array.isArray(raw.reasons) ? raw.reasons.map(str) : [],
      seconds_left: typeof raw.seconds_left === 'number' ? raw.seconds_left : null,
      phrase: typeof raw.phrase === 'string' ? raw.phrase : null,
      data: carried(raw.data),
      // The app a timed UI grant given with this request would cover, or '' (none offered).
      ui_app: typeof raw.ui_app === 'string' ? raw.ui_app : '',
      // The command held characters that had to be escaped to be shown.
      command_escaped: shownFlag(raw, 'command_escaped'),
      action_escaped: shownFlag(raw, 'action_escaped'),
      // What the page shows of the caller's text: escaped by nl2sh (see plain()).
      shown: shownFields(raw.shown)
    };
  }

  // A flag nl2sh sets under `shown` (or beside it).
  function shownFlag(raw, name) {
    return raw[name] === true || (raw.shown !== null && typeof raw.shown === 'object' && raw.shown[name] === true);
  }

  function shownFields(v) {
    var o = v !== null && typeof v === 'object' ? v : {};
    return {
      id: str(o.id),
      tool: str(o.tool),
      action: str(o.action),
      task: o.task === null || o.task === undefined ? '' : str(o.task),
      after_reading: o.after_reading === null || o.after_reading === undefined ? '' : str(o.after_reading),
      ui_app: o.ui_app === null || o.ui_app === undefined ? '' : str(o.ui_app),
      reasons: Array.isArray(o.reasons) ? o.reasons.map(str) : [],
      // Who asks, in words ("Codex 0.47.0 over MCP (HTTP)"); the identity in words ("as
      // root"); for shell.exec the command as the caller sent it ('' for other tools).
      who: str(o.who),
      as: str(o.as),
      command: o.command === null || o.command === undefined ? '' : str(o.command)
    };
  }

  // What the action carries (an fs.write's content), whole. The CLI's --json gives its
  // header and lines already escaped by nl2sh's one escaping function: each is shown as
  // text, as it is.
  function carried(raw) {
    if (raw === null || typeof raw !== 'object' || !Array.isArray(raw.lines)) {
      return null;
    }
    return { header: str(raw.header), lines: raw.lines.map(str) };
  }

  // Whether the card offers a timed UI grant: nl2sh named the app (escaped, to show), the
  // id is one the page may send, and no phrase is needed (APPROVALS.md: a grant covers
  // only medium risk or below, which never asks for one).
  function offersUiGrant(req) {
    return req.ui_app !== '' && req.shown.ui_app !== '' && ID_RE.test(req.id) && !needsPhrase(req);
  }

  function needsPhrase(req) {
    return req.risk === 'dangerous' || req.risk === 'critical' || req.phrase !== null;
  }

  // The phrase to send, or null when this request's is not what approvald makes.
  function checkedPhrase(req) {
    if (req.phrase === null) {
      return null;
    }
    var m = PHRASE_RE.exec(req.phrase);
    if (!m || m[1] !== req.risk || m[2] !== req.id || req.phrase !== 'approve ' + req.risk + ' ' + req.id) {
      return null;
    }
    return req.phrase;
  }

  function metaText(req) {
    var parts = [];
    if (req.shown.as) {
      // nl2sh's words ("as root"); who asks is the card's first line.
      parts.push('runs ' + req.shown.as);
    } else {
      parts.push('runs as ' + (req.identity ? plain(req.identity) : '?') + (req.requires_root ? ' (requires root)' : ''));
    }
    if (req.origin && !req.shown.who) {
      parts.push('from ' + plain(req.origin));
    }
    if (req.task) {
      parts.push('task ' + req.shown.task);
    }
    if (req.seconds_left !== null) {
      parts.push(req.seconds_left + ' s left');
    }
    return parts.join(' · ');
  }

  // The action: for shell.exec the command as the caller sent it, the exact argv a tap
  // away; for other tools the action line as it will run. Each as a shell prints it,
  // unless nl2sh had to escape it (then it says so).
  function actionBlock(req) {
    var argv = el('pre', 'action', req.shown.action);
    var argvNote = req.action_escaped ? escapedNote() : null;
    if (!req.shown.command) {
      return el('div', 'action-block',
        el('p', 'label', 'Action, exactly as it will run:'), argv, argvNote);
    }
    return el('div', 'action-block',
      el('p', 'label', 'Command, as sent:'),
      el('pre', 'command', req.shown.command),
      req.command_escaped ? escapedNote() : null,
      el('details', 'argv', el('summary', null, 'Exact argv it runs'), argv, argvNote));
  }

  function escapedNote() {
    return el('p', 'note escaped-note', 'Shown escaped: \\\\ is one backslash.');
  }

  function buildCard(req) {
    var c = { req: req, mode: null, busy: false, decided: false, minutes: null, parts: {} };
    var p = c.parts;
    p.meta = el('p', 'meta', metaText(req));
    p.approve = el('button', 'btn btn-approve', 'Approve…');
    p.reject = el('button', 'btn btn-reject', 'Reject…');
    p.approve.type = 'button';
    p.reject.type = 'button';
    p.approve.setAttribute('aria-label', 'Approve request ' + req.shown.id + '…');
    p.reject.setAttribute('aria-label', 'Reject request ' + req.shown.id + '…');
    p.confirm = el('div', 'confirm');
    p.confirm.hidden = true;
    p.message = el('p', 'message');
    p.message.hidden = true;
    p.message.setAttribute('role', 'status');

    var reasons = el('ul', 'reasons');
    req.shown.reasons.forEach(function (r) {
      reasons.appendChild(el('li', null, r));
    });

    // A timed UI grant, where nl2sh offers one (docs/APPROVALS.md, "Timed UI grants").
    var offer = null;
    if (offersUiGrant(req)) {
      p.uiMinutes = el('select', 'ui-minutes');
      p.uiMinutes.setAttribute('aria-label', 'Minutes of the UI grant');
      UI_MINUTES.forEach(function (m) {
        var o = el('option', null, m + ' min');
        o.value = String(m);
        p.uiMinutes.appendChild(o);
      });
      p.uiMinutes.value = String(UI_MINUTES_DEFAULT);
      p.approveUi = el('button', 'btn btn-approve approve-ui');
      p.approveUi.type = 'button';
      var label = function () {
        setText(p.approveUi, 'Approve + allow UI in ' + req.shown.ui_app + ' for ' +
          p.uiMinutes.value + ' min…');
      };
      label();
      p.uiMinutes.addEventListener('change', function () {
        label();
        // A confirm step names its minutes: a new choice needs a new confirmation.
        if (c.mode === 'approve-ui') {
          closeConfirm(c);
        }
      });
      p.approveUi.addEventListener('click', function () {
        openConfirm(c, 'approve-ui');
      });
      offer = el('div', 'ui-grant-offer',
        el('p', 'label', 'Or approve it and let UI actions (taps, gestures, text, keys) from ' +
          (req.origin ? plain(req.origin) : '?') + ' in ' + req.shown.ui_app + ' run unasked for:'),
        el('div', 'buttons', p.uiMinutes, p.approveUi));
    }

    var riskClass = /^[a-z_]{1,16}$/.test(req.risk) ? ' risk-' + req.risk : '';
    c.node = el('article', 'request' + riskClass,
      req.shown.who ? el('p', 'who', req.shown.who) : null,
      el('header', 'request-head',
        el('span', 'risk', req.risk ? plain(req.risk) : 'unknown'),
        el('span', 'tool', req.shown.tool),
        el('span', 'rid', req.shown.id)),
      p.meta,
      actionBlock(req),
      req.shown.after_reading ? el('p', 'note', 'The Agent asks ' + req.shown.after_reading) : null,
      req.data ? el('p', 'label', req.data.header) : null,
      req.data ? el('pre', 'action data-lines', req.data.lines.join('\n')) : null,
      req.shown.reasons.length ? el('p', 'label', 'Why it needs you:') : null,
      req.shown.reasons.length ? reasons : null,
      el('div', 'buttons', p.approve, p.reject),
      offer,
      p.confirm,
      p.message);

    p.approve.addEventListener('click', function () {
      openConfirm(c, 'approve');
    });
    p.reject.addEventListener('click', function () {
      openConfirm(c, 'reject');
    });
    return c;
  }

  function setBusy(c, busy) {
    c.busy = busy;
    c.parts.approve.disabled = busy || c.decided;
    c.parts.reject.disabled = busy || c.decided;
    if (c.parts.approveUi) {
      c.parts.approveUi.disabled = busy || c.decided;
      c.parts.uiMinutes.disabled = busy || c.decided;
    }
    if (busy) {
      Array.prototype.forEach.call(c.parts.confirm.querySelectorAll('button, input'), function (n) {
        n.disabled = true;
      });
    }
  }

  // Show a confirm step whole (its question and buttons, not only the focused button at
  // the screen's edge) and focus `first`.
  function showStep(box, first) {
    box.hidden = false;
    first.focus({ preventScroll: true });
    box.scrollIntoView({ block: 'nearest' });
  }

  // " from <who is asking>" for a confirm step's question, when nl2sh names the caller.
  function asker(req) {
    return req.shown.who ? ' from ' + req.shown.who : '';
  }

  function closeConfirm(c) {
    c.mode = null;
    clear(c.parts.confirm);
    c.parts.confirm.hidden = true;
  }

  function openConfirm(c, mode) {
    if (c.busy || c.decided) {
      return;
    }
    var req = c.req;
    var box = c.parts.confirm;
    closeConfirm(c);
    message(c.parts.message, '');
    c.mode = mode;
    // Before any approve counts, the whole action is on the page: the argv behind the
    // command opens too (it may say more, such as the directory it runs in).
    var argv = c.node.querySelector('details.argv');
    if (argv && mode !== 'reject') {
      argv.open = true;
    }

    var go = el('button', 'btn ' + (mode === 'approve' ? 'btn-approve' : 'btn-reject'),
      mode === 'approve' ? 'Approve now' : 'Reject now');
    var cancel = el('button', 'btn btn-quiet', 'Cancel');
    go.type = 'button';
    cancel.type = 'button';
    cancel.addEventListener('click', function () {
      closeConfirm(c);
    });

    if (mode === 'reject') {
      box.appendChild(el('p', null, 'Reject request ' + req.shown.id + asker(req) + '? Its action does not run.'));
      go.addEventListener('click', function () {
        decide(c, 'reject', null);
      });
      box.appendChild(el('div', 'buttons', go, cancel));
      showStep(box, go);
      return;
    }

    if (!ID_RE.test(req.id)) {
      box.appendChild(el('p', 'warn', 'This request\'s id is not in the form nl2sh uses; ' +
        'it is not approved from here. Use a root shell: ' + hint('protocol approvals') + '.'));
      box.appendChild(el('div', 'buttons', cancel));
      box.hidden = false;
      return;
    }

    if (mode === 'approve-ui') {
      var minutes = Number(c.parts.uiMinutes ? c.parts.uiMinutes.value : NaN);
      if (!offersUiGrant(req) || UI_MINUTES.indexOf(minutes) < 0) {
        closeConfirm(c);
        return;
      }
      c.minutes = minutes;
      go = el('button', 'btn btn-approve', 'Approve + allow UI now');
      go.type = 'button';
      box.appendChild(el('p', null, 'Approve request ' + req.shown.id + ' and let UI actions of ' +
        (req.origin ? plain(req.origin) : '?') + ' in ' + req.shown.ui_app + ' run unasked for ' +
        minutes + ' min? Its action runs as soon as you approve. The grant ends when its time ' +
        'is up, when you revoke it below, or when another app comes to the front.'));
      go.addEventListener('click', function () {
        decide(c, 'approve-ui', null);
      });
      box.appendChild(el('div', 'buttons', go, cancel));
      showStep(box, go);
      return;
    }

    if (needsPhrase(req)) {
      var phrase = checkedPhrase(req);
      if (phrase === null) {
        box.appendChild(el('p', 'warn', 'This ' + plain(req.risk) + ' request has no valid ' +
          'confirmation phrase; it is not approved from here. Use a root shell: ' +
          hint('protocol approvals') + '.'));
        box.appendChild(el('div', 'buttons', cancel));
        box.hidden = false;
        return;
      }
      var input = el('input', 'phrase');
      input.type = 'text';
      input.setAttribute('autocomplete', 'off');
      input.setAttribute('autocapitalize', 'none');
      input.setAttribute('autocorrect', 'off');
      input.setAttribute('spellcheck', 'false');
      input.setAttribute('aria-label', 'Confirmation phrase');
      box.appendChild(el('p', null, 'This is a ' + plain(req.risk) + ' action' + asker(req) + '. It runs ' +
        (req.shown.as ? req.shown.as + ' ' : '') + 'as soon as you approve. To approve it, type:'));
      box.appendChild(el('p', 'phrase-shown', el('code', null, phrase)));
      box.appendChild(input);
      go.disabled = true;
      input.addEventListener('input', function () {
        go.disabled = c.busy || input.value.trim() !== phrase;
      });
      go.addEventListener('click', function () {
        if (input.value.trim() !== phrase) {
          return;
        }
        decide(c, 'approve', phrase);
      });
      box.appendChild(el('div', 'buttons', go, cancel));
      showStep(box, input);
      return;
    }

    box.appendChild(el('p', null, 'Approve request ' + req.shown.id + asker(req) + '? Its action runs ' +
      (req.shown.as ? req.shown.as + ' ' : '') + 'as soon ' +
      'as you approve.'));
    go.addEventListener('click', function () {
      decide(c, 'approve', null);
    });
    box.appendChild(el('div', 'buttons', go, cancel));
    showStep(box, go);
  }

  function decide(c, mode, phrase) {
    if (c.busy || c.decided) {
      return;
    }
    var approving = mode === 'approve' || mode === 'approve-ui';
    var minutes = c.minutes;
    var cmd = mode === 'approve' ? approveCommand(c.req.id, phrase) :
      mode === 'approve-ui' ? approveUiCommand(c.req.id, minutes) : rejectCommand(c.req.id);
    if (cmd === null) {
      message(c.parts.message, 'Not sent: the request\'s id, phrase or minutes are not in the form nl2sh uses.', 'error');
      return;
    }
    setBusy(c, true);
    message(c.parts.message, approving ? 'Approving…' : 'Rejecting…');
    exec(cmd, TIMEOUT_MS.decide).then(function (r) {
      if (r.errno === EXIT.Success) {
        c.decided = true;
        c.decidedAt = Date.now();
        closeConfirm(c);
        c.node.classList.add('decided');
        message(c.parts.message, mode === 'approve-ui' ? 'Approved: the action runs now, and UI ' +
          'actions in ' + c.req.shown.ui_app + ' run unasked for ' + minutes + ' min (see Timed UI grants).' :
          mode === 'approve' ? 'Approved: the action runs now.' :
          'Rejected: the action does not run.', 'ok');
      } else {
        // Whatever went wrong, a new decision starts from the buttons again.
        closeConfirm(c);
        message(c.parts.message, failure(approving ? 'Approving' : 'Rejecting', r), 'error');
        if (r.errno === EXIT.NoSuchRequest || r.errno === EXIT.Expired) {
          c.decided = true;
        }
      }
    }, function (e) {
      closeConfirm(c);
      message(c.parts.message, (approving ? 'Approving' : 'Rejecting') +
        ' failed: ' + e.message + '.', 'error');
    }).then(function () {
      setBusy(c, false);
      schedule(0);
    });
  }

  function renderApprovals(list, note) {
    var box = $('approvals');
    var summary = $('approvals-summary');
    var seen = {};
    var gone = [];
    var count = 0;
    (list || []).forEach(function (raw) {
      var req = normalize(raw);
      if (req === null || !req.id || seen[req.id]) {
        return;
      }
      seen[req.id] = true;
      count++;
      var c = cards[req.id];
      if (c && (c.gone || requestSignature(c.req) !== requestSignature(req))) {
        // The same id for another request: never keep a confirm step made for the old one.
        removeCard(req.id);
        c = null;
      }
      if (!c) {
        c = buildCard(req);
        cards[req.id] = c;
        box.appendChild(c.node);
      } else {
        c.req.seconds_left = req.seconds_left;
        setText(c.parts.meta, metaText(c.req));
      }
    });
    Object.keys(cards).forEach(function (id) {
      var c = cards[id];
      if (seen[id] || c.gone || c.busy) {
        return;
      }
      // A request this page just decided stays a few seconds with its outcome, so the
      // person sees that the decision was taken.
      if (c.decidedAt) {
        if (Date.now() - c.decidedAt >= DECIDED_SHOWN_MS) {
          removeCard(id);
        }
        return;
      }
      // Decided elsewhere, expired or withdrawn: the card stays, saying so, until the
      // person dismisses it (never vanishing under a finger or a half-typed phrase).
      markGone(c);
      gone.push(c);
    });
    if (gone.length) {
      tellEndings(gone, 1);
    }
    setText($('approvals-count'), count ? '(' + count + ')' : '');
    setText(summary, note || (count ? 'Each runs only once you approve it here, in the Web console, ' +
      'or from a root shell.' : 'None. Requests from agents that need you appear here.'));
  }

  function removeCard(id) {
    var c = cards[id];
    if (c && c.node.parentNode) {
      c.node.parentNode.removeChild(c.node);
    }
    delete cards[id];
  }

  function markGone(c) {
    c.gone = true;
    c.decided = true;
    c.req.seconds_left = null;
    setText(c.parts.meta, metaText(c.req));
    c.node.classList.add('decided', 'gone');
    Array.prototype.forEach.call(c.node.querySelectorAll('button, input, select'), function (n) {
      n.disabled = true;
    });
    message(c.parts.message, 'No longer waiting: decided elsewhere (the Web console, the terminal ' +
      'console or a root shell), expired, or withdrawn by its caller. Looking it up…');
    var dismiss = el('button', 'btn btn-quiet dismiss', 'Dismiss');
    dismiss.type = 'button';
    dismiss.setAttribute('aria-label', 'Dismiss request ' + c.req.shown.id);
    dismiss.addEventListener('click', function () {
      removeCard(c.req.id);
    });
    c.node.appendChild(el('div', 'buttons gone-actions', dismiss));
  }

  // How a gone request ended, from the audit trail (its call's decision row).
  var ENDED = {
    approved: ['Approved elsewhere (the Web console, the terminal console or a root shell): ' +
      'its action runs.', 'ok'],
    rejected: ['Rejected elsewhere (the Web console, the terminal console or a root shell): ' +
      'its action did not run.', null],
    expired: ['Expired: nobody decided in time; its action did not run.', null],
    withdrawn: ['Withdrawn: its caller cancelled it; its action did not run.', null]
  };

  function tellEndings(list, triesLeft) {
    exec(COMMANDS.audit, TIMEOUT_MS.approvals).then(function (r) {
      var rows = r.errno === EXIT.Success ? parseJson(r.stdout) : null;
      var decisions = {};
      (Array.isArray(rows) ? rows : []).forEach(function (row) {
        if (row !== null && typeof row === 'object' && ENDED[str(row.decision)]) {
          decisions[str(row.call_id)] = str(row.decision);
        }
      });
      var unknown = list.filter(function (c) {
        var ended = ENDED[decisions[c.req.call_id]];
        if (c.req.call_id && ended) {
          message(c.parts.message, ended[0], ended[1]);
          return false;
        }
        return true;
      });
      if (unknown.length && triesLeft > 0) {
        setTimeout(function () {
          tellEndings(unknown, triesLeft - 1);
        }, POLL_MS);
      } else {
        unknown.forEach(function (c) {
          message(c.parts.message, 'No longer waiting: decided elsewhere, expired, or withdrawn by ' +
            'its caller (the audit trail does not say yet: ' + hint('protocol audit') + ').');
        });
      }
    }, function () {
      list.forEach(function (c) {
        message(c.parts.message, 'No longer waiting: decided elsewhere, expired, or withdrawn by its caller.');
      });
    });
  }

  // ---------------------------------------------------------------------------------
  // Timed UI grants
  // ---------------------------------------------------------------------------------

  // id -> { g, node, parts, confirming, busy, deadline }
  var grantRows = {};
  var grantNoteTimer = null;

  // A grant as the page keeps it (`protocol ui-grants --json`); its app and id are shown
  // from `shown`, escaped by nl2sh.
  function normalizeGrant(raw) {
    if (raw === null || typeof raw !== 'object') {
      return null;
    }
    var o = raw.shown !== null && typeof raw.shown === 'object' ? raw.shown : {};
    var num = function (v) {
      return typeof v === 'number' && isFinite(v) && v >= 0 ? Math.floor(v) : 0;
    };
    return {
      id: str(raw.id),
      app: str(raw.app),
      origin: str(raw.origin),
      minutes: num(raw.minutes),
      seconds_left: num(raw.seconds_left),
      used: num(raw.used),
      shown: { id: str(o.id), app: str(o.app) }
    };
  }

  function grantSignature(g) {
    return JSON.stringify([g.id, g.app, g.origin, g.minutes]);
  }

  function timeLeftText(seconds) {
    var s = Math.max(0, Math.round(seconds));
    var m = Math.floor(s / 60);
    return (m ? m + ' min ' : '') + (s % 60) + ' s left';
  }

  function grantUsedText(used) {
    return used + (used === 1 ? ' action' : ' actions') + ' covered so far';
  }

  function updateGrantTime(row) {
    var left = Math.max(0, (row.deadline - Date.now()) / 1000);
    row.parts.time.setAttribute('data-seconds', String(Math.round(left)));
    setText(row.parts.time, timeLeftText(left));
  }

  function grantNote(text, kind) {
    var node = $('ui-grants-message');
    message(node, text, kind);
    if (grantNoteTimer !== null) {
      clearTimeout(grantNoteTimer);
    }
    grantNoteTimer = setTimeout(function () {
      grantNoteTimer = null;
      message(node, '');
    }, UI_GRANT_NOTE_MS);
  }

  function removeGrantRow(id) {
    var row = grantRows[id];
    if (row && row.node.parentNode) {
      row.node.parentNode.removeChild(row.node);
    }
    delete grantRows[id];
    setText($('ui-grants-count'), Object.keys(grantRows).length ? '(' + Object.keys(grantRows).length + ')' : '');
  }

  function buildGrantRow(g) {
    var row = { g: g, confirming: false, busy: false, deadline: Date.now(), parts: {} };
    var p = row.parts;
    p.time = el('span', 'time-left');
    p.used = el('span', 'ui-grant-used', grantUsedText(g.used));
    p.revoke = el('button', 'btn btn-reject revoke-ui-grant', 'Revoke…');
    p.revoke.type = 'button';
    p.confirm = el('div', 'confirm');
    p.confirm.hidden = true;
    p.message = el('p', 'message');
    p.message.hidden = true;
    row.node = el('li', 'ui-grant',
      el('div', 'ui-grant-what',
        el('span', 'ui-grant-app', g.shown.app),
        el('span', 'rid', g.shown.id)),
      el('p', 'meta', 'UI actions from ' + (g.origin ? plain(g.origin) : '?') + ', ' + g.minutes +
        ' min given'),
      el('p', 'ui-grant-state', p.time, ' · ', p.used),
      ID_RE.test(g.id) ? el('div', 'buttons', p.revoke) :
        el('p', 'warn', 'This grant\'s id is not in the form nl2sh uses; revoke it from a root ' +
          'shell: ' + hint('protocol ui-grants') + '.'),
      p.confirm,
      p.message);
    row.node.setAttribute('data-app', g.shown.app);
    p.revoke.addEventListener('click', function () {
      openRevoke(row);
    });
    return row;
  }

  function closeRevoke(row) {
    row.confirming = false;
    clear(row.parts.confirm);
    row.parts.confirm.hidden = true;
    row.parts.revoke.disabled = row.busy;
  }

  // The first step: what ends, then Revoke now / Cancel.
  function openRevoke(row) {
    if (row.busy || row.confirming) {
      return;
    }
    var g = row.g;
    var box = row.parts.confirm;
    row.confirming = true;
    row.parts.revoke.disabled = true;
    message(row.parts.message, '');
    var go = el('button', 'btn btn-reject revoke-now', 'Revoke now');
    var cancel = el('button', 'btn btn-quiet', 'Cancel');
    go.type = 'button';
    cancel.type = 'button';
    box.appendChild(el('p', null, 'Revoke timed UI grant ' + g.shown.id + '? UI actions of ' +
      (g.origin ? plain(g.origin) : '?') + ' in ' + g.shown.app + ' ask you again.'));
    box.appendChild(el('div', 'buttons', go, cancel));
    cancel.addEventListener('click', function () {
      closeRevoke(row);
    });
    go.addEventListener('click', function () {
      revokeGrant(row);
    });
    showStep(box, go);
  }

  function revokeGrant(row) {
    if (row.busy) {
      return;
    }
    var cmd = revokeUiGrantCommand(row.g.id);
    if (cmd === null) {
      closeRevoke(row);
      return;
    }
    row.busy = true;
    Array.prototype.forEach.call(row.parts.confirm.querySelectorAll('button'), function (n) {
      n.disabled = true;
    });
    message(row.parts.message, 'Revoking…');
    exec(cmd, TIMEOUT_MS.decide).then(function (r) {
      if (r.errno === EXIT.Success) {
        removeGrantRow(row.g.id);
        grantNote('Revoked: UI actions in ' + row.g.shown.app + ' ask you again.', 'ok');
      } else if (r.errno === EXIT.NoSuchRequest) {
        removeGrantRow(row.g.id);
        grantNote('That grant had ended already (its time was up, another app came to the ' +
          'front, or it was revoked elsewhere).');
      } else {
        message(row.parts.message, failure('Revoking', r), 'error');
      }
    }, function (e) {
      message(row.parts.message, 'Revoking failed: ' + e.message + '.', 'error');
    }).then(function () {
      row.busy = false;
      closeRevoke(row);
      schedule(0);
    });
  }

  function renderUiGrants(list, note) {
    var box = $('ui-grants');
    var seen = {};
    var now = Date.now();
    (list || []).forEach(function (raw) {
      var g = normalizeGrant(raw);
      if (g === null || !g.id || seen[g.id]) {
        return;
      }
      seen[g.id] = true;
      var row = grantRows[g.id];
      if (row && grantSignature(row.g) !== grantSignature(g)) {
        // Another grant under the same id: never keep a confirm step made for the old one.
        removeGrantRow(g.id);
        row = null;
      }
      if (!row) {
        row = buildGrantRow(g);
        grantRows[g.id] = row;
        box.appendChild(row.node);
      }
      row.g.used = g.used;
      row.deadline = now + g.seconds_left * 1000;
      setText(row.parts.used, grantUsedText(g.used));
      updateGrantTime(row);
    });
    Object.keys(grantRows).forEach(function (id) {
      // A grant that ended leaves; one being revoked here waits for its answer.
      if (!seen[id] && !grantRows[id].busy) {
        removeGrantRow(id);
      }
    });
    var count = Object.keys(grantRows).length;
    setText($('ui-grants-count'), count ? '(' + count + ')' : '');
    setText($('ui-grants-summary'), note || (count ?
      'The UI actions (taps, gestures, text, keys) of a caller in an app run unasked until ' +
      'its time is up, another app comes to the front, or you revoke it.' :
      'None. Approving a tap, gesture, text or key in an app may let the same caller\'s ' +
      'next UI actions there run unasked for some minutes.'));
  }

  // The countdown between polls.
  function tickGrants() {
    Object.keys(grantRows).forEach(function (id) {
      updateGrantTime(grantRows[id]);
    });
  }

  // ---------------------------------------------------------------------------------
  // Buttons
  // ---------------------------------------------------------------------------------

  // Run `command` for `button`; `okText` is the words on success (or makes them from the
  // answer); `after`, if given, runs once it ended, either way.
  function runButton(button, what, command, timeoutMs, busyText, okText, after) {
    var out = $('service-message');
    button.disabled = true;
    message(out, busyText);
    exec(command, timeoutMs).then(function (r) {
      if (after) {
        after();
      }
      if (r.errno === EXIT.Success) {
        message(out, typeof okText === 'function' ? okText(r) : okText, 'ok');
      } else {
        message(out, failure(what, r), 'error');
      }
    }, function (e) {
      if (after) {
        after();
      }
      message(out, what + ' failed: ' + e.message + '.', 'error');
    }).then(function () {
      button.disabled = false;
      schedule(0);
    });
  }

  function wire() {
    $('start').addEventListener('click', function () {
      runButton($('start'), 'Starting the service', COMMANDS.start, TIMEOUT_MS.start,
        'Starting the service…', 'Started.');
    });
    $('restart').addEventListener('click', openRestart);
    $('restart-cancel').addEventListener('click', closeRestart);
    $('restart-now').addEventListener('click', restartNow);
    $('copy-codex').addEventListener('click', function () {
      copyText($('snippet-codex').textContent, $('copy-codex'));
    });
    $('copy-json').addEventListener('click', function () {
      copyText($('snippet-json').textContent, $('copy-json'));
    });
    setText($('hint-token-command'), hint('config set protocol_token -'));
    $('console').addEventListener('click', function () {
      runButton($('console'), 'Opening the Web console', COMMANDS.console, TIMEOUT_MS.console,
        'Opening the Web console in the browser…',
        'The Web console opens in your browser, logged in (the link works once).');
    });
  }

  // ---------------------------------------------------------------------------------
  // Polling
  // ---------------------------------------------------------------------------------

  var timer = null;
  var polling = false;
  var again = false;

  function schedule(ms) {
    if (polling) {
      again = true;
      return;
    }
    if (timer !== null) {
      clearTimeout(timer);
    }
    timer = setTimeout(poll, ms);
  }

  // The banner's state: the running service's `auto_approve`, else the saved key, which
  // approvald reads at each decision (docs/CLI.md, "config"). Unreadable leaves it as it was.
  function readAutoApprove() {
    if (status.autoApprove !== null) {
      renderAutoApprove(status.autoApprove);
      return Promise.resolve();
    }
    return exec(COMMANDS.autoApprove, TIMEOUT_MS.status).then(function (r) {
      var v = r.stdout.trim();
      if (r.errno === EXIT.Success && (v === 'true' || v === 'false')) {
        renderAutoApprove(v === 'true');
      }
    });
  }

  function hostMissing(text) {
    var banner = $('host-error');
    setText(banner, text);
    banner.hidden = false;
  }

  function poll() {
    timer = null;
    if (document.hidden) {
      return; // resumed by visibilitychange
    }
    if (!hasHost()) {
      hostMissing('This page runs inside a root manager\'s module WebUI (KernelSU, APatch, ' +
        'WebUI X); the manager\'s bridge (window.ksu) is not here. On Magisk, install WebUI X, ' +
        'or press the module\'s Action button to open the Web console in the browser.');
      setText($('service-summary'), 'Unavailable.');
      setText($('approvals-summary'), 'Unavailable.');
      setText($('ui-grants-summary'), 'Unavailable.');
      return;
    }
    $('host-error').hidden = true;
    polling = true;
    exec(COMMANDS.status, TIMEOUT_MS.status).then(function (r) {
      renderStatus(r);
      if (!status.running) {
        var stopped = status.running === false ? 'None while the service is not running.' : null;
        renderAutoApprove(false);
        renderApprovals([], stopped);
        renderUiGrants([], stopped);
        return null;
      }
      return readAutoApprove().then(function () {
        return exec(COMMANDS.approvals, TIMEOUT_MS.approvals);
      }).then(function (a) {
        var list = a.errno === EXIT.Success ? parseJson(a.stdout) : null;
        if (a.errno === EXIT.Success && Array.isArray(list)) {
          renderApprovals(list, null);
        } else if (a.errno === EXIT.Success) {
          setText($('approvals-summary'), 'nl2sh answered something that is not a list; trying again.');
        } else {
          setText($('approvals-summary'), failure('Reading the requests', a));
        }
        return exec(COMMANDS.uiGrants, TIMEOUT_MS.approvals);
      }).then(function (u) {
        var list = u.errno === EXIT.Success ? parseJson(u.stdout) : null;
        if (u.errno === EXIT.Success && Array.isArray(list)) {
          renderUiGrants(list, null);
        } else if (u.errno === EXIT.Success) {
          setText($('ui-grants-summary'), 'nl2sh answered something that is not a list; trying again.');
        } else {
          setText($('ui-grants-summary'), failure('Reading the timed UI grants', u));
        }
      });
    }).catch(function (e) {
      setText($('service-summary'), 'No answer: ' + e.message + '.');
    }).then(function () {
      polling = false;
      var soon = again;
      again = false;
      schedule(soon ? 0 : POLL_MS);
    });
  }

  document.addEventListener('visibilitychange', function () {
    if (!document.hidden && !polling && timer === null) {
      schedule(0);
    }
  });

  function start() {
    wire();
    setInterval(tickGrants, 1000);
    schedule(0);
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start);
  } else {
    start();
  }
}());

// nl2sh Web console: the device owner's pages.
//
// Security rules of this file (the page is served with a strict Content-Security-Policy):
// * every string that comes from the server is hostile; it reaches the DOM only as a
//   text node, an input's value or a data-* attribute, never as markup (this file uses
//   no API that parses an HTML string);
// * elements are built with el(), which sets only attributes from a short allowlist;
// * every change (POST) carries the CSRF token and the JSON content type.
'use strict';

(function () {
  // ---------------------------------------------------------------------------------
  // DOM helpers
  // ---------------------------------------------------------------------------------

  // Attributes el() may set with setAttribute. None of them can run script or load
  // anything; href is further limited to same-document fragments.
  var SAFE_ATTRS = {
    class: true, id: true, type: true, for: true, placeholder: true, autocomplete: true,
    title: true, name: true, role: true, min: true, max: true, step: true,
    inputmode: true, autocapitalize: true, spellcheck: true, tabindex: true,
    scope: true, colspan: true, lang: true, dir: true, href: true, maxlength: true,
    enterkeyhint: true
  };
  // Properties el() may set directly on the element.
  var SAFE_PROPS = { value: true, checked: true, disabled: true, readOnly: true, hidden: true };

  function el(tag, attrs) {
    var node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (name) {
        var v = attrs[name];
        if (v === null || v === undefined || v === false) {
          return;
        }
        if (SAFE_PROPS[name]) {
          node[name] = v;
          return;
        }
        var lower = name.toLowerCase();
        var ok = SAFE_ATTRS[lower] || /^data-[a-z0-9-]+$/.test(lower) || /^aria-[a-z]+$/.test(lower);
        if (!ok || lower.slice(0, 2) === 'on') {
          throw new Error('el(): attribute not allowed: ' + name);
        }
        if (lower === 'href' && String(v).charAt(0) !== '#') {
          throw new Error('el(): only #fragment links are allowed');
        }
        node.setAttribute(lower, v === true ? '' : String(v));
      });
    }
    for (var i = 2; i < arguments.length; i++) {
      append(node, arguments[i]);
    }
    return node;
  }

  // append(parent, child, ...): strings become text nodes; arrays are flattened; null,
  // undefined and false are skipped.
  function append(parent, child) {
    if (arguments.length > 2) {
      for (var i = 1; i < arguments.length; i++) {
        append(parent, arguments[i]);
      }
      return;
    }
    if (child === null || child === undefined || child === false) {
      return;
    }
    if (Array.isArray(child)) {
      child.forEach(function (c) { append(parent, c); });
      return;
    }
    if (child instanceof Node) {
      parent.appendChild(child);
      return;
    }
    parent.appendChild(document.createTextNode(String(child)));
  }

  function clear(node) {
    while (node.firstChild) {
      node.removeChild(node.firstChild);
    }
  }

  function $(id) {
    return document.getElementById(id);
  }

  // Server values, coerced to what the page expects (a hostile or broken server cannot
  // make the page call a method on a non-string, say).
  function str(v) {
    if (typeof v === 'string') {
      return v;
    }
    if (typeof v === 'number' || typeof v === 'boolean') {
      return String(v);
    }
    return '';
  }
  function has(v) {
    return v !== null && v !== undefined && str(v) !== '';
  }
  function arr(v) {
    return Array.isArray(v) ? v : [];
  }
  function obj(v) {
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? v : {};
  }

  // A command or action shown exactly as the server sent it: every text from a caller, a
  // tool or a model arrives escaped by nl2sh's one escaping function (web/src/views.rs,
  // proto/src/display.rs), so no invisible, control or direction-changing character is
  // left to spell out here, and the page has no escaping of its own to drift from it.
  function actionBlock(text, extraClass) {
    return [el('pre', { class: 'action' + (extraClass ? ' ' + extraClass : '') }, str(text))];
  }

  // What an action carries (an fs.write's content), whole: its size and SHA-256, then
  // every line, each already escaped by the server's one escaping function.
  function dataBlock(d) {
    if (d === null || typeof d !== 'object' || !Array.isArray(d.lines)) {
      return null;
    }
    return el('div', { class: 'data-block' },
      el('h4', null, str(d.header)),
      el('pre', { class: 'action data-lines' }, d.lines.map(str).join('\n')));
  }

  function pad2(n) {
    return (n < 10 ? '0' : '') + n;
  }

  // Every time on the page in one form, the device's local time: "2026-12-05 09:31:02"
  // (the raw value stays in the element's title).
  function fmtTime(s) {
    var raw = str(s);
    if (!raw) {
      return '';
    }
    var d = new Date(raw);
    if (isNaN(d.getTime())) {
      return raw;
    }
    return d.getFullYear() + '-' + pad2(d.getMonth() + 1) + '-' + pad2(d.getDate()) + ' ' +
      pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + ':' + pad2(d.getSeconds());
  }

  // A time left, in one form everywhere: "1:05 left", "0:09 left".
  function fmtLeft(seconds) {
    return Math.floor(seconds / 60) + ':' + pad2(seconds % 60) + ' left';
  }

  // Text whose `backticked` words are commands or names (help and warnings from the
  // server, the page's own hints): those words become <code>, the rest stays text. An
  // unpaired backtick stays as it is.
  function codeText(text) {
    var parts = str(text).split('`');
    var out = [];
    for (var i = 0; i < parts.length; i++) {
      if (i % 2 === 1 && i < parts.length - 1) {
        out.push(el('code', null, parts[i]));
      } else if (i % 2 === 1) {
        out.push('`' + parts[i]);
      } else if (parts[i]) {
        out.push(parts[i]);
      }
    }
    return out;
  }

  function timeEl(s) {
    var raw = str(s);
    return el('span', { class: 'time', title: raw }, fmtTime(raw));
  }

  // ---------------------------------------------------------------------------------
  // API
  // ---------------------------------------------------------------------------------

  var state = {
    csrf: null,
    session: null,
    loggedIn: false,
    page: null,          // the page shown: 'mcp' | 'approvals' | 'tasks' | 'audit'
    renderSeq: 0,        // bumped on every page change; stale async results are dropped
    pollTimer: null,
    pollBusy: false,
    tickTimer: null,
    statusTimer: null,   // the service's state (automatic approval), every 5 s
    pageTimer: null,     // a list page's own refresh (tasks)
    lostAt: 0,           // when the service stopped answering; 0 while it answers
    approvals: null      // the approvals page's live state, when it is shown
  };

  function ApiError(status, kind, message) {
    this.status = status;
    this.kind = kind;
    this.message = message;
  }
  ApiError.prototype = Object.create(Error.prototype);
  ApiError.prototype.name = 'ApiError';

  // fetch() a JSON API path. Resolves with the parsed body (null for 204); rejects with an
  // ApiError. A 401 (other than at login) sends the owner back to the login screen.
  function api(method, path, body, opts) {
    opts = opts || {};
    var init = { method: method, credentials: 'same-origin', cache: 'no-store', headers: {} };
    if (method !== 'GET') {
      init.headers['Content-Type'] = 'application/json';
      if (!opts.noCsrf) {
        init.headers['X-CSRF-Token'] = state.csrf || '';
      }
      init.body = JSON.stringify(body === undefined ? {} : body);
    }
    init.headers.Accept = 'application/json';
    return fetch(path, init).then(function (res) {
      if (res.status === 204) {
        return null;
      }
      return res.text().then(function (text) {
        var data = null;
        try {
          data = text ? JSON.parse(text) : null;
        } catch (e) {
          data = null;
        }
        if (res.ok) {
          if (data === null || typeof data !== 'object') {
            throw new ApiError(res.status, 'bad_response', 'Unexpected answer from the server (HTTP ' + res.status + ').');
          }
          return data;
        }
        var d = obj(data);
        var err = new ApiError(res.status, str(d.kind) || 'http_' + res.status,
          str(d.error) || 'The server answered HTTP ' + res.status + '.');
        if (res.status === 401 && !opts.no401 && state.loggedIn) {
          showLogin(endedReason(), true);
        }
        throw err;
      });
    }, function () {
      throw new ApiError(0, 'network', 'Cannot reach the console server.');
    });
  }

  function errorText(err) {
    if (err && typeof err.message === 'string' && err.message) {
      return err.message;
    }
    return 'Something went wrong.';
  }

  // ---------------------------------------------------------------------------------
  // Login, session, shell
  // ---------------------------------------------------------------------------------

  function stopTimers() {
    if (state.pollTimer) {
      clearTimeout(state.pollTimer);
      state.pollTimer = null;
    }
    if (state.tickTimer) {
      clearInterval(state.tickTimer);
      state.tickTimer = null;
    }
    if (state.statusTimer) {
      clearTimeout(state.statusTimer);
      state.statusTimer = null;
    }
    stopPageTimer();
  }

  function stopPageTimer() {
    if (state.pageTimer) {
      clearTimeout(state.pageTimer);
      state.pageTimer = null;
    }
  }

  // `notice`: the message says why a session ended (not an error of the page's).
  function showLogin(message, notice) {
    state.loggedIn = false;
    state.csrf = null;
    state.session = null;
    state.page = null;
    state.approvals = null;
    state.renderSeq++;
    stopTimers();
    clear($('page'));
    $('app').hidden = true;
    $('loading').hidden = true;
    $('login-screen').hidden = false;
    var e = $('login-error');
    e.className = notice ? 'notice' : 'error';
    clear(e);
    append(e, codeText(message || ''));
    e.hidden = !message;
    setAutoApprove(false);
    setReach(true);
    document.title = 'nl2sh';
  }

  // Why the session ended, as far as this page can know (approvald keeps sessions in
  // memory and says only "not logged in"): this browser's own record of its session
  // (localStorage: when it expires, whether the owner logged out here; no secret), and
  // whether the service was out of reach just before.
  var SESSION_RECORD = 'nl2sh.session';

  function sessionRecord() {
    try {
      return obj(JSON.parse(window.localStorage.getItem(SESSION_RECORD) || 'null'));
    } catch (e) {
      return {};
    }
  }

  function saveSessionRecord(record) {
    try {
      window.localStorage.setItem(SESSION_RECORD, JSON.stringify(record));
    } catch (e) {
      // no storage (a private window): the login page says less
    }
  }

  function endedReason() {
    var r = sessionRecord();
    if (r.expires === undefined && r.out === undefined) {
      return null; // this browser never held a session: nothing ended
    }
    if (r.out === true) {
      return 'You logged out (here or in another tab of this browser).';
    }
    if (typeof r.expires === 'number' && Date.now() >= r.expires - 5000) {
      return 'Your session ended: 12 hours passed since you logged in.';
    }
    if (state.lostAt && Date.now() - state.lostAt < 120000) {
      return 'Your session ended while the service was out of reach: the service stopped or restarted.';
    }
    return 'Your session was ended: by `nl2sh web logout --all` on the device, by a restart ' +
      'of the service, or by 16 newer logins.';
  }

  function showApp() {
    var s = state.session || {};
    state.loggedIn = true;
    $('loading').hidden = true;
    $('login-screen').hidden = true;
    $('login-error').hidden = true;
    $('app').hidden = false;
    $('version').textContent = has(s.version) ? 'v' + str(s.version) : '';
    setInsecure(s.insecure_remote === true);
    startPolling();
    route();
  }

  function setInsecure(on) {
    if (on) {
      $('insecure-banner').hidden = false;
    } else if (state.session && state.session.insecure_remote !== true) {
      $('insecure-banner').hidden = true;
    }
  }

  function loadSession() {
    return api('GET', '/api/session', undefined, { no401: true }).then(function (s) {
      state.session = s;
      state.csrf = str(s.csrf);
      var left = Number(s.expires_in_secs);
      saveSessionRecord({ expires: Date.now() + (left > 0 ? left : 0) * 1000 });
      showApp();
    }, function (err) {
      if (err.status === 401) {
        showLogin(endedReason(), true);
      } else {
        showLogin('The console could not load: ' + errorText(err));
      }
    });
  }

  // A "#login=CODE" fragment: trade the one-time code for a session. The fragment is
  // removed from the address bar (and history) straight away, worked or not.
  function loginFromFragment() {
    var code = location.hash.slice('#login='.length);
    try {
      code = decodeURIComponent(code);
    } catch (e) {
      // keep it as it is
    }
    history.replaceState(null, '', location.pathname);
    return api('POST', '/api/login', { code: code }, { noCsrf: true, no401: true }).then(function (r) {
      state.csrf = str(r.csrf);
      return loadSession();
    }, function (err) {
      var msg;
      if (err.status === 401 || err.kind === 'not_logged_in') {
        msg = 'This login link was already used or has expired. Run `nl2sh web login` on the device for a new one.';
      } else if (err.status === 429 || err.kind === 'rate_limited') {
        msg = 'Too many login attempts. Wait a minute, then run `nl2sh web login` on the device for a new link.';
      } else {
        msg = 'Login failed: ' + errorText(err);
      }
      // An owner who is already logged in keeps the session; otherwise, the login screen.
      return api('GET', '/api/session', undefined, { no401: true }).then(function (s) {
        state.session = s;
        state.csrf = str(s.csrf);
        showApp();
        flash(msg);
      }, function () {
        showLogin(msg);
      });
    });
  }

  // A short-lived notice at the top of the page area.
  function flash(message) {
    var page = $('page');
    var n = el('p', { class: 'flash error', role: 'alert' }, codeText(message));
    page.insertBefore(n, page.firstChild);
  }

  function logout() {
    var b = $('logout');
    b.disabled = true;
    api('POST', '/api/logout', {}).then(function () {
      b.disabled = false;
      saveSessionRecord({ out: true });
      showLogin(endedReason(), true);
    }, function (err) {
      b.disabled = false;
      if (err.status !== 401) {
        flash('Logout failed: ' + errorText(err));
      }
    });
  }

  // ---------------------------------------------------------------------------------
  // Routing
  // ---------------------------------------------------------------------------------

  var PAGES = ['mcp', 'approvals', 'tasks', 'audit'];

  function parseHash() {
    var h = location.hash.replace(/^#/, '');
    var name = h;
    var arg = null;
    var slash = h.indexOf('/');
    if (slash >= 0) {
      name = h.slice(0, slash);
      arg = h.slice(slash + 1);
      try {
        arg = decodeURIComponent(arg);
      } catch (e) {
        arg = null;
      }
    }
    if (PAGES.indexOf(name) < 0) {
      name = 'mcp';
      arg = null;
    }
    return { page: name, arg: arg };
  }

  function route() {
    if (!state.loggedIn) {
      return;
    }
    var r = parseHash();
    state.renderSeq++;
    state.page = r.page;
    state.approvals = null;
    if (state.tickTimer) {
      clearInterval(state.tickTimer);
      state.tickTimer = null;
    }
    stopPageTimer();
    var buttons = document.querySelectorAll('#menu .menu-item');
    for (var i = 0; i < buttons.length; i++) {
      var active = buttons[i].getAttribute('data-page') === r.page;
      buttons[i].classList.toggle('active', active);
      if (active) {
        buttons[i].setAttribute('aria-current', 'page');
        if (buttons[i].scrollIntoView && window.matchMedia('(max-width: 700px)').matches) {
          buttons[i].scrollIntoView({ block: 'nearest', inline: 'nearest' });
        }
      } else {
        buttons[i].removeAttribute('aria-current');
      }
    }
    var page = $('page');
    clear(page);
    page.setAttribute('data-page', r.page);
    window.scrollTo(0, 0);
    if (r.page === 'mcp') {
      renderMcp(page);
    } else if (r.page === 'approvals') {
      renderApprovals(page);
    } else if (r.page === 'tasks') {
      if (r.arg !== null && r.arg !== '') {
        renderTask(page, r.arg);
      } else {
        renderTasks(page);
      }
    } else if (r.page === 'audit') {
      renderAudit(page);
    }
  }

  function go(hash) {
    if (location.hash === hash) {
      route();
    } else {
      location.hash = hash;
    }
  }

  // ---------------------------------------------------------------------------------
  // Small UI pieces
  // ---------------------------------------------------------------------------------

  function pageHeader(title, actions) {
    return el('div', { class: 'page-header' },
      el('h2', null, title),
      el('div', { class: 'page-actions' }, actions || []));
  }

  function button(label, attrs, onClick) {
    var a = Object.assign({ type: 'button', class: 'btn' }, attrs || {});
    var b = el('button', a, label);
    if (onClick) {
      b.addEventListener('click', onClick);
    }
    return b;
  }

  function statusMsg(text, cls) {
    return el('p', { class: 'msg ' + (cls || '') }, codeText(text));
  }

  // Is this render still the one on screen?
  function current(seq) {
    return state.loggedIn && seq === state.renderSeq;
  }

  // Copy text to the clipboard, then say "Copied" next to the button.
  function copyText(text, btn) {
    function done(ok) {
      var next = btn.nextSibling;
      if (next && next.classList && (next.classList.contains('copied') || next.classList.contains('copy-failed'))) {
        next.parentNode.removeChild(next);
      }
      var note = ok ? el('span', { class: 'copied', role: 'status' }, 'Copied')
        : el('span', { class: 'copy-failed', role: 'status' }, 'Copy failed: select the text and copy it');
      btn.parentNode.insertBefore(note, btn.nextSibling);
      setTimeout(function () {
        if (note.parentNode) {
          note.parentNode.removeChild(note);
        }
      }, ok ? 2000 : 5000);
    }
    function fallback() {
      var ta = el('textarea', { class: 'offscreen', 'aria-hidden': 'true', tabindex: '-1' });
      ta.value = text;
      ta.readOnly = true;
      document.body.appendChild(ta);
      var ok = false;
      try {
        ta.focus();
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
      navigator.clipboard.writeText(text).then(function () { done(true); }, fallback);
    } else {
      fallback();
    }
  }

  function copyButton(id, getText, label) {
    var b = button(label || 'Copy', { id: id, class: 'btn btn-small copy' });
    b.addEventListener('click', function () {
      copyText(getText(), b);
    });
    return b;
  }

  function riskLabel(risk) {
    var r = str(risk) || 'unknown';
    var level = 'neutral';
    if (r === 'medium' || r === 'high') {
      level = 'amber';
    } else if (r === 'dangerous' || r === 'critical') {
      level = 'red';
    }
    return el('span', { class: 'risk risk-' + level, 'data-risk': r }, r.replace(/_/g, ' '));
  }

  // ---------------------------------------------------------------------------------
  // MCP / A2A page
  // ---------------------------------------------------------------------------------

  var SNIPPETS = [
    { key: 'codex_toml', id: 'copy-codex', pre: 'snippet-codex', title: 'Codex (~/.codex/config.toml)' },
    { key: 'mcp_servers_json', id: 'copy-json', pre: 'snippet-json', title: 'mcpServers JSON' },
    { key: 'startup_command', id: 'copy-startup', pre: 'snippet-startup', title: 'Start the service' },
    { key: 'a2a_request', id: 'copy-a2a', pre: 'snippet-a2a', title: 'A2A SendMessage (curl)' }
  ];

  function renderMcp(page) {
    var seq = state.renderSeq;
    var body = el('div', { id: 'connection', class: 'section' }, el('p', { class: 'muted' }, 'Loading…'));
    var refresh = button('Refresh', { id: 'refresh-connection' }, function () {
      loadConnection(body, seq, refresh);
    });
    append(page, pageHeader('MCP / A2A', [refresh]));
    append(page, body);
    append(page, renderSettingsSection(seq));
    loadConnection(body, seq, refresh);
  }

  function loadConnection(body, seq, refresh) {
    refresh.disabled = true;
    api('GET', '/api/connection').then(function (c) {
      if (!current(seq)) {
        return;
      }
      refresh.disabled = false;
      clear(body);
      append(body, connectionView(c, seq));
    }, loadFailed(seq, body, refresh));
  }

  // What a failed load shows in `box`, unless the page has moved on since (`seq`); its
  // refresh button, if any, works again.
  function loadFailed(seq, box, refresh) {
    return function (err) {
      if (!current(seq)) {
        return;
      }
      if (refresh) {
        refresh.disabled = false;
      }
      clear(box);
      append(box, statusMsg(errorText(err), 'error'));
    };
  }

  function connectionStatus(c) {
    var st = str(c.state);
    var transport = str(c.transport);
    var text;
    if (st === 'running' && transport === 'stdio') {
      text = 'A local client runs nl2sh over stdio; no HTTP endpoint';
    } else if (st === 'running') {
      var where = has(c.mcp_url) ? str(c.mcp_url) : str(c.listen);
      text = (transport === 'service' ? 'Running as the service over HTTP' : 'Running over HTTP') +
        (where ? ' at ' + where : '');
    } else {
      text = has(c.detail) ? str(c.detail) : (st === 'stopped' ? 'Stopped' : 'State unknown');
    }
    var cls = st === 'running' ? 'running' : (st === 'stopped' ? 'stopped' : 'unknown');
    var word = st === 'running' ? 'Running' : (st === 'stopped' ? 'Stopped' : 'Unknown');
    var line = el('div', { id: 'connection-status', class: 'status status-' + cls, 'data-state': cls, role: 'status' },
      el('span', { class: 'status-dot', 'aria-hidden': 'true' }),
      el('span', { class: 'status-word' }, word),
      el('span', { class: 'status-text' }, text));
    var out = [line];
    if (st === 'running' && has(c.detail)) {
      out.push(el('p', { class: 'status-detail muted', id: 'connection-detail' }, str(c.detail)));
    }
    return out;
  }

  function connectionView(c, seq) {
    var frag = connectionStatus(c);
    if (obj(c.web).insecure_remote === true) {
      setInsecure(true);
    }

    var dl = el('dl', { class: 'kv', id: 'connection-details' });
    function row(label, value, mono, key) {
      if (!has(value)) {
        return;
      }
      append(dl, el('div', { class: 'kv-row', 'data-key': key },
        el('dt', null, label),
        el('dd', { class: mono ? 'mono' : null }, str(value))));
    }
    row('Version', c.version, false, 'version');
    row('MCP URL', c.mcp_url, true, 'mcp_url');
    row('A2A URL', c.a2a_url, true, 'a2a_url');
    row('Agent Card URL', c.card_url, true, 'card_url');
    row('Listen', c.listen, true, 'listen');
    row('PID', c.pid, true, 'pid');
    row('Since', fmtTime(c.since), false, 'since');
    row('Configuration', c.config_path, true, 'config_path');

    var tokenDd = el('dd', { id: 'token-cell' });
    append(dl, el('div', { class: 'kv-row', 'data-key': 'token' }, el('dt', null, 'Token'), tokenDd));
    tokenHidden(tokenDd, c.token_available === true, seq);
    frag.push(dl);

    // Snippets
    var snippets = obj(c.snippets);
    var examples = c.examples === true;
    var sec = el('section', { class: 'section', id: 'snippets' },
      el('h3', null, 'Connect a client'));
    SNIPPETS.forEach(function (s) {
      var text = str(snippets[s.key]);
      var pre = el('pre', { class: 'snippet-code', id: s.pre }, text);
      append(sec, el('div', { class: 'snippet', 'data-snippet': s.key },
        el('div', { class: 'snippet-head' },
          el('h4', null, s.title),
          examples ? el('span', { class: 'tag example-tag' }, 'Example (service not running; default loopback address)') : null,
          el('span', { class: 'spacer' }),
          copyButton(s.id, function () { return pre.textContent; })),
        pre));
    });
    frag.push(sec);
    return frag;
  }

  function tokenHidden(dd, available, seq) {
    clear(dd);
    if (!available) {
      append(dd, el('span', { class: 'muted', id: 'token-state' }, 'no HTTP token (not running over HTTP)'));
      return;
    }
    var reveal = button('Reveal token', { id: 'reveal-token', class: 'btn btn-small' });
    var err = el('span', { class: 'error inline', hidden: true });
    reveal.addEventListener('click', function () {
      reveal.disabled = true;
      api('POST', '/api/connection/token', {}).then(function (r) {
        if (!current(seq)) {
          return;
        }
        tokenShown(dd, str(r.token), seq);
      }, function (e) {
        if (!current(seq)) {
          return;
        }
        reveal.disabled = false;
        err.textContent = errorText(e);
        err.hidden = false;
      });
    });
    append(dd, el('div', { class: 'token-row' },
      el('span', { class: 'muted', id: 'token-state' }, 'hidden'), reveal, err));
  }

  function tokenShown(dd, token, seq) {
    clear(dd);
    var input = el('input', {
      id: 'token-value', class: 'mono token-input', type: 'text', readOnly: true,
      autocomplete: 'off', spellcheck: 'false', autocapitalize: 'off', 'aria-label': 'HTTP token'
    });
    input.value = token;
    input.addEventListener('focus', function () { input.select(); });
    append(dd, el('div', { class: 'token-row' },
      input,
      copyButton('copy-token', function () { return input.value; }),
      button('Hide', { id: 'hide-token', class: 'btn btn-small' }, function () {
        tokenHidden(dd, true, seq);
      })));
  }

  // ---------------------------------------------------------------------------------
  // Settings (on the MCP / A2A page)
  // ---------------------------------------------------------------------------------

  // The settings come in their order, each with how it is shown (label, kind, help,
  // warning): the page keeps no list of its own. A switch that carries a warning asks
  // before it is turned on.
  var TRUST = 'Only for callers you fully trust.';

  function renderSettingsSection(seq) {
    var list = el('div', { id: 'settings-list' }, el('p', { class: 'muted' }, 'Loading…'));
    var sec = el('section', { class: 'section settings', id: 'settings' }, el('h2', null, 'Settings'), list);
    api('GET', '/api/settings').then(function (r) {
      if (!current(seq)) {
        return;
      }
      clear(list);
      var items = arr(r.settings).map(obj).filter(function (s) { return has(s.key); });
      if (!items.length) {
        append(list, el('p', { class: 'muted' }, 'No settings.'));
      }
      items.forEach(function (s) {
        append(list, settingRow(s, seq));
      });
    }, loadFailed(seq, list, null));
    return sec;
  }

  function showSettingResult(msgEl, ok, text, restart) {
    clear(msgEl);
    msgEl.className = 'setting-msg ' + (ok ? 'ok' : 'error');
    if (text) {
      append(msgEl, el('span', { class: 'setting-msg-text' }, codeText(text)));
    }
    if (restart) {
      append(msgEl, el('span', { class: 'restart-needed' }, 'Restart needed: ',
        el('code', null, 'nl2sh service restart')));
    }
    msgEl.hidden = false;
  }

  function settingRow(s, seq) {
    var key = str(s.key);
    var kind = str(s.kind);
    var label = str(s.label) || key;
    var help = has(s.help) ? str(s.help) : '';
    var warning = has(s.warning) ? str(s.warning) : '';
    var inputId = 'input-' + key;
    var msg = el('div', { id: 'msg-' + key, class: 'setting-msg', role: 'status', 'aria-live': 'polite', hidden: true });
    var form = el('form', { class: 'setting', id: 'form-' + key, 'data-key': key, autocomplete: 'off' });
    // The page checks and reports values itself, next to the field (the browser's own
    // validation would block the submit with a transient bubble and leave an old
    // "Saved" message standing).
    form.noValidate = true;
    var stored = str(s.value);
    var input;
    var saveLabel = 'Save';
    var controls;
    var stateEl = null;

    // "default" while the configuration does not set this key.
    var defTag = el('span', { class: 'tag default-tag', hidden: s.set === true }, 'default');
    function defaultTag() {
      return defTag;
    }

    if (kind === 'switch') {
      input = el('input', { type: 'checkbox', id: inputId, class: 'checkbox' });
      input.checked = stored === 'true';
      controls = el('div', { class: 'setting-control' },
        el('label', { class: 'check-label', for: inputId }, input, el('span', null, label)),
        defaultTag());
    } else if (kind === 'port') {
      input = el('input', {
        type: 'number', id: inputId, class: 'mono port-input', min: '0', max: '65535', step: '1',
        inputmode: 'numeric', autocomplete: 'off'
      });
      input.value = stored;
      controls = el('div', { class: 'setting-control' },
        el('label', { for: inputId, class: 'field-label' }, label), input, defaultTag());
    } else if (kind === 'secret') {
      saveLabel = 'Save token';
      // A hidden username field keeps browsers from guessing one for this password form.
      input = el('input', {
        type: 'password', id: inputId, class: 'mono token-entry', autocomplete: 'off',
        spellcheck: 'false', autocapitalize: 'off', placeholder: 'New token'
      });
      stateEl = el('span', { id: 'state-' + key, class: 'tag token-state' }, stored || 'unknown');
      controls = el('div', { class: 'setting-control' },
        el('label', { for: inputId, class: 'field-label' }, label),
        stateEl, input);
    } else {
      input = el('input', { type: 'text', id: inputId, class: 'mono', autocomplete: 'off', spellcheck: 'false' });
      input.value = stored;
      controls = el('div', { class: 'setting-control' },
        el('label', { for: inputId, class: 'field-label' }, label), input, defaultTag());
    }

    // An edit makes the last save's message stale.
    input.addEventListener('input', function () {
      msg.hidden = true;
      msg.textContent = '';
    });
    var save = el('button', { type: 'submit', id: 'save-' + key, class: 'btn btn-primary' }, saveLabel);
    var buttons = el('div', { class: 'setting-buttons' }, save);
    var rotate = null;
    if (kind === 'secret') {
      rotate = button('Rotate token', { id: 'rotate-token', class: 'btn' });
      append(buttons, rotate);
    }

    append(form, el('div', { class: 'setting-main' }, controls, buttons));
    if (help) {
      append(form, el('p', { class: 'help' }, codeText(help)));
    }
    if (warning) {
      append(form, el('p', { class: 'warning', id: 'warn-' + key }, codeText(warning + ' ' + TRUST)));
    }
    if (s.live === false) {
      form.setAttribute('data-live', 'false');
    }
    append(form, msg);

    function busy(on) {
      save.disabled = on;
      if (rotate) {
        rotate.disabled = on;
      }
    }

    function afterSave(r) {
      if (!current(seq)) {
        return;
      }
      busy(false);
      var rr = obj(r);
      showSettingResult(msg, true, str(rr.message) || 'Saved.', rr.restart_needed === true);
      if (kind === 'secret') {
        input.value = '';
        refreshSettingState(key, seq, function (fresh) {
          stateEl.textContent = str(fresh.value) || 'unknown';
        });
      } else {
        refreshSettingState(key, seq, function (fresh) {
          stored = str(fresh.value);
          defTag.hidden = fresh.set === true;
        });
      }
    }

    function onError(err) {
      if (!current(seq)) {
        return;
      }
      busy(false);
      showSettingResult(msg, false, errorText(err), false);
    }

    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      var value;
      if (kind === 'switch') {
        value = input.checked ? 'true' : 'false';
      } else if (kind === 'port') {
        value = input.value.trim();
        if (!/^\d{1,5}$/.test(value) || Number(value) > 65535) {
          showSettingResult(msg, false, 'Enter a port number from 0 to 65535.', false);
          return;
        }
      } else if (kind === 'secret') {
        value = input.value;
        if (!value) {
          showSettingResult(msg, false, 'Type the new token first (or use Rotate token for a random one).', false);
          input.focus();
          return;
        }
      } else {
        value = input.value;
      }
      if (kind === 'switch' && warning && value === 'true') {
        if (!window.confirm('Turn on "' + label + '"?\n\n' + warning + '\n\n' + TRUST)) {
          input.checked = stored === 'true';
          showSettingResult(msg, false, 'Not saved.', false);
          return;
        }
      }
      busy(true);
      api('POST', '/api/settings', { key: key, value: value }).then(afterSave, onError);
    });

    if (rotate) {
      rotate.addEventListener('click', function () {
        busy(true);
        api('POST', '/api/settings/rotate-token', {}).then(afterSave, onError);
      });
    }
    return form;
  }

  // Read one setting afresh after a change (the stored state, e.g. "set" for the token).
  function refreshSettingState(key, seq, fn) {
    api('GET', '/api/settings').then(function (r) {
      if (!current(seq)) {
        return;
      }
      arr(r.settings).map(obj).forEach(function (s) {
        if (str(s.key) === key) {
          fn(s);
        }
      });
    }, function () { /* the message already shown stands */ });
  }

  // ---------------------------------------------------------------------------------
  // Approvals: polled every second for the menu's badge, and for the page when shown
  // ---------------------------------------------------------------------------------

  function startPolling() {
    stopTimers();
    pollApprovals();
    pollStatus();
  }

  function schedulePoll() {
    if (state.pollTimer) {
      clearTimeout(state.pollTimer);
    }
    state.pollTimer = setTimeout(pollApprovals, 1000);
  }

  function schedulePollNow() {
    if (state.pollTimer) {
      clearTimeout(state.pollTimer);
    }
    pollApprovals();
  }

  // The service's own state, every 5 s on every page: whether every request is approved
  // automatically (`auto_approve` of the connection data).
  function pollStatus() {
    state.statusTimer = null;
    if (!state.loggedIn) {
      return;
    }
    api('GET', '/api/connection').then(function (c) {
      if (state.loggedIn) {
        setAutoApprove(c.auto_approve === true);
      }
    }, function () { /* the approvals poll says when the service is out of reach */ }).then(function () {
      if (state.loggedIn) {
        state.statusTimer = setTimeout(pollStatus, 5000);
      }
    });
  }

  function setAutoApprove(on) {
    $('auto-banner').hidden = !on;
  }

  // Whether the service answers. While it does not, nothing the page showed of it is
  // known to be true: the banner says so, the status reads "Unknown" and the approvals
  // page does not claim that nothing waits. When it answers again, the MCP / A2A page
  // reads its state afresh.
  function setReach(ok) {
    var was = !state.lostAt;
    if (ok) {
      state.lostAt = 0;
    } else if (was) {
      state.lostAt = Date.now();
    }
    $('net-banner').hidden = ok;
    document.body.classList.toggle('unreachable', !ok);
    if (!ok) {
      var b = $('approvals-badge');
      b.textContent = '?';
      b.hidden = false;
      b.setAttribute('aria-label', 'pending requests unknown');
      document.title = 'nl2sh (service unreachable)';
      var st = $('connection-status');
      if (st) {
        st.className = 'status status-unknown';
        st.setAttribute('data-state', 'unknown');
        clear(st);
        append(st, el('span', { class: 'status-dot', 'aria-hidden': 'true' }),
          el('span', { class: 'status-word' }, 'Unknown'),
          el('span', { class: 'status-text' }, 'The service cannot be reached: whether it runs is unknown.'));
      }
      // Its pid, URLs and start time were the last ones read: not shown as if current.
      ['connection-details', 'connection-detail'].forEach(function (stale) {
        if ($(stale)) {
          $(stale).hidden = true;
        }
      });
    } else if (!was) {
      var refresh = $('refresh-connection');
      if (refresh && !refresh.disabled) {
        refresh.click();
      }
    }
  }

  function pollApprovals() {
    state.pollTimer = null;
    if (!state.loggedIn) {
      return;
    }
    if (state.pollBusy) {
      schedulePoll();
      return;
    }
    state.pollBusy = true;
    api('GET', '/api/approvals').then(function (r) {
      state.pollBusy = false;
      if (!state.loggedIn) {
        return;
      }
      setReach(true);
      if (typeof r.auto_approve === 'boolean') {
        setAutoApprove(r.auto_approve);
      }
      var pending = arr(r.pending).map(obj).filter(function (p) { return has(p.id); });
      setBadge(pending.length);
      if (state.approvals) {
        state.approvals.limit = Number(r.limit) || 0;
        updateApprovals(pending, arr(r.grants), arr(r.ui_grants).map(obj).filter(function (g) { return has(g.ref); }));
      }
      schedulePoll();
    }, function (err) {
      state.pollBusy = false;
      if (!state.loggedIn) {
        return;
      }
      var unreachable = err.status === 0 || err.status === 503;
      if (unreachable) {
        setReach(false);
      }
      if (state.approvals) {
        approvalsUnknown(unreachable ? 'The service cannot be reached: whether requests are waiting is unknown.' : errorText(err));
      }
      schedulePoll();
    });
  }

  // The approvals page when the list could not be read: it says so, and claims nothing.
  function approvalsUnknown(message) {
    var a = state.approvals;
    a.loading.hidden = true;
    a.empty.hidden = true;
    a.status.textContent = message;
    a.status.hidden = false;
    a.list.classList.add('unknown');
  }

  function setBadge(n) {
    var b = $('approvals-badge');
    b.textContent = String(n);
    b.hidden = n === 0;
    b.setAttribute('aria-label', n + (n === 1 ? ' pending request' : ' pending requests'));
    document.title = n ? '(' + n + ') nl2sh' : 'nl2sh';
  }

  // Said politely to a screen reader and shown at the top of the page: "Approved ab12".
  function announce(text, ok) {
    var a = state.approvals;
    if (!a) {
      return;
    }
    clear(a.announce);
    append(a.announce, codeText(text));
    a.announce.className = 'msg announce ' + (ok ? 'ok' : 'error');
    a.announce.hidden = false;
  }

  function renderApprovals(page) {
    var list = el('div', { id: 'approval-list', class: 'approval-list' });
    var empty = el('p', { id: 'approvals-empty', class: 'empty', hidden: true }, 'No requests are waiting.');
    var loading = el('p', { class: 'muted', id: 'approvals-loading' }, 'Loading…');
    var status = el('p', { id: 'approvals-status', class: 'msg error', hidden: true });
    // Decisions and their errors, announced politely (the countdowns are not in a live
    // region: they would be read out every second).
    var announceEl = el('p', { id: 'decision-status', class: 'msg announce', role: 'status', 'aria-live': 'polite', hidden: true });
    // Who holds the queue: a count per origin, each with a button that rejects all of it.
    var origins = el('div', { id: 'approval-origins', class: 'approval-origins', hidden: true });
    var originsMsg = el('p', { id: 'approval-origins-msg', class: 'msg', role: 'status', hidden: true });
    var grants = el('div', { id: 'grants' }, el('p', { class: 'muted' }, 'Loading…'));
    var uiGrants = el('ul', { id: 'ui-grants-list', class: 'ui-grants' });
    var uiEmpty = el('p', { id: 'ui-grants-empty', class: 'empty' }, 'No timed UI grants are in force.');
    var uiMsg = el('p', { id: 'ui-grants-msg', class: 'msg', role: 'status', hidden: true });
    append(page, pageHeader('Approvals'));
    append(page, announceEl, status, loading, originsMsg, empty, origins, list);
    append(page, el('section', { class: 'section', id: 'ui-grants-section' },
      el('h3', null, 'Timed UI grants'),
      el('p', { class: 'muted' }, 'UI actions (taps, gestures, text, keys) that run unasked in one app, ' +
        'until the time is up or another app comes to the front.'),
      uiMsg, uiEmpty, uiGrants));
    append(page, el('section', { class: 'section', id: 'grants-section' }, el('h3', null, 'Grants'), grants));
    state.approvals = {
      list: list, empty: empty, loading: loading, status: status, grants: grants,
      announce: announceEl,
      uiGrants: uiGrants, uiEmpty: uiEmpty, uiMsg: uiMsg, uiRows: new Map(),
      origins: origins, originsMsg: originsMsg, originsKey: null, limit: 0,
      cards: new Map(), grantsKey: null, decided: new Map(), seq: state.renderSeq
    };
    state.tickTimer = setInterval(tickApprovals, 1000);
    // Fill the page right away rather than at the next tick.
    if (!state.pollBusy) {
      if (state.pollTimer) {
        clearTimeout(state.pollTimer);
      }
      pollApprovals();
    }
  }

  function updateApprovals(pending, grants, uiGrants) {
    var a = state.approvals;
    var now = Date.now();
    a.loading.hidden = true;
    a.status.hidden = true;
    a.list.classList.remove('unknown');
    var seen = new Set();
    pending.forEach(function (p) {
      var id = str(p.id);
      seen.add(id);
      var decidedAt = a.decided.get(id);
      if (decidedAt !== undefined && now - decidedAt < 10000) {
        return; // decided here a moment ago; the server will drop it
      }
      var card = a.cards.get(id);
      if (!card) {
        card = makeCard(p);
        a.cards.set(id, card);
        a.list.appendChild(card.node);
      }
      if (!card.gone) {
        card.deadline = now + Math.max(0, Number(p.seconds_left) || 0) * 1000;
        updateTimeLeft(card);
      }
    });
    // A card no longer waiting that was not decided here stays, greyed, saying why,
    // until the owner dismisses it (a phrase being typed is never dropped silently).
    a.cards.forEach(function (card, id) {
      if (!seen.has(id) && !card.gone) {
        card.markGone(card.deadline - now <= 1500 ? 'expired' : 'elsewhere');
      }
    });
    a.decided.forEach(function (t, id) {
      if (now - t > 60000) {
        a.decided.delete(id);
      }
    });
    updateEmpty();
    updateOrigins();
    updateUiGrants(uiGrants);
    updateGrants(grants);
  }

  function updateEmpty() {
    var a = state.approvals;
    a.empty.hidden = a.cards.size > 0 || !a.status.hidden;
  }

  // Take the row (a card, a grant) under `key` off the page and out of `rows`.
  function dropRow(rows, key) {
    var row = rows.get(key);
    if (row && row.node.parentNode) {
      row.node.parentNode.removeChild(row.node);
    }
    rows.delete(key);
  }

  function removeCard(id) {
    dropRow(state.approvals.cards, id);
    updateEmpty();
    updateOrigins();
  }

  // The configured grants, read-only.
  function updateGrants(grants) {
    var a = state.approvals;
    var gk = JSON.stringify(grants);
    if (gk === a.grantsKey) {
      return;
    }
    a.grantsKey = gk;
    clear(a.grants);
    if (!grants.length) {
      append(a.grants, el('p', { id: 'grants-empty', class: 'empty' }, 'No grants.'));
    } else {
      append(a.grants, el('ul', { id: 'grants-list', class: 'grants' },
        grants.map(function (g) {
          return el('li', { class: 'grant mono' }, typeof g === 'string' ? g : JSON.stringify(g));
        })));
    }
  }

  // The timed UI grants in force: one row each (app, origin, countdown, actions it let
  // run) with its Revoke button; a grant the server no longer lists leaves.
  function updateUiGrants(list) {
    var a = state.approvals;
    var now = Date.now();
    var seen = new Set();
    list.forEach(function (g) {
      var ref = str(g.ref);
      seen.add(ref);
      var row = a.uiRows.get(ref);
      if (!row) {
        row = makeUiGrantRow(g);
        a.uiRows.set(ref, row);
        a.uiGrants.appendChild(row.node);
      }
      row.deadline = now + Math.max(0, Number(g.seconds_left) || 0) * 1000;
      var used = Number(g.used) || 0;
      row.usedEl.textContent = used + (used === 1 ? ' action' : ' actions') + ' so far';
      updateUiGrantTime(row);
    });
    a.uiRows.forEach(function (row, ref) {
      if (!seen.has(ref)) {
        removeUiGrantRow(ref);
      }
    });
    a.uiEmpty.hidden = a.uiRows.size > 0;
  }

  function removeUiGrantRow(ref) {
    var a = state.approvals;
    dropRow(a.uiRows, ref);
    a.uiEmpty.hidden = a.uiRows.size > 0;
  }

  function makeUiGrantRow(g) {
    var ref = str(g.ref);
    var app = str(g.app);
    var timeEl = el('span', { class: 'time-left' });
    var usedEl = el('span', { class: 'ui-grant-used' });
    var revoke = el('button', { type: 'button', class: 'btn btn-reject btn-small revoke-ui-grant',
      'aria-label': 'Revoke the UI grant for ' + app }, 'Revoke');
    var node = el('li', { class: 'ui-grant', 'data-app': app, 'data-id': str(g.id) },
      el('div', { class: 'ui-grant-what' },
        el('span', { class: 'ui-grant-app mono' }, app),
        el('span', { class: 'ui-grant-origin' }, 'for ' + str(g.origin) + ', ' + (Number(g.minutes) || 0) + ' min')),
      el('div', { class: 'ui-grant-state' }, timeEl, usedEl, revoke));
    var row = { node: node, timeEl: timeEl, usedEl: usedEl, deadline: Date.now() };
    revoke.addEventListener('click', function () {
      var a = state.approvals;
      revoke.disabled = true;
      api('POST', '/api/ui-grants/' + encodeURIComponent(ref) + '/revoke', {}).then(function () {
        if (state.approvals !== a) {
          return;
        }
        removeUiGrantRow(ref);
        a.uiMsg.textContent = 'Revoked: UI actions in ' + app + ' ask again.';
        a.uiMsg.className = 'msg ok';
        a.uiMsg.hidden = false;
      }, function (err) {
        if (state.approvals !== a) {
          return;
        }
        if (err.status === 404) {
          removeUiGrantRow(ref); // ended already (time up, another app, revoked elsewhere)
          a.uiMsg.textContent = 'That grant had ended already.';
          a.uiMsg.className = 'msg';
        } else {
          revoke.disabled = false;
          a.uiMsg.textContent = 'Not revoked: ' + errorText(err);
          a.uiMsg.className = 'msg error';
        }
        a.uiMsg.hidden = false;
      });
    });
    return row;
  }

  function updateUiGrantTime(row) {
    var left = Math.max(0, Math.round((row.deadline - Date.now()) / 1000));
    var text = left <= 0 ? 'Ending' : fmtLeft(left);
    if (row.timeEl.textContent !== text) {
      row.timeEl.textContent = text;
    }
    row.timeEl.setAttribute('data-seconds', String(left));
  }

  // The origins of the requests shown, in the order they first appear, with their counts.
  function originCounts() {
    var counts = new Map();
    state.approvals.cards.forEach(function (card) {
      if (!card.gone) {
        counts.set(card.origin, (counts.get(card.origin) || 0) + 1);
      }
    });
    return counts;
  }

  function updateOrigins() {
    var a = state.approvals;
    var counts = originCounts();
    var total = 0;
    var parts = [];
    counts.forEach(function (n, origin) {
      total += n;
      parts.push(origin + ':' + n);
    });
    var key = parts.join(',');
    if (key === a.originsKey) {
      return;
    }
    a.originsKey = key;
    clear(a.origins);
    a.origins.hidden = total === 0;
    if (!total) {
      return;
    }
    append(a.origins, el('p', { class: 'origins-total' },
      total + (a.limit ? ' of ' + a.limit : '') + ' pending, by origin:'));
    var rows = [];
    counts.forEach(function (n, origin) {
      var button = el('button', { type: 'button', class: 'btn btn-reject reject-origin', 'data-origin': origin },
        'Reject all from ' + origin);
      button.addEventListener('click', function () { rejectOrigin(origin, button); });
      rows.push(el('li', { class: 'origin-row', 'data-origin': origin },
        el('span', { class: 'origin-name mono' }, origin),
        el('span', { class: 'origin-count' }, n + (n === 1 ? ' request' : ' requests')),
        el('span', { class: 'spacer' }),
        button));
    });
    append(a.origins, el('ul', { class: 'origin-list' }, rows));
  }

  // Rejects every request of `origin` waiting now (those that came since the page showed
  // them too), each on its own; says how many.
  function rejectOrigin(origin, button) {
    var n = originCounts().get(origin) || 0;
    if (!window.confirm('Reject every request from ' + origin + '? ' + n +
        (n === 1 ? ' request' : ' requests') + ' now, and any that came since.')) {
      return;
    }
    button.disabled = true;
    var a = state.approvals;
    api('POST', '/api/approvals/reject-origin', { origin: origin }).then(function (r) {
      if (state.approvals !== a) {
        return;
      }
      var ids = arr(r.ids).map(str);
      var now = Date.now();
      ids.forEach(function (id) {
        a.decided.set(id, now);
        removeCard(id);
      });
      var waiting = 0;
      originCounts().forEach(function (n) { waiting += n; });
      setBadge(waiting);
      var count = Number(r.rejected) || 0;
      a.originsMsg.textContent = count ?
        'Rejected ' + count + (count === 1 ? ' request' : ' requests') + ' from ' + origin + '.' :
        'No request from ' + origin + ' was waiting.';
      a.originsMsg.className = 'msg ok';
      a.originsMsg.hidden = false;
      a.originsKey = null;
      updateOrigins();
    }, function (err) {
      if (state.approvals !== a) {
        return;
      }
      button.disabled = false;
      a.originsMsg.textContent = 'Not rejected: ' + errorText(err);
      a.originsMsg.className = 'msg error';
      a.originsMsg.hidden = false;
    });
  }

  function tickApprovals() {
    var a = state.approvals;
    if (!a) {
      return;
    }
    a.cards.forEach(updateTimeLeft);
    a.uiRows.forEach(updateUiGrantTime);
  }

  function updateTimeLeft(card) {
    if (card.gone) {
      return;
    }
    var left = Math.max(0, Math.round((card.deadline - Date.now()) / 1000));
    var text = left <= 0 ? 'Expired' : fmtLeft(left);
    if (card.timeEl.textContent !== text) {
      card.timeEl.textContent = text;
    }
    card.timeEl.classList.toggle('urgent', left > 0 && left <= 15);
    card.timeEl.setAttribute('data-seconds', String(left));
  }

  // A pending request's words as the server made them (`who`: who is asking, `as`: "as
  // root", `command`: the command as the caller sent it); null from a service that does
  // not send them. (`shown.NAME`, the CLI's JSON form, is read too.)
  function shownField(p, name) {
    if (has(p[name])) {
      return str(p[name]);
    }
    var s = obj(p.shown);
    return has(s[name]) ? str(s[name]) : null;
  }

  function flag(p, name) {
    return p[name] === true || obj(p.shown)[name] === true;
  }

  // Said under a text the server had to escape (a character a shell would not print as
  // itself): its backslashes are doubled, so it cannot be pasted back as it stands.
  function escapedNote(on) {
    return on ? el('p', { class: 'muted small escaped-note' }, 'Shown escaped: \\\\ is one backslash.') : null;
  }

  // Approved on one tap: low and medium. Every other risk (high, dangerous, critical, or
  // one this page does not know) asks a second, explicit step in the card, the same rule
  // as the terminal console and the module WebUI; dangerous and critical ones take their
  // phrase instead, typed.
  var ONE_TAP = { low: true, medium: true };
  // The end of a value the server cut (proto/src/display.rs): an approve never counts on
  // an action the owner could not read whole.
  var CUT = /\u2026 \[cut: \d+ bytes in all\]$/;

  function riskBorder(risk) {
    if (risk === 'dangerous' || risk === 'critical') {
      return 'red';
    }
    return risk === 'medium' || risk === 'high' ? 'amber' : 'neutral';
  }

  // The command as the caller sent it, with the exact argv a tap away; or the action;
  // then what it carries. Both always whole.
  function requestWhat(p) {
    var command = shownField(p, 'command');
    if (command === null) {
      return [actionBlock(p.action), escapedNote(flag(p, 'action_escaped')), dataBlock(p.data)];
    }
    return [
      el('pre', { class: 'action command-sent' }, command),
      escapedNote(flag(p, 'command_escaped')),
      el('details', { class: 'argv' }, el('summary', null, 'The exact argv it runs'),
        actionBlock(p.action, 'argv-action'), escapedNote(flag(p, 'action_escaped'))),
      dataBlock(p.data)
    ];
  }

  function requestMeta(p, id) {
    var meta = el('dl', { class: 'kv kv-compact' });
    function row(label, value, mono) {
      if (!has(value)) {
        return;
      }
      append(meta, el('div', { class: 'kv-row' }, el('dt', null, label),
        el('dd', { class: mono ? 'mono' : null }, str(value))));
    }
    row('Origin', p.origin, false);
    row('Task', p.task, true);
    row('Note', has(p.after_reading) ? 'The Agent asks ' + str(p.after_reading) : null, false);
    row('Request', id, true);
    return meta;
  }

  function reasonsBlock(reasons) {
    var list = arr(reasons);
    if (!list.length) {
      return null;
    }
    return el('div', { class: 'reasons-block' },
      el('h4', null, 'Why it needs approval'),
      el('ul', { class: 'reasons' }, list.map(function (r) { return el('li', null, str(r)); })));
  }

  // The phrase a dangerous or critical request needs typed; Enter approves.
  function phraseBlock(node, phrase, id, approve) {
    var input = el('input', {
      type: 'text', class: 'phrase mono', autocomplete: 'off', spellcheck: 'false',
      autocapitalize: 'off', 'aria-label': 'Approval phrase for request ' + id, enterkeyhint: 'done'
    });
    append(node, el('div', { class: 'phrase-block' },
      el('p', null, 'Type this phrase to approve:'),
      el('code', { class: 'phrase-text' }, phrase),
      input));
    input.addEventListener('keydown', function (ev) {
      if (ev.key === 'Enter') {
        ev.preventDefault();
        approve.click();
      }
    });
    return input;
  }

  // A UI action in an app (medium or below, no root): the owner may approve it and let
  // the same caller's UI actions in that app run unasked for some minutes.
  function uiGrantOffer(node, p, id) {
    if (!has(p.ui_app)) {
      return null;
    }
    var uiApp = str(p.ui_app);
    var selectId = 'ui-minutes-' + id;
    var select = el('select', { id: selectId, class: 'ui-minutes' },
      [5, 10, 15, 30].map(function (m) {
        return el('option', { value: String(m) }, m + ' min');
      }));
    select.value = '10';
    var button = el('button', { type: 'button', class: 'btn btn-approve approve-ui' });
    var label = function () {
      button.textContent = 'Approve + UI in ' + uiApp + ' for ' + select.value + ' min';
      button.setAttribute('aria-label', 'Approve request ' + id + ' and allow UI in ' + uiApp +
        ' for ' + select.value + ' min');
    };
    label();
    select.addEventListener('change', label);
    append(node, el('div', { class: 'ui-grant-offer' },
      el('label', { for: selectId },
        'Or approve and allow UI actions (taps, gestures, text, keys) from ' + str(p.origin) +
        ' in ', el('span', { class: 'mono' }, uiApp), ' for'),
      select, button));
    return { button: button, select: select, app: uiApp };
  }

  function makeCard(p) {
    var id = str(p.id);
    var risk = str(p.risk);
    var who = shownField(p, 'who');
    var as = shownField(p, 'as') || (has(p.identity) ? 'as ' + str(p.identity) : null);
    var timeEl = el('span', { class: 'time-left' });
    var approve = el('button', { type: 'button', class: 'btn btn-approve approve', 'aria-label': 'Approve request ' + id }, 'Approve');
    var reject = el('button', { type: 'button', class: 'btn btn-reject reject', 'aria-label': 'Reject request ' + id }, 'Reject');
    var what = requestWhat(p);
    var node = el('article', { class: 'request risk-border-' + riskBorder(risk), 'data-id': id, 'data-risk': risk },
      el('p', { class: 'who' }, who !== null ? who : 'From ' + str(p.origin)),
      el('div', { class: 'request-head' },
        riskLabel(risk),
        el('span', { class: 'tool mono' }, str(p.tool)),
        as ? el('span', { class: 'as-tag' + (p.requires_root === true ? ' as-root' : '') }, as) : null,
        el('span', { class: 'spacer' }),
        timeEl),
      what, requestMeta(p, id), reasonsBlock(p.reasons));
    var card = {
      id: id, origin: str(p.origin), node: node, timeEl: timeEl, deadline: Date.now(), gone: null,
      risk: risk, as: as, approve: approve, reject: reject,
      phraseInput: p.phrase === null || p.phrase === undefined ? null : phraseBlock(node, str(p.phrase), id, approve),
      offer: uiGrantOffer(node, p, id),
      cut: CUT.test(str(p.action)) || CUT.test(shownField(p, 'command') || ''),
      confirmBox: el('div', { class: 'confirm-step', hidden: true }),
      errEl: el('p', { class: 'error', hidden: true }),
      goneEl: el('div', { class: 'gone-note', hidden: true })
    };
    append(node, card.confirmBox, card.errEl, card.goneEl, el('div', { class: 'request-buttons' }, approve, reject));
    card.markGone = function (why) { markGone(card, why); };
    approve.addEventListener('click', function () { onApprove(card, null); });
    if (card.offer) {
      card.offer.button.addEventListener('click', function () { onApprove(card, Number(card.offer.select.value)); });
    }
    reject.addEventListener('click', function () {
      if (!card.gone && window.confirm('Reject request ' + id + '? Its action does not run.')) {
        sendDecision(card, 'reject', null, null);
      }
    });
    return card;
  }

  function setCardButtons(card, disabled) {
    card.approve.disabled = disabled;
    card.reject.disabled = disabled;
    if (card.offer) {
      card.offer.button.disabled = disabled;
      card.offer.select.disabled = disabled;
    }
  }

  function cardError(card, message) {
    clear(card.errEl);
    append(card.errEl, codeText(message));
    card.errEl.hidden = !message;
  }

  function closeConfirm(card) {
    clear(card.confirmBox);
    card.confirmBox.hidden = true;
  }

  function onApprove(card, minutes) {
    if (card.gone) {
      return;
    }
    if (card.cut) {
      cardError(card, 'This action is shown cut, so it is not approved here: read it whole with `nl2sh protocol approvals --json`.');
      return;
    }
    if (card.phraseInput) {
      var typed = card.phraseInput.value;
      if (!typed.trim()) {
        cardError(card, 'Type the phrase shown above to approve.');
        card.phraseInput.focus();
        return;
      }
      sendDecision(card, 'approve', minutes, typed);
    } else if (!Object.prototype.hasOwnProperty.call(ONE_TAP, card.risk)) {
      openConfirm(card, minutes);
    } else {
      sendDecision(card, 'approve', minutes, null);
    }
  }

  // The second step of an approve of a high (or unknown) risk request, in the card,
  // naming it; Approve waits meanwhile, Reject does not.
  function openConfirm(card, minutes) {
    closeConfirm(card);
    cardError(card, '');
    var id = card.id;
    var go = el('button', { type: 'button', class: 'btn btn-approve confirm-approve' }, 'Yes, approve ' + id);
    var cancel = el('button', { type: 'button', class: 'btn confirm-cancel', 'aria-label': 'Do not approve request ' + id }, 'Cancel');
    append(card.confirmBox,
      el('p', null, 'Approve request ' + id + '? It is ' + (card.risk || 'unknown') + ' risk' +
        (card.as ? ' and runs ' + card.as : '') + '. It runs as soon as you confirm.'),
      el('div', { class: 'confirm-buttons' }, go, cancel));
    go.addEventListener('click', function () { sendDecision(card, 'approve', minutes, null); });
    cancel.addEventListener('click', function () {
      closeConfirm(card);
      card.approve.disabled = false;
      card.approve.focus();
    });
    card.approve.disabled = true;
    card.confirmBox.hidden = false;
    go.focus();
  }

  // A request no longer waiting that was not decided here: greyed, saying why, its typed
  // phrase kept, until the owner dismisses it.
  function markGone(card, why) {
    if (card.gone) {
      return;
    }
    card.gone = why;
    card.node.classList.add('gone');
    card.node.setAttribute('data-gone', why);
    setCardButtons(card, true);
    closeConfirm(card);
    if (card.phraseInput) {
      card.phraseInput.readOnly = true;
    }
    card.timeEl.classList.remove('urgent');
    card.timeEl.textContent = why === 'expired' ? 'Expired' : 'No longer waiting';
    var dismiss = el('button', { type: 'button', class: 'btn btn-small dismiss', 'aria-label': 'Dismiss request ' + card.id }, 'Dismiss');
    dismiss.addEventListener('click', function () { removeCard(card.id); });
    clear(card.goneEl);
    append(card.goneEl, el('p', null, why === 'expired' ?
      'Expired: this request is no longer waiting, and its action did not run.' :
      'Decided elsewhere (another console or the CLI): this request is no longer waiting.'), dismiss);
    card.goneEl.hidden = false;
    updateOrigins();
    updateEmpty();
  }

  // decision 'approve' | 'reject'; minutes: of a timed UI grant to give with the approval.
  function sendDecision(card, decision, minutes, typed) {
    var id = card.id;
    var verb = decision === 'approve' ? 'approved' : 'rejected';
    setCardButtons(card, true);
    closeConfirm(card);
    cardError(card, '');
    var body = { decision: decision, phrase: typed };
    if (minutes) {
      body.ui_minutes = minutes;
    }
    var a = state.approvals;
    api('POST', '/api/approvals/' + encodeURIComponent(id), body).then(function () {
      if (state.approvals !== a) {
        return;
      }
      a.decided.set(id, Date.now());
      removeCard(id);
      announce((decision === 'approve' ? 'Approved ' : 'Rejected ') + id +
        (minutes && card.offer ? ', with UI in ' + card.offer.app + ' for ' + minutes + ' min' : '') + '.', true);
      if (minutes && !state.pollBusy) {
        schedulePollNow(); // show the new grant at once
      }
    }, function (err) {
      if (state.approvals !== a) {
        return;
      }
      if (err.kind === 'no_such_request' || err.status === 404) {
        markGone(card, 'elsewhere');
        announce('Not ' + verb + ': request ' + id + ' was decided elsewhere.', false);
      } else if (err.kind === 'expired' || err.status === 410) {
        markGone(card, 'expired');
        announce('Not ' + verb + ': request ' + id + ' had expired.', false);
      } else {
        setCardButtons(card, false);
        cardError(card, errorText(err));
        announce('Not ' + verb + ': request ' + id + ': ' + errorText(err), false);
        if (card.phraseInput && (err.kind === 'wrong_phrase' || err.kind === 'phrase_required')) {
          card.phraseInput.focus();
          card.phraseInput.select();
        }
      }
    });
  }

  // ---------------------------------------------------------------------------------
  // Tasks
  // ---------------------------------------------------------------------------------

  function shortState(s) {
    var v = str(s).replace(/^TASK_STATE_/i, '').toLowerCase().replace(/_/g, ' ');
    if (v === 'cancelled') {
      v = 'canceled';
    }
    return v || 'unknown';
  }

  function stateLabel(s) {
    var v = shortState(s);
    var cls = 'neutral';
    if (v === 'completed') {
      cls = 'green';
    } else if (v === 'failed' || v === 'rejected') {
      cls = 'red';
    } else if (v === 'working' || v === 'submitted' || v === 'input required' || v === 'auth required') {
      cls = 'blue';
    }
    return el('span', { class: 'state state-' + cls, 'data-state': v }, v);
  }

  // A table cell with a label for the stacked (narrow-screen) layout; its content sits
  // in one wrapper so the stacked grid has exactly two columns.
  function td(label, cls) {
    var inner = el('div', { class: 'cell' + (cls ? ' ' + cls : '') });
    for (var i = 2; i < arguments.length; i++) {
      append(inner, arguments[i]);
    }
    var cell = el('td', { 'data-label': label }, inner);
    if (!inner.firstChild || inner.textContent === '') {
      cell.className = 'empty-cell';
    }
    return cell;
  }

  // A list page's load: GET `path`, then `render(items)` into `body` (or the empty text,
  // or the error), unless the owner has moved to another page meanwhile. With `opts.key`
  // the body is redrawn only when the items differ from the last ones drawn (a list that
  // refreshes by itself must not flicker or lose the owner's place).
  function loadList(seq, refresh, body, path, field, emptyId, emptyText, render, opts) {
    opts = opts || {};
    refresh.disabled = true;
    return api('GET', path).then(function (r) {
      if (!current(seq)) {
        return;
      }
      refresh.disabled = false;
      var items = arr(r[field]).map(obj);
      var key = JSON.stringify(items);
      if (opts.key && opts.key.last === key) {
        return;
      }
      if (opts.key) {
        opts.key.last = key;
      }
      clear(body);
      if (!items.length) {
        append(body, el('p', { class: 'empty', id: emptyId }, emptyText));
        return;
      }
      render(items);
    }, function (err) {
      if (opts.key) {
        opts.key.last = null;
      }
      loadFailed(seq, body, refresh)(err);
    });
  }

  // How often the task list reads itself again while it is shown.
  var TASKS_REFRESH_MS = 3000;

  function renderTasks(page) {
    var seq = state.renderSeq;
    var body = el('div', { id: 'tasks', class: 'section' }, el('p', { class: 'muted' }, 'Loading…'));
    var refresh = button('Refresh', { id: 'refresh-tasks' }, load);
    var drawn = { last: null };
    append(page, pageHeader('Tasks', [refresh]),
      el('p', { class: 'muted small' }, 'The newest 50 tasks; the list refreshes by itself.'), body);

    function load() {
      stopPageTimer();
      loadList(seq, refresh, body, '/api/tasks', 'tasks', 'tasks-empty', 'No tasks yet.', function (tasks) {
        append(body, tasksTable(tasks));
      }, { key: drawn }).then(function () {
        if (current(seq)) {
          state.pageTimer = setTimeout(load, TASKS_REFRESH_MS);
        }
      });
    }
    load();
  }

  function tasksTable(tasks) {
    var tbody = el('tbody');
    tasks.forEach(function (t) {
      var id = str(t.id);
      // `id` is shown (escaped); `ref` is the id as stored, sent back to ask for it.
      var ref = typeof t.ref === 'string' ? t.ref : id;
      var link = button(id, { class: 'task-link linklike mono', 'data-id': id }, function () {
        go('#tasks/' + encodeURIComponent(ref));
      });
      append(tbody, el('tr', { class: 'task-row', 'data-id': id },
        td('Goal', 'task-goal', has(t.goal) ? str(t.goal) : el('span', { class: 'muted' }, '(no text)')),
        td('State', null, stateLabel(t.state)),
        td('Updated', null, timeEl(t.updated)),
        td('Task', 'cell-link', link)));
    });
    return el('table', { class: 'table stack tasks-table', id: 'tasks-table' },
      el('thead', null, el('tr', null,
        el('th', { scope: 'col' }, 'Goal'), el('th', { scope: 'col' }, 'State'),
        el('th', { scope: 'col' }, 'Updated'), el('th', { scope: 'col' }, 'Task'))),
      tbody);
  }

  function partView(part) {
    var p = obj(part);
    if (typeof p.text === 'string') {
      return el('pre', { class: 'part part-text' }, p.text);
    }
    if (p.data !== undefined) {
      var json;
      try {
        json = JSON.stringify(p.data, null, 2);
      } catch (e) {
        json = String(p.data);
      }
      return el('pre', { class: 'part part-data' }, json === undefined ? 'null' : json);
    }
    if (p.file !== undefined) {
      var f = obj(p.file);
      var label = str(f.name) || str(f.uri) || str(f.fileWithUri) || 'file';
      return el('p', { class: 'part part-file' }, 'File: ' + label + (has(f.mimeType) ? ' (' + str(f.mimeType) + ')' : ''));
    }
    var other;
    try {
      other = JSON.stringify(p, null, 2);
    } catch (e) {
      other = '';
    }
    return el('pre', { class: 'part part-other' }, other);
  }

  function partsView(parts) {
    var ps = arr(parts);
    if (!ps.length) {
      return el('p', { class: 'muted' }, '(no content)');
    }
    return el('div', { class: 'parts' }, ps.map(partView));
  }

  function roleName(r) {
    var v = str(r).replace(/^ROLE_/i, '').toLowerCase();
    return v || 'unknown';
  }

  function renderTask(page, id) {
    var seq = state.renderSeq;
    var back = button('Back', { id: 'task-back', class: 'btn' }, function () {
      go('#tasks');
    });
    var body = el('div', { id: 'task-detail', class: 'section', 'data-id': id }, el('p', { class: 'muted' }, 'Loading…'));
    append(page, pageHeader('Task', [back]), body);
    api('GET', '/api/tasks/' + encodeURIComponent(id)).then(function (r) {
      if (!current(seq)) {
        return;
      }
      clear(body);
      var t = obj(r.task);
      var status = obj(t.status);
      var msg = obj(status.message);
      var dl = el('dl', { class: 'kv' },
        el('div', { class: 'kv-row' }, el('dt', null, 'Task'), el('dd', { class: 'mono', id: 'task-id' }, str(t.id) || id)),
        el('div', { class: 'kv-row' }, el('dt', null, 'State'), el('dd', { id: 'task-state' }, stateLabel(status.state))),
        has(status.timestamp) ? el('div', { class: 'kv-row' }, el('dt', null, 'Updated'), el('dd', null, timeEl(status.timestamp))) : null,
        has(t.contextId) ? el('div', { class: 'kv-row' }, el('dt', null, 'Context'), el('dd', { class: 'mono' }, str(t.contextId))) : null);
      append(body, dl);

      if (status.message) {
        append(body, el('section', { class: 'subsection', id: 'task-status-message' },
          el('h3', null, 'Status message'), partsView(msg.parts)));
      }

      var history = arr(t.history).map(obj);
      append(body, el('section', { class: 'subsection', id: 'task-history' },
        el('h3', null, 'History'),
        history.length ? history.map(function (m) {
          var role = roleName(m.role);
          return el('div', { class: 'message role-' + (role === 'user' ? 'user' : role === 'agent' ? 'agent' : 'other'), 'data-role': role },
            el('div', { class: 'message-role' }, role),
            partsView(m.parts));
        }) : el('p', { class: 'muted' }, 'No messages.')));

      var artifacts = arr(t.artifacts).map(obj);
      append(body, el('section', { class: 'subsection', id: 'task-artifacts' },
        el('h3', null, 'Artifacts'),
        artifacts.length ? artifacts.map(function (a) {
          return el('div', { class: 'artifact' },
            el('div', { class: 'artifact-name' }, str(a.name) || str(a.artifactId) || 'artifact'),
            has(a.description) ? el('p', { class: 'muted' }, str(a.description)) : null,
            partsView(a.parts));
        }) : el('p', { class: 'muted' }, 'No artifacts.')));
    }, function (err) {
      if (!current(seq)) {
        return;
      }
      clear(body);
      append(body, statusMsg(err.status === 404 ? 'No such task.' : errorText(err), 'error'));
    });
  }

  // ---------------------------------------------------------------------------------
  // Audit
  // ---------------------------------------------------------------------------------

  function renderAudit(page) {
    var seq = state.renderSeq;
    var body = el('div', { id: 'audit', class: 'section' }, el('p', { class: 'muted' }, 'Loading…'));
    var result = el('span', { id: 'verify-result', class: 'verify-result', role: 'status', hidden: true });
    var refresh = button('Refresh', { id: 'refresh-audit' }, load);
    var verify = button('Verify audit chain', { id: 'verify-audit' }, function () {
      verify.disabled = true;
      result.hidden = true;
      api('POST', '/api/audit/verify', {}).then(function (r) {
        if (!current(seq)) {
          return;
        }
        verify.disabled = false;
        var intact = r.intact === true;
        result.className = 'verify-result ' + (intact ? 'ok' : 'bad');
        result.textContent = str(r.message) || (intact ? 'The audit chain is intact.' : 'The audit chain is broken.');
        result.hidden = false;
      }, function (err) {
        if (!current(seq)) {
          return;
        }
        verify.disabled = false;
        result.className = 'verify-result bad';
        result.textContent = errorText(err);
        result.hidden = false;
      });
    });
    append(page, pageHeader('Audit', [verify, refresh]), el('div', { class: 'verify-line' }, result), body);

    function load() {
      loadList(seq, refresh, body, '/api/audit?limit=100', 'rows', 'audit-empty', 'No audit records yet.', function (rows) {
        var tbody = el('tbody');
        rows.forEach(function (row) {
          append(tbody, auditRow(row));
        });
        append(body, el('p', { class: 'muted small' }, 'Newest ' + rows.length + ' records.'),
          el('table', { class: 'table stack-wide audit-table', id: 'audit-table' },
            el('thead', null, el('tr', null,
              ['Time', 'Kind', 'Decision', 'Tool', 'Risk', 'From', 'Action', 'Outcome'].map(function (h) {
                return el('th', { scope: 'col' }, h);
              }))),
            tbody));
      });
    }
    load();
  }

  function auditRow(r) {
    var outcome = [];
    if (r.success === true) {
      outcome.push(el('span', { class: 'outcome-ok' }, 'success'));
    } else if (r.success === false) {
      outcome.push(el('span', { class: 'outcome-bad' }, 'failed'));
    }
    var bits = [];
    if (has(r.exit_code)) {
      bits.push('exit ' + str(r.exit_code));
    }
    if (has(r.duration_ms)) {
      bits.push(str(r.duration_ms) + ' ms');
    }
    if (bits.length) {
      outcome.push(el('span', { class: 'muted' }, (outcome.length ? ' · ' : '') + bits.join(' · ')));
    }
    if (has(r.summary)) {
      outcome.push(el('div', { class: 'summary' }, str(r.summary)));
    }
    var decision = str(r.decision);
    return el('tr', { class: 'audit-row', 'data-id': str(r.id) },
      td('Time', null, timeEl(r.time)),
      td('Kind', null, str(r.kind)),
      td('Decision', null,
        decision ? el('span', { class: 'decision decision-' + decisionClass(decision) }, decision) : null,
        has(r.reason) ? el('div', { class: 'reason muted small' }, str(r.reason)) : null),
      td('Tool', 'mono', str(r.tool)),
      td('Risk', null, has(r.risk) ? riskLabel(r.risk) : null),
      td('From', null,
        has(r.client) ? el('div', { class: 'client' }, str(r.client)) : null,
        el('div', { class: has(r.client) ? 'muted small' : null }, str(r.origin))),
      td('Action', 'action-cell',
        has(r.action) ? actionBlock(r.action, 'action-small') : null,
        has(r.action) ? escapedNote(r.action_escaped === true) : null,
        has(r.task) ? el('div', { class: 'muted small' }, 'task ', el('span', { class: 'mono' }, str(r.task))) : null),
      td('Outcome', null, outcome));
  }

  function decisionClass(d) {
    if (/^(approved|allowed|auto_approved|allow|approve|granted)/.test(d)) {
      return 'ok';
    }
    if (/^(rejected|denied|refused|deny|reject|expired|blocked)/.test(d)) {
      return 'bad';
    }
    return 'neutral';
  }

  // ---------------------------------------------------------------------------------
  // Start
  // ---------------------------------------------------------------------------------

  function init() {
    var items = document.querySelectorAll('#menu .menu-item');
    for (var i = 0; i < items.length; i++) {
      (function (b) {
        b.addEventListener('click', function () {
          go('#' + b.getAttribute('data-page'));
        });
      })(items[i]);
    }
    $('logout').addEventListener('click', logout);
    window.addEventListener('hashchange', function () {
      if (location.hash.indexOf('#login=') === 0) {
        loginFromFragment();
        return;
      }
      route();
    });
    if (location.hash.indexOf('#login=') === 0) {
      loginFromFragment();
    } else {
      loadSession();
    }
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', init);
  } else {
    init();
  }
})();

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

  function fmtTime(s) {
    var raw = str(s);
    if (!raw) {
      return '';
    }
    var d = new Date(raw);
    if (isNaN(d.getTime())) {
      return raw;
    }
    return d.toLocaleString(undefined, {
      year: 'numeric', month: 'short', day: 'numeric',
      hour: '2-digit', minute: '2-digit', second: '2-digit'
    });
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
        if (res.status === 401 && !opts.no401) {
          showLogin(null);
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
  }

  function showLogin(message) {
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
    e.textContent = message || '';
    e.hidden = !message;
    document.title = 'nl2sh';
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
      showApp();
    }, function (err) {
      if (err.status === 401) {
        showLogin(null);
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
    var n = el('p', { class: 'flash error', role: 'alert' }, message);
    page.insertBefore(n, page.firstChild);
  }

  function logout() {
    var b = $('logout');
    b.disabled = true;
    api('POST', '/api/logout', {}).then(function () {
      b.disabled = false;
      showLogin(null);
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
    return el('p', { class: 'msg ' + (cls || '') }, text);
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

  // The MCP / A2A page's parts, so a save, a rotation or a restart can refresh them.
  function renderMcp(page) {
    var mcp = { seq: state.renderSeq, connection: null, fields: null };
    mcp.body = el('div', { id: 'connection', class: 'section' }, el('p', { class: 'muted' }, 'Loading…'));
    mcp.refresh = button('Refresh', { id: 'refresh-connection' }, function () {
      loadConnection(mcp);
    });
    append(page, pageHeader('MCP / A2A', [mcp.refresh]));
    append(page, mcp.body);
    append(page, renderSettingsSection(mcp));
    loadConnection(mcp);
  }

  function loadConnection(mcp) {
    mcp.refresh.disabled = true;
    api('GET', '/api/connection').then(function (c) {
      if (!current(mcp.seq)) {
        return;
      }
      mcp.refresh.disabled = false;
      mcp.connection = c;
      clear(mcp.body);
      append(mcp.body, connectionView(c, mcp));
      showRunning(mcp);
    }, loadFailed(mcp.seq, mcp.body, mcp.refresh));
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

  // The settings saved but not used by the running service yet, and how to apply them.
  function runningDiffers(c, mcp) {
    var diffs = arr(c.differences).map(obj);
    if (!diffs.length) {
      return null;
    }
    var labels = {};
    (mcp.fields || []).forEach(function (f) { labels[f.key] = f.label; });
    var list = el('ul', { class: 'differs-list' });
    diffs.forEach(function (d) {
      var key = str(d.key);
      append(list, el('li', { 'data-key': key }, el('strong', null, labels[key] || key), ': saved ' +
        str(d.saved) + ', running ' + str(d.running)));
    });
    return el('div', { id: 'running-differs', class: 'differs', role: 'status' },
      el('p', { class: 'differs-title' }, 'The running service does not use these saved settings yet:'),
      list, restartHint(str(c.restart_command), mcp, 'differs-restart'));
  }

  function connectionView(c, mcp) {
    var seq = mcp.seq;
    var frag = connectionStatus(c);
    var differs = runningDiffers(c, mcp);
    if (differs) {
      frag.push(differs);
    }
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
    var tokenDiffers = arr(c.differs_from_saved).indexOf('protocol_token') !== -1;
    var token = { available: c.token_available === true, source: str(c.token_source), differs: tokenDiffers };
    tokenHidden(tokenDd, token, seq);
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

  // What the running token is, in words: where it came from, and whether the saved one
  // differs (it applies at the next start).
  function tokenWords(token) {
    var words = token.source === 'generated' ? 'generated, rotates on restart'
      : (token.source === 'configuration' ? 'from the configuration'
        : (token.source === 'environment' ? 'from NL2SH_PROTOCOL_TOKEN' : ''));
    if (token.differs) {
      words += (words ? '; ' : '') + 'the saved token differs: it applies after a restart';
    }
    return words;
  }

  function tokenHidden(dd, token, seq) {
    clear(dd);
    if (!token.available) {
      append(dd, el('span', { class: 'muted', id: 'token-state' }, 'no HTTP token (not running over HTTP)'));
      return;
    }
    var reveal = button('Reveal running token', { id: 'reveal-token', class: 'btn btn-small' });
    var err = el('span', { class: 'error inline', hidden: true });
    reveal.addEventListener('click', function () {
      reveal.disabled = true;
      // Read afresh each time: the token the running service accepts now.
      api('POST', '/api/connection/token', {}).then(function (r) {
        if (!current(seq)) {
          return;
        }
        tokenShown(dd, str(r.token), token, seq);
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
      el('span', { class: 'muted', id: 'token-state' }, 'hidden' + (tokenWords(token) ? ' (' + tokenWords(token) + ')' : '')),
      reveal, err));
  }

  function tokenShown(dd, value, token, seq) {
    clear(dd);
    var input = el('input', {
      id: 'token-value', class: 'mono token-input', type: 'text', readOnly: true,
      autocomplete: 'off', spellcheck: 'false', autocapitalize: 'off', 'aria-label': 'HTTP token'
    });
    input.value = value;
    input.addEventListener('focus', function () { input.select(); });
    append(dd, el('div', { class: 'token-row' },
      input,
      copyButton('copy-token', function () { return input.value; }),
      button('Hide', { id: 'hide-token', class: 'btn btn-small' }, function () {
        tokenHidden(dd, token, seq);
      })),
      el('p', { class: 'help', id: 'token-note' }, 'The token the running service accepts now' +
        (tokenWords(token) ? ' (' + tokenWords(token) + ').' : '.')));
  }

  // ---------------------------------------------------------------------------------
  // Settings (on the MCP / A2A page): one form, one Save
  // ---------------------------------------------------------------------------------

  // The settings come in their order, each with how it is shown (label, kind, help,
  // warning): the page keeps no list of its own. A switch that carries a warning asks
  // before it is turned on. Every changed value goes in one Save, which the server
  // validates and writes together (all or none), as `nl2sh config set` would.
  var TRUST = 'Only for callers you fully trust.';

  function renderSettingsSection(mcp) {
    var list = el('div', { id: 'settings-list' }, el('p', { class: 'muted' }, 'Loading…'));
    var sec = el('section', { class: 'section settings', id: 'settings' }, el('h2', null, 'Settings'), list);
    mcp.settingsList = list;
    loadSettings(mcp);
    return sec;
  }

  function loadSettings(mcp) {
    var seq = mcp.seq;
    api('GET', '/api/settings').then(function (r) {
      if (!current(seq)) {
        return;
      }
      clear(mcp.settingsList);
      var items = arr(r.settings).map(obj).filter(function (s) { return has(s.key); });
      if (!items.length) {
        append(mcp.settingsList, el('p', { class: 'muted' }, 'No settings.'));
        return;
      }
      append(mcp.settingsList, settingsForm(items, mcp));
      if (mcp.connection) {
        // Again, now with the settings' labels.
        clear(mcp.body);
        append(mcp.body, connectionView(mcp.connection, mcp));
      }
      showRunning(mcp);
    }, loadFailed(seq, mcp.settingsList, null));
  }

  // One setting's field in the form: its control, help, warning, the place for its own
  // error and for "saved X, running Y". Returns how to read it back.
  function settingField(s) {
    var key = str(s.key);
    var kind = str(s.kind);
    var label = str(s.label) || key;
    var inputId = 'input-' + key;
    var stored = str(s.value);
    var input;
    var controls;
    var defTag = el('span', { class: 'tag default-tag', hidden: s.set === true }, 'default');
    if (kind === 'switch') {
      input = el('input', { type: 'checkbox', id: inputId, class: 'checkbox' });
      input.checked = stored === 'true';
      controls = [el('label', { class: 'check-label', for: inputId }, input, el('span', null, label)), defTag];
    } else if (kind === 'port') {
      input = el('input', {
        type: 'number', id: inputId, class: 'mono port-input', min: '0', max: '65535', step: '1',
        inputmode: 'numeric', autocomplete: 'off'
      });
      input.value = stored;
      controls = [el('label', { for: inputId, class: 'field-label' }, label), input, defTag];
    } else if (kind === 'secret') {
      input = el('input', {
        type: 'password', id: inputId, class: 'mono token-entry', autocomplete: 'off',
        spellcheck: 'false', autocapitalize: 'off', placeholder: 'New token (empty: keep it)'
      });
      controls = [el('label', { for: inputId, class: 'field-label' }, label),
        el('span', { id: 'state-' + key, class: 'tag token-state' }, stored || 'unknown'), input];
    } else {
      input = el('input', { type: 'text', id: inputId, class: 'mono', autocomplete: 'off', spellcheck: 'false' });
      input.value = stored;
      controls = [el('label', { for: inputId, class: 'field-label' }, label), input, defTag];
    }
    var err = el('p', { id: 'err-' + key, class: 'field-error', role: 'alert', hidden: true });
    var running = el('p', { id: 'running-' + key, class: 'running-note', hidden: true });
    var box = el('div', { class: 'setting', id: 'setting-' + key, 'data-key': key },
      el('div', { class: 'setting-main' }, el('div', { class: 'setting-control' }, controls)));
    if (kind === 'secret') {
      box.setAttribute('data-secret', 'true');
    }
    if (has(s.help)) {
      append(box, el('p', { class: 'help' }, str(s.help)));
    }
    var warning = has(s.warning) ? str(s.warning) : '';
    if (warning) {
      append(box, el('p', { class: 'warning', id: 'warn-' + key }, warning + ' ' + TRUST));
    }
    append(box, running, err);
    input.addEventListener('input', function () { err.hidden = true; });
    return {
      key: key, kind: kind, label: label, warning: warning, input: input, box: box, err: err,
      running: running,
      setStored: function (v) { stored = v; },
      // The value to save, or null when unchanged; a string starting with '!' is an error.
      value: function () {
        if (kind === 'switch') {
          var v = input.checked ? 'true' : 'false';
          return v === stored ? null : v;
        }
        if (kind === 'secret') {
          return input.value ? input.value : null;
        }
        var t = input.value.trim();
        if (kind === 'port' && (!/^\d{1,5}$/.test(t) || Number(t) > 65535)) {
          return '!Enter a port number from 0 to 65535.';
        }
        return t === stored ? null : t;
      }
    };
  }

  function settingsForm(items, mcp) {
    var form = el('form', { id: 'settings-form', autocomplete: 'off' });
    // The page checks values itself and says what is wrong next to the field.
    form.noValidate = true;
    var fields = items.map(settingField);
    mcp.fields = fields;
    fields.forEach(function (f) { append(form, f.box); });
    var rotate = button('Rotate token…', { id: 'rotate-token', class: 'btn' }, function () {
      rotateToken(mcp, rotate);
    });
    var tokenField = fields.filter(function (f) { return f.kind === 'secret'; })[0];
    if (tokenField) {
      append(tokenField.box.firstChild, el('div', { class: 'setting-buttons' }, rotate));
    }
    var save = el('button', { type: 'submit', id: 'save-settings', class: 'btn btn-primary' }, 'Save');
    var msg = el('div', { id: 'settings-msg', class: 'setting-msg', role: 'status', 'aria-live': 'polite', hidden: true });
    append(form, el('div', { class: 'form-buttons' }, save), msg);
    form.addEventListener('input', function () { msg.hidden = true; });
    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      saveSettings(mcp, fields, save, msg);
    });
    return form;
  }

  function saveSettings(mcp, fields, save, msg) {
    var values = [];
    var bad = null;
    fields.forEach(function (f) {
      f.err.hidden = true;
      var v = f.value();
      if (v !== null && v.charAt(0) === '!') {
        f.err.textContent = v.slice(1);
        f.err.hidden = false;
        bad = bad || f;
      } else if (v !== null) {
        values.push({ key: f.key, value: v, field: f });
      }
    });
    if (bad) {
      showSaved(msg, false, 'Nothing was saved: correct the field marked above.');
      bad.input.focus();
      return;
    }
    if (!values.length) {
      showSaved(msg, true, 'Nothing to save: no setting was changed.');
      return;
    }
    for (var i = 0; i < values.length; i++) {
      var f = values[i].field;
      if (f.kind === 'switch' && f.warning && values[i].value === 'true' &&
          !window.confirm('Turn on "' + f.label + '"?\n\n' + f.warning + '\n\n' + TRUST)) {
        f.input.checked = false;
        showSaved(msg, false, 'Nothing was saved.');
        return;
      }
    }
    save.disabled = true;
    var body = values.map(function (v) { return { key: v.key, value: v.value }; });
    api('POST', '/api/settings', { settings: body }).then(function (r) {
      if (!current(mcp.seq)) {
        return;
      }
      save.disabled = false;
      var rr = obj(r);
      showSaved(msg, true, str(rr.message) || 'Saved.', rr.restart_needed === true ? rr : null, mcp);
      fields.forEach(function (f) {
        if (f.kind === 'secret') {
          f.input.value = '';
        }
      });
      refreshAfterChange(mcp);
    }, function (err) {
      if (!current(mcp.seq)) {
        return;
      }
      save.disabled = false;
      var text = errorText(err);
      // A refusal names its key: say it next to that field too.
      fields.forEach(function (f) {
        if (text.indexOf(f.key) !== -1) {
          f.err.textContent = text;
          f.err.hidden = false;
        }
      });
      showSaved(msg, false, 'Nothing was saved: ' + text);
    });
  }

  // The answer of a save in `msg`; with `restart` (an answer with restart_command), the
  // command that applies it and a Restart now button.
  function showSaved(msg, ok, text, restart, mcp) {
    clear(msg);
    msg.className = 'setting-msg ' + (ok ? 'ok' : 'error');
    append(msg, el('span', { class: 'setting-msg-text' }, text));
    if (restart) {
      append(msg, restartHint(str(restart.restart_command), mcp, 'restart-needed'));
    }
    msg.hidden = false;
  }

  // "Restart needed: `nl2sh --config … service restart`" with Copy and Restart now.
  var restartHints = 0;
  function restartHint(command, mcp, cls) {
    var code = el('code', { class: 'restart-command' }, command || 'nl2sh service restart');
    restartHints++;
    var line = el('div', { class: cls },
      el('span', null, 'Restart needed: '), code,
      copyButton('copy-restart-' + restartHints, function () { return code.textContent; }));
    if (mcp && mcp.connection && str(mcp.connection.transport) === 'service') {
      append(line, button('Restart now', { class: 'btn btn-small btn-primary restart-now' }, function (ev) {
        restartNow(mcp, ev.currentTarget);
      }));
    }
    return line;
  }

  // Settings and the connection read again after a save, a rotation or a restart.
  function refreshAfterChange(mcp) {
    api('GET', '/api/settings').then(function (r) {
      if (!current(mcp.seq) || !mcp.fields) {
        return;
      }
      arr(r.settings).map(obj).forEach(function (s) {
        mcp.fields.forEach(function (f) {
          if (f.key !== str(s.key)) {
            return;
          }
          var v = str(s.value);
          if (f.kind === 'secret') {
            var tag = $('state-' + f.key);
            if (tag) {
              tag.textContent = v || 'unknown';
            }
          } else {
            f.setStored(v);
            var def = f.box.querySelector('.default-tag');
            if (def) {
              def.hidden = s.set === true;
            }
          }
        });
      });
    }, function () { /* the message already shown stands */ });
    loadConnection(mcp);
  }

  // "saved X, running Y: restart to apply" under each setting the running service does
  // not use yet, from the connection's `differences`.
  function showRunning(mcp) {
    if (!mcp.fields || !mcp.connection) {
      return;
    }
    var diffs = arr(mcp.connection.differences).map(obj);
    mcp.fields.forEach(function (f) {
      var d = diffs.filter(function (x) { return str(x.key) === f.key; })[0];
      clear(f.running);
      f.running.hidden = !d;
      if (d) {
        append(f.running, 'Saved ' + str(d.saved) + ', running ' + str(d.running) + ': restart to apply.');
      }
    });
  }

  function rotateToken(mcp, btn) {
    if (!window.confirm('Rotate the HTTP token?\n\nA new random token is saved now and shown once. ' +
        'The running service keeps accepting the current token until it restarts; after that, ' +
        'clients need the new one.')) {
      return;
    }
    btn.disabled = true;
    api('POST', '/api/settings/rotate-token', {}).then(function (r) {
      if (!current(mcp.seq)) {
        return;
      }
      btn.disabled = false;
      showRotated(mcp, obj(r));
      refreshAfterChange(mcp);
    }, function (err) {
      if (!current(mcp.seq)) {
        return;
      }
      btn.disabled = false;
      var msg = $('settings-msg');
      if (msg) {
        showSaved(msg, false, 'The token was not rotated: ' + errorText(err));
      }
    });
  }

  // The new token, once: with a copy button, what happens next, and Restart now.
  function showRotated(mcp, r) {
    var old = $('rotated-token');
    if (old) {
      old.parentNode.removeChild(old);
    }
    var input = el('input', {
      id: 'new-token-value', class: 'mono token-input', type: 'text', readOnly: true,
      autocomplete: 'off', spellcheck: 'false', autocapitalize: 'off', 'aria-label': 'New HTTP token'
    });
    input.value = str(r.token);
    input.addEventListener('focus', function () { input.select(); });
    var box = el('div', { id: 'rotated-token', class: 'rotated', role: 'status' },
      el('p', { class: 'rotated-title' }, 'New token (shown once; copy it now):'),
      el('div', { class: 'token-row' }, input, copyButton('copy-new-token', function () { return input.value; })),
      el('p', { class: 'help' }, 'Saved. It takes effect when the service restarts; until then the ' +
        'running service accepts the old token, and after it clients need this one.'),
      restartHint(str(r.restart_command), mcp, 'restart-needed'),
      button('Done', { id: 'hide-new-token', class: 'btn btn-small' }, function () {
        input.value = '';
        box.parentNode.removeChild(box);
      }));
    var field = $('setting-protocol_token');
    if (field) {
      field.appendChild(box);
    }
  }

  // "Restart now": asks, restarts the service with the saved settings, then waits for the
  // new one (a new pid) and reconnects with the same session.
  function restartNow(mcp, btn) {
    if (!window.confirm('Restart the service now?\n\nIt stops and starts again with the saved ' +
        'settings. Requests in flight are answered with an error and pending approvals are ' +
        'rejected; clients reconnect. This page reconnects by itself.')) {
      return;
    }
    var before = mcp.connection ? mcp.connection.pid : null;
    if (btn) {
      btn.disabled = true;
    }
    api('POST', '/api/restart', {}).then(function () {
      awaitRestart(before);
    }, function (err) {
      if (btn) {
        btn.disabled = false;
      }
      flash('Not restarted: ' + errorText(err));
    });
  }

  var RESTART_WAIT_MS = 90000;

  function awaitRestart(beforePid) {
    state.renderSeq++;
    var seq = state.renderSeq;
    var page = $('page');
    clear(page);
    var line = el('div', { id: 'restart-status', class: 'status status-unknown', role: 'status', 'data-state': 'restarting' },
      el('span', { class: 'status-dot', 'aria-hidden': 'true' }),
      el('span', { class: 'status-word' }, 'Restarting'),
      el('span', { class: 'status-text' }, 'The service restarts with the saved settings; this page reconnects by itself.'));
    append(page, pageHeader('MCP / A2A', []), line);
    var deadline = Date.now() + RESTART_WAIT_MS;
    function poll() {
      if (seq !== state.renderSeq || !state.loggedIn) {
        return;
      }
      api('GET', '/api/connection', undefined, { no401: true }).then(function (c) {
        if (seq !== state.renderSeq) {
          return;
        }
        if (str(c.state) === 'running' && c.pid !== beforePid) {
          route();
          var p = $('page');
          p.insertBefore(el('p', { class: 'flash ok', id: 'restarted', role: 'status' },
            'Restarted: the service runs with the saved settings (pid ' + str(c.pid) + ').'), p.firstChild);
          return;
        }
        again();
      }, function (err) {
        if (err.status === 401) {
          showLogin('Your console session ended during the restart. Run `nl2sh web login` on the device for a new link.');
          return;
        }
        again();
      });
    }
    function again() {
      if (Date.now() > deadline) {
        clear(line.lastChild);
        append(line.lastChild, 'The service has not come back yet. Check `nl2sh service status` on the device.');
        line.setAttribute('data-state', 'late');
        return;
      }
      setTimeout(poll, 1000);
    }
    setTimeout(poll, 1000);
  }

  // ---------------------------------------------------------------------------------
  // Approvals: polled every second for the menu's badge, and for the page when shown
  // ---------------------------------------------------------------------------------

  function startPolling() {
    stopTimers();
    pollApprovals();
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
      $('net-banner').hidden = true;
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
      if (err.status === 0) {
        $('net-banner').hidden = false;
      }
      if (state.approvals) {
        var st = state.approvals.status;
        st.textContent = errorText(err);
        st.hidden = false;
      }
      schedulePoll();
    });
  }

  function setBadge(n) {
    var b = $('approvals-badge');
    b.textContent = String(n);
    b.hidden = n === 0;
    b.setAttribute('aria-label', n + (n === 1 ? ' pending request' : ' pending requests'));
    document.title = n ? '(' + n + ') nl2sh' : 'nl2sh';
  }

  function renderApprovals(page) {
    var list = el('div', { id: 'approval-list', class: 'approval-list', 'aria-live': 'polite' });
    var empty = el('p', { id: 'approvals-empty', class: 'empty', hidden: true }, 'No requests are waiting.');
    var loading = el('p', { class: 'muted', id: 'approvals-loading' }, 'Loading…');
    var status = el('p', { id: 'approvals-status', class: 'msg error', hidden: true });
    // Who holds the queue: a count per origin, each with a button that rejects all of it.
    var origins = el('div', { id: 'approval-origins', class: 'approval-origins', hidden: true });
    var originsMsg = el('p', { id: 'approval-origins-msg', class: 'msg', role: 'status', hidden: true });
    var grants = el('div', { id: 'grants' }, el('p', { class: 'muted' }, 'Loading…'));
    var uiGrants = el('ul', { id: 'ui-grants-list', class: 'ui-grants', 'aria-live': 'polite' });
    var uiEmpty = el('p', { id: 'ui-grants-empty', class: 'empty' }, 'No timed UI grants are in force.');
    var uiMsg = el('p', { id: 'ui-grants-msg', class: 'msg', role: 'status', hidden: true });
    append(page, pageHeader('Approvals'));
    append(page, status, loading, originsMsg, empty, origins, list);
    append(page, el('section', { class: 'section', id: 'ui-grants-section' },
      el('h3', null, 'Timed UI grants'),
      el('p', { class: 'muted' }, 'UI actions (taps, gestures, text, keys) that run unasked in one app, ' +
        'until the time is up or another app comes to the front.'),
      uiMsg, uiEmpty, uiGrants));
    append(page, el('section', { class: 'section', id: 'grants-section' }, el('h3', null, 'Grants'), grants));
    state.approvals = {
      list: list, empty: empty, loading: loading, status: status, grants: grants,
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
      card.deadline = now + Math.max(0, Number(p.seconds_left) || 0) * 1000;
      updateTimeLeft(card);
    });
    a.cards.forEach(function (card, id) {
      if (!seen.has(id) && !(card.keepUntil && card.keepUntil > now)) {
        if (card.node.parentNode) {
          card.node.parentNode.removeChild(card.node);
        }
        a.cards.delete(id);
      }
    });
    a.decided.forEach(function (t, id) {
      if (now - t > 60000) {
        a.decided.delete(id);
      }
    });
    a.empty.hidden = a.cards.size > 0;
    updateOrigins();
    updateUiGrants(uiGrants);

    var gk = JSON.stringify(grants);
    if (gk !== a.grantsKey) {
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
    var row = a.uiRows.get(ref);
    if (row && row.node.parentNode) {
      row.node.parentNode.removeChild(row.node);
    }
    a.uiRows.delete(ref);
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
    var m = Math.floor(left / 60);
    var sec = left % 60;
    var text = left <= 0 ? 'Ending' : m + ':' + (sec < 10 ? '0' : '') + sec + ' left';
    if (row.timeEl.textContent !== text) {
      row.timeEl.textContent = text;
    }
    row.timeEl.setAttribute('data-seconds', String(left));
  }

  // The origins of the requests shown, in the order they first appear, with their counts.
  function originCounts() {
    var counts = new Map();
    state.approvals.cards.forEach(function (card) {
      if (!card.node.classList.contains('gone')) {
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
        var card = a.cards.get(id);
        if (card && card.node.parentNode) {
          card.node.parentNode.removeChild(card.node);
        }
        a.cards.delete(id);
      });
      a.empty.hidden = a.cards.size > 0;
      setBadge(a.cards.size);
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
    var left = Math.max(0, Math.round((card.deadline - Date.now()) / 1000));
    var text;
    if (left <= 0) {
      text = 'Expired';
    } else {
      var m = Math.floor(left / 60);
      var sec = left % 60;
      text = 'Time left: ' + (m ? m + ' min ' + (sec < 10 ? '0' : '') + sec + ' s' : sec + ' s');
    }
    if (card.timeEl.textContent !== text) {
      card.timeEl.textContent = text;
    }
    card.timeEl.classList.toggle('urgent', left > 0 && left <= 15);
    card.timeEl.setAttribute('data-seconds', String(left));
  }

  function makeCard(p) {
    var id = str(p.id);
    var risk = str(p.risk);
    var phrase = p.phrase === null || p.phrase === undefined ? null : str(p.phrase);
    var timeEl = el('span', { class: 'time-left' });
    var errEl = el('p', { class: 'error', role: 'alert', hidden: true });
    var phraseInput = null;

    var meta = el('dl', { class: 'kv kv-compact' });
    function row(label, value, mono) {
      if (!has(value)) {
        return;
      }
      append(meta, el('div', { class: 'kv-row' }, el('dt', null, label),
        el('dd', { class: mono ? 'mono' : null }, str(value))));
    }
    row('Identity', p.identity, false);
    row('Origin', p.origin, false);
    row('Task', p.task, true);
    row('Note', has(p.after_reading) ? 'The Agent asks ' + str(p.after_reading) : null, false);
    row('Request', id, true);

    var reasons = arr(p.reasons);
    var approve = el('button', { type: 'button', class: 'btn btn-approve approve' }, 'Approve');
    var reject = el('button', { type: 'button', class: 'btn btn-reject reject' }, 'Reject');

    var node = el('article', { class: 'request risk-border-' + (risk === 'dangerous' || risk === 'critical' ? 'red' : risk === 'medium' || risk === 'high' ? 'amber' : 'neutral'), 'data-id': id, 'data-risk': risk },
      el('div', { class: 'request-head' },
        riskLabel(risk),
        el('span', { class: 'tool mono' }, str(p.tool)),
        p.requires_root === true ? el('span', { class: 'root-tag' }, 'runs as root') : null,
        el('span', { class: 'spacer' }),
        timeEl),
      actionBlock(p.action),
      dataBlock(p.data),
      meta,
      reasons.length ? el('div', { class: 'reasons-block' },
        el('h4', null, 'Why it needs approval'),
        el('ul', { class: 'reasons' }, reasons.map(function (r) { return el('li', null, str(r)); }))) : null);

    if (phrase !== null) {
      phraseInput = el('input', {
        type: 'text', class: 'phrase mono', autocomplete: 'off', spellcheck: 'false',
        autocapitalize: 'off', 'aria-label': 'Approval phrase', enterkeyhint: 'done'
      });
      append(node, el('div', { class: 'phrase-block' },
        el('p', null, 'Type this phrase to approve:'),
        el('code', { class: 'phrase-text' }, phrase),
        phraseInput));
      phraseInput.addEventListener('keydown', function (ev) {
        if (ev.key === 'Enter') {
          ev.preventDefault();
          approve.click();
        }
      });
    }
    // A UI action in an app (medium or below, no root): the owner may approve it and
    // let the same caller's UI actions in that app run unasked for some minutes.
    var uiApp = has(p.ui_app) ? str(p.ui_app) : null;
    var approveUi = null;
    var uiMinutes = null;
    if (uiApp !== null) {
      var selectId = 'ui-minutes-' + id;
      uiMinutes = el('select', { id: selectId, class: 'ui-minutes' },
        [5, 10, 15, 30].map(function (m) {
          return el('option', { value: String(m) }, m + ' min');
        }));
      uiMinutes.value = '10';
      approveUi = el('button', { type: 'button', class: 'btn btn-approve approve-ui' });
      var label = function () {
        approveUi.textContent = 'Approve + UI in ' + uiApp + ' for ' + uiMinutes.value + ' min';
      };
      label();
      uiMinutes.addEventListener('change', label);
      append(node, el('div', { class: 'ui-grant-offer' },
        el('label', { for: selectId },
          'Or approve and allow UI actions (taps, gestures, text, keys) from ' + str(p.origin) +
          ' in ', el('span', { class: 'mono' }, uiApp), ' for'),
        uiMinutes, approveUi));
    }
    append(node, errEl, el('div', { class: 'request-buttons' }, approve, reject));

    var card = { id: id, origin: str(p.origin), node: node, timeEl: timeEl, deadline: Date.now(), keepUntil: 0 };

    function fail(message, gone) {
      errEl.textContent = message;
      errEl.hidden = false;
      if (gone) {
        node.classList.add('gone');
        card.keepUntil = Date.now() + 6000;
        approve.disabled = true;
        reject.disabled = true;
        setUi(true);
        if (phraseInput) {
          phraseInput.disabled = true;
        }
      } else {
        approve.disabled = false;
        reject.disabled = false;
        setUi(false);
      }
    }

    function setUi(disabled) {
      if (approveUi) {
        approveUi.disabled = disabled;
        uiMinutes.disabled = disabled;
      }
    }

    // decision 'approve' | 'reject'; minutes: of a timed UI grant to give with the approval.
    function decide(decision, minutes) {
      var typed = null;
      if (decision === 'approve' && phraseInput) {
        typed = phraseInput.value;
        if (!typed.trim()) {
          fail('Type the phrase shown above to approve.', false);
          phraseInput.focus();
          return;
        }
      }
      if (decision === 'reject' && !window.confirm('Reject this request?')) {
        return;
      }
      approve.disabled = true;
      reject.disabled = true;
      setUi(true);
      errEl.hidden = true;
      var body = { decision: decision, phrase: typed };
      if (minutes) {
        body.ui_minutes = minutes;
      }
      api('POST', '/api/approvals/' + encodeURIComponent(id), body).then(function () {
        var a = state.approvals;
        if (!a) {
          return;
        }
        a.decided.set(id, Date.now());
        a.cards.delete(id);
        if (node.parentNode) {
          node.parentNode.removeChild(node);
        }
        a.empty.hidden = a.cards.size > 0;
        updateOrigins();
        if (minutes && !state.pollBusy) {
          schedulePollNow(); // show the new grant at once
        }
      }, function (err) {
        if (err.kind === 'no_such_request' || err.status === 404) {
          fail('This request is no longer waiting (decided elsewhere, or gone).', true);
        } else if (err.kind === 'expired' || err.status === 410) {
          fail('This request expired before the decision reached it.', true);
        } else {
          fail(errorText(err), false);
          if (phraseInput && (err.kind === 'wrong_phrase' || err.kind === 'phrase_required')) {
            phraseInput.focus();
            phraseInput.select();
          }
        }
      });
    }

    approve.addEventListener('click', function () { decide('approve'); });
    if (approveUi) {
      approveUi.addEventListener('click', function () { decide('approve', Number(uiMinutes.value)); });
    }
    reject.addEventListener('click', function () { decide('reject'); });
    return card;
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
  // or the error), unless the owner has moved to another page meanwhile.
  function loadList(seq, refresh, body, path, field, emptyId, emptyText, render) {
    refresh.disabled = true;
    api('GET', path).then(function (r) {
      if (!current(seq)) {
        return;
      }
      refresh.disabled = false;
      clear(body);
      var items = arr(r[field]).map(obj);
      if (!items.length) {
        append(body, el('p', { class: 'empty', id: emptyId }, emptyText));
        return;
      }
      render(items);
    }, loadFailed(seq, body, refresh));
  }

  function renderTasks(page) {
    var seq = state.renderSeq;
    var body = el('div', { id: 'tasks', class: 'section' }, el('p', { class: 'muted' }, 'Loading…'));
    var refresh = button('Refresh', { id: 'refresh-tasks' }, load);
    append(page, pageHeader('Tasks', [refresh]), body);

    function load() {
      loadList(seq, refresh, body, '/api/tasks', 'tasks', 'tasks-empty', 'No tasks yet.', function (tasks) {
        var tbody = el('tbody');
        tasks.forEach(function (t) {
          var id = str(t.id);
          // `id` is shown (escaped); `ref` is the id as stored, sent back to ask for it.
          var ref = typeof t.ref === 'string' ? t.ref : id;
          var link = button(id, { class: 'task-link linklike mono', 'data-id': id }, function () {
            go('#tasks/' + encodeURIComponent(ref));
          });
          append(tbody, el('tr', { class: 'task-row', 'data-id': id },
            td('Task', 'cell-link', link),
            td('State', null, stateLabel(t.state)),
            td('Updated', null, timeEl(t.updated)),
            td('Context', 'mono small', str(t.context_id))));
        });
        append(body, el('table', { class: 'table stack', id: 'tasks-table' },
          el('thead', null, el('tr', null,
            el('th', { scope: 'col' }, 'Task'), el('th', { scope: 'col' }, 'State'),
            el('th', { scope: 'col' }, 'Updated'), el('th', { scope: 'col' }, 'Context'))),
          tbody));
      });
    }
    load();
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
              ['Time', 'Kind', 'Decision', 'Tool', 'Risk', 'Origin', 'Action', 'Outcome'].map(function (h) {
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
      td('Origin', null, str(r.origin)),
      td('Action', 'action-cell',
        has(r.action) ? actionBlock(r.action, 'action-small') : null,
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

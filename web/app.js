// qwenserve chat page (index.html). Plain browser JavaScript, no build step.
//
// Element hooks (see the comment at the top of index.html):
//   #model-name, #system-prompt, #temperature, #top-p, #max-tokens, #new-chat, #messages,
//   #empty-state, #composer, #prompt, #send, #stop, #status
//   .message.user / .message.assistant (data-state: streaming | done | stopped | error;
//   data-ttft-ms, data-tokens-per-second, data-completion-tokens, data-finish-reason)
//   inside an assistant message: .reasoning (<details>), .reasoning-content, .content, .error,
//   .metrics .ttft / .tps / .tokens / .finish
//
// Protocol: GET /v1/models for the model id; POST /v1/chat/completions with stream: true and
// stream_options.include_usage. The server-sent events are parsed here from the fetch body stream:
// "data: {json}" lines (an event ends at a blank line), lines starting with ":" are comments, and
// "data: [DONE]" ends the reply. Errors are OpenAI-shaped: {"error": {message, type, param, code}},
// either as the HTTP error body or as an event in the stream.
//
// Metrics, measured in the browser: TTFT = time from sending the request to the first delta that
// carries generated text (content or reasoning_content). tokens/s = completion tokens (from the
// usage chunk; counted deltas, marked "≈", when there is none) over the time from that first delta
// to the end of the stream.
//
// Libraries (served from /vendor/, embedded from Debian packages): marked (Markdown),
// DOMPurify (sanitizer), highlight.js (code highlighting).
'use strict';

(() => {
  const $ = (selector) => document.querySelector(selector);
  const els = {
    model: $('#model-name'),
    system: $('#system-prompt'),
    temperature: $('#temperature'),
    topP: $('#top-p'),
    maxTokens: $('#max-tokens'),
    newChat: $('#new-chat'),
    messages: $('#messages'),
    empty: $('#empty-state'),
    composer: $('#composer'),
    prompt: $('#prompt'),
    send: $('#send'),
    stop: $('#stop'),
    status: $('#status'),
  };

  const state = {
    history: [],       // [{role: 'user' | 'assistant', content}], sent with every request
    model: null,       // id from /v1/models
    controller: null,  // AbortController of the reply being streamed
  };

  // ---------------------------------------------------------------- Markdown rendering

  if (window.marked) {
    // No heading ids (they could collide with the page's ids), no e-mail mangling.
    marked.setOptions({gfm: true, breaks: false, headerIds: false, mangle: false});
  }
  if (window.DOMPurify) {
    DOMPurify.addHook('afterSanitizeAttributes', (node) => {
      if (node.tagName === 'A' && node.getAttribute('href')) {
        node.setAttribute('target', '_blank');
        node.setAttribute('rel', 'noopener noreferrer');
      }
    });
  }
  const SANITIZE_OPTIONS = {
    FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'option'],
    FORBID_ATTR: ['id', 'name', 'style'],
  };

  // Markdown -> HTML (marked) -> sanitized (DOMPurify) -> innerHTML; then highlight code blocks.
  // Without the sanitizer the text is shown as plain text, never as raw HTML.
  function renderMarkdown(target, text, final) {
    if (window.marked && window.DOMPurify) {
      target.innerHTML = DOMPurify.sanitize(marked.parse(text), SANITIZE_OPTIONS);
      highlightCode(target, final);
    } else {
      target.textContent = text;
    }
  }

  // While streaming only blocks with a known language are highlighted (auto-detection over every
  // language on every frame is too slow); the final render highlights all of them.
  function highlightCode(root, final) {
    if (!window.hljs) return;
    const highlight = hljs.highlightElement || hljs.highlightBlock;
    for (const code of root.querySelectorAll('pre code')) {
      const m = /(?:^|\s)language-([\w+#.-]+)/.exec(code.className);
      const known = m && hljs.getLanguage(m[1]);
      if (!known && !final) continue;
      if (!known && m) code.classList.remove(m[0].trim());  // unknown language: auto-detect
      try {
        highlight.call(hljs, code);
      } catch (e) {
        /* leave the block unhighlighted */
      }
    }
  }

  // ---------------------------------------------------------------- DOM helpers

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function nearBottom() {
    const m = els.messages;
    return m.scrollHeight - m.scrollTop - m.clientHeight < 80;
  }

  function scrollToBottom() {
    els.messages.scrollTop = els.messages.scrollHeight;
  }

  function setStatus(text, kind) {
    els.status.textContent = text || '';
    els.status.dataset.kind = kind || '';
  }

  function setBusy(busy) {
    els.send.disabled = busy;
    els.stop.disabled = !busy;
    document.body.classList.toggle('busy', busy);
  }

  function appendUser(text) {
    els.empty.hidden = true;
    const node = el('div', 'message user');
    node.append(el('div', 'role', 'You'), el('div', 'content', text));
    els.messages.append(node);
    scrollToBottom();
    return node;
  }

  function appendAssistant() {
    els.empty.hidden = true;
    const node = el('div', 'message assistant');
    node.dataset.state = 'streaming';
    const reasoning = el('details', 'reasoning');
    reasoning.hidden = true;
    const summary = el('summary', null, 'Reasoning');
    const reasoningContent = el('div', 'reasoning-content');
    reasoning.append(summary, reasoningContent);
    const content = el('div', 'content markdown streaming');
    const error = el('div', 'error');
    error.hidden = true;
    error.setAttribute('role', 'alert');
    const metrics = el('div', 'metrics');
    const ttft = el('span', 'ttft', 'TTFT …');
    const tps = el('span', 'tps');
    const tokens = el('span', 'tokens');
    const finish = el('span', 'finish');
    metrics.append(ttft, tps, tokens, finish);
    node.append(el('div', 'role', 'Assistant'), reasoning, content, error, metrics);
    els.messages.append(node);
    scrollToBottom();
    return {
      node, reasoning, summary, reasoningContent, content, error, ttft, tps, tokens, finish,
      text: '',            // raw content deltas
      reasoningText: '',   // raw reasoning_content deltas
      deltas: 0,           // deltas with text (token estimate when there is no usage)
      usage: null,
      finishReason: null,
      sawDone: false,
      t0: 0, tFirst: 0, tLast: 0, tReasoningEnd: 0,
      frame: 0,
      renderedText: null,
    };
  }

  // ---------------------------------------------------------------- errors

  class ApiError extends Error {
    constructor(error, status) {
      const e = typeof error === 'string' ? {message: error} : (error || {});
      super(e.message || 'Request failed');
      this.name = 'ApiError';
      this.type = e.type || null;
      this.param = e.param ?? null;
      this.code = e.code ?? null;
      this.status = status || null;
    }
  }

  async function errorFromResponse(res) {
    const text = await res.text().catch(() => '');
    try {
      const body = JSON.parse(text);
      if (body && body.error) return new ApiError(body.error, res.status);
    } catch (e) {
      /* not JSON */
    }
    return new ApiError({message: text.trim() || res.statusText || 'Request failed',
                         type: 'http_error'}, res.status);
  }

  function showError(view, err) {
    const details = [];
    if (err.status) details.push(`HTTP ${err.status}`);
    if (err.type) details.push(err.type);
    if (err.param) details.push(`param: ${err.param}`);
    if (err.code !== null && err.code !== undefined && err.code !== '') details.push(`code: ${err.code}`);
    view.error.replaceChildren(
      el('strong', null, 'Error: '), el('span', 'error-message', err.message || String(err)));
    if (details.length) view.error.append(el('span', 'error-details', ` (${details.join(' · ')})`));
    if (err.type) view.error.dataset.type = err.type;
    if (err.code !== null && err.code !== undefined) view.error.dataset.code = String(err.code);
    view.error.hidden = false;
  }

  // ---------------------------------------------------------------- SSE parsing

  // Reads server-sent events from a fetch body stream and calls onData(data) for every event's
  // data; onData returning false stops reading. Returns when the stream ends or onData stops it.
  async function readEventStream(body, onData) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    let data = [];
    let stopped = false;
    const dispatch = () => {
      if (!data.length) return;
      const payload = data.join('\n');
      data = [];
      if (onData(payload) === false) stopped = true;
    };
    try {
      while (!stopped) {
        const {value, done} = await reader.read();
        buffer += done ? decoder.decode() : decoder.decode(value, {stream: true});
        // A trailing "\r" may be the first half of "\r\n": keep it for the next chunk.
        let keep = '';
        if (!done && buffer.endsWith('\r')) {
          keep = '\r';
          buffer = buffer.slice(0, -1);
        }
        const lines = buffer.split(/\r\n|\r|\n/);
        buffer = (done ? '' : lines.pop()) + keep;
        for (const line of lines) {
          if (line === '') {
            dispatch();
          } else if (line.startsWith(':')) {
            continue;  // comment / keep-alive
          } else {
            const colon = line.indexOf(':');
            const field = colon < 0 ? line : line.slice(0, colon);
            let value = colon < 0 ? '' : line.slice(colon + 1);
            if (value.startsWith(' ')) value = value.slice(1);
            if (field === 'data') data.push(value);
          }
          if (stopped) break;
        }
        if (done) {
          if (!stopped) dispatch();
          break;
        }
      }
    } finally {
      reader.cancel().catch(() => {});
    }
  }

  // One event's data: "[DONE]" or a chat.completion.chunk (or an error object).
  function handleEventData(view, payload) {
    if (payload.trim() === '[DONE]') {
      view.sawDone = true;
      return false;
    }
    let chunk;
    try {
      chunk = JSON.parse(payload);
    } catch (e) {
      // Servers that omit the blank line between events: try each line on its own.
      const lines = payload.split('\n');
      if (lines.length > 1) {
        for (const line of lines) {
          if (handleEventData(view, line) === false) return false;
        }
        return true;
      }
      throw new ApiError({message: `Malformed event from the server: ${payload.slice(0, 200)}`,
                          type: 'stream_error'});
    }
    handleChunk(view, chunk);
    return true;
  }

  function handleChunk(view, chunk) {
    if (!chunk || typeof chunk !== 'object') return;
    if (chunk.error) throw new ApiError(chunk.error);
    if (chunk.usage) view.usage = chunk.usage;
    const choice = Array.isArray(chunk.choices) ? chunk.choices[0] : null;
    if (!choice) return;
    const delta = choice.delta || choice.message || {};
    const reasoning = delta.reasoning_content ?? delta.reasoning;
    const now = performance.now();
    if (typeof reasoning === 'string' && reasoning) {
      markFirstToken(view, now);
      view.reasoningText += reasoning;
      view.deltas++;
    }
    if (typeof delta.content === 'string' && delta.content) {
      markFirstToken(view, now);
      view.text += delta.content;
      view.deltas++;
    }
    if (choice.finish_reason) view.finishReason = choice.finish_reason;
    scheduleRender(view);
  }

  function markFirstToken(view, now) {
    if (!view.tFirst) {
      view.tFirst = now;
      const ttft = Math.round(now - view.t0);
      view.node.dataset.ttftMs = String(ttft);
      view.ttft.textContent = `TTFT ${ttft} ms`;
    }
    view.tLast = now;
  }

  // ---------------------------------------------------------------- rendering a reply

  // Qwen3 may put its reasoning inline as "<think>…</think>" when the server does not split it out.
  function splitThink(text) {
    const m = /^\s*<think>([\s\S]*?)(?:<\/think>\s*|$)([\s\S]*)$/.exec(text);
    if (!m) return {reasoning: '', content: text};
    return {reasoning: m[1], content: m[2]};
  }

  function scheduleRender(view) {
    if (view.frame) return;
    view.frame = requestAnimationFrame(() => {
      view.frame = 0;
      renderView(view, false);
    });
  }

  function renderView(view, final) {
    const stick = nearBottom();
    const inline = splitThink(view.text);
    const reasoning = view.reasoningText + inline.reasoning;
    const content = inline.content;
    if (reasoning) {
      if (view.reasoning.hidden) {
        view.reasoning.hidden = false;
        view.reasoning.open = true;
      }
      view.reasoningContent.textContent = reasoning;
      if (content && !view.tReasoningEnd) {
        view.tReasoningEnd = performance.now();
        view.reasoning.open = false;  // collapse once the answer starts
      }
      const seconds = ((view.tReasoningEnd || performance.now()) - (view.tFirst || view.t0)) / 1000;
      view.summary.textContent = view.tReasoningEnd || final
        ? `Reasoning (${seconds.toFixed(1)} s)` : 'Reasoning…';
    }
    if (final || content !== view.renderedText) {
      renderMarkdown(view.content, content, final);
      view.renderedText = content;
    }
    if (!final && view.tFirst && view.tLast > view.tFirst + 200) {
      const rate = (view.deltas - 1) / ((view.tLast - view.tFirst) / 1000);
      view.tps.textContent = `≈ ${rate.toFixed(1)} tok/s`;
    }
    if (stick) scrollToBottom();
  }

  function finishView(view, outcome) {
    if (view.frame) {
      cancelAnimationFrame(view.frame);
      view.frame = 0;
    }
    const tEnd = performance.now();
    renderView(view, true);
    view.content.classList.remove('streaming');
    view.node.dataset.state = outcome;

    if (!view.tFirst) view.ttft.textContent = outcome === 'error' ? '' : 'no output';
    const exact = view.usage && Number.isFinite(view.usage.completion_tokens);
    const tokens = exact ? view.usage.completion_tokens : view.deltas;
    if (tokens > 0) {
      view.node.dataset.completionTokens = String(tokens);
      view.tokens.textContent = `${exact ? '' : '≈ '}${tokens} token${tokens === 1 ? '' : 's'}`;
      if (view.usage && Number.isFinite(view.usage.prompt_tokens)) {
        view.tokens.title = `prompt ${view.usage.prompt_tokens} tokens`;
      }
    }
    const seconds = (tEnd - view.tFirst) / 1000;
    if (view.tFirst && tokens > 0 && seconds > 0) {
      const rate = tokens / seconds;
      view.node.dataset.tokensPerSecond = rate.toFixed(2);
      view.tps.textContent = `${exact ? '' : '≈ '}${rate.toFixed(1)} tok/s`;
    } else {
      view.tps.textContent = '';
    }
    const finish = outcome === 'stopped' ? 'stopped' : view.finishReason;
    if (finish) {
      view.node.dataset.finishReason = finish;
      view.finish.textContent = finish;
    }
  }

  // ---------------------------------------------------------------- sending

  function numberFrom(input, fallback) {
    const v = parseFloat(input.value);
    return Number.isFinite(v) ? v : fallback;
  }

  function buildRequest() {
    const messages = [];
    const system = els.system.value.trim();
    if (system) messages.push({role: 'system', content: system});
    messages.push(...state.history);
    const body = {
      messages,
      stream: true,
      stream_options: {include_usage: true},
      temperature: numberFrom(els.temperature, 0.7),
      top_p: numberFrom(els.topP, 0.95),
      max_tokens: Math.max(1, Math.round(numberFrom(els.maxTokens, 1024))),
    };
    if (state.model) body.model = state.model;
    return body;
  }

  async function send() {
    const text = els.prompt.value.trim();
    if (!text || state.controller) return;
    els.prompt.value = '';
    const userNode = appendUser(text);
    const userTurn = {role: 'user', content: text};
    state.history.push(userTurn);
    const view = appendAssistant();
    const controller = new AbortController();
    state.controller = controller;
    setBusy(true);
    setStatus('Generating…', 'busy');

    let outcome = 'done';
    view.t0 = performance.now();
    try {
      const res = await fetch('/v1/chat/completions', {
        method: 'POST',
        headers: {'Content-Type': 'application/json', 'Accept': 'text/event-stream'},
        body: JSON.stringify(buildRequest()),
        signal: controller.signal,
      });
      if (!res.ok) throw await errorFromResponse(res);
      const type = res.headers.get('content-type') || '';
      if (type.includes('application/json')) {
        // A server that answered without streaming: one chat.completion object.
        const body = await res.json();
        handleChunk(view, body);
        view.sawDone = true;
      } else if (res.body) {
        await readEventStream(res.body, (data) => handleEventData(view, data));
      }
      if (!view.sawDone && !view.finishReason) {
        throw new ApiError({message: 'The stream ended before the reply was complete.',
                            type: 'stream_error'});
      }
    } catch (err) {
      if (err.name === 'AbortError' || controller.signal.aborted) {
        outcome = 'stopped';
      } else {
        outcome = 'error';
        showError(view, err);
      }
    }
    finishView(view, outcome);
    if (state.controller === controller) {
      state.controller = null;
      setBusy(false);
    }
    setStatus(outcome === 'error' ? 'The request failed.' : '', outcome === 'error' ? 'error' : '');

    // The history keeps the exchange only when a reply came back (a stopped reply keeps what was
    // generated); otherwise the user turn is left out of the context and the text is restored.
    const content = splitThink(view.text).content.trim();
    const stillCurrent = state.history.includes(userTurn);
    if ((outcome === 'done' || outcome === 'stopped') && content) {
      if (stillCurrent) state.history.push({role: 'assistant', content});
    } else {
      if (stillCurrent) state.history.splice(state.history.indexOf(userTurn), 1);
      userNode.classList.add('excluded');
      userNode.title = 'Not part of the conversation (no reply)';
      if (stillCurrent && !els.prompt.value) els.prompt.value = text;
    }
    if (stillCurrent) els.prompt.focus();
  }

  function stop() {
    if (state.controller) state.controller.abort();
  }

  function newChat() {
    stop();
    state.history = [];
    els.messages.replaceChildren(els.empty);
    els.empty.hidden = false;
    setStatus('');
    els.prompt.focus();
  }

  // ---------------------------------------------------------------- model

  async function loadModel() {
    try {
      const res = await fetch('/v1/models', {headers: {'Accept': 'application/json'}});
      if (!res.ok) throw await errorFromResponse(res);
      const body = await res.json();
      const models = Array.isArray(body.data) ? body.data : [];
      if (!models.length || !models[0].id) throw new Error('no model is loaded');
      state.model = models[0].id;
      els.model.textContent = state.model;
      els.model.title = models.map((m) => m.id).join(', ');
      els.model.dataset.state = 'ok';
    } catch (err) {
      els.model.textContent = 'model unavailable';
      els.model.title = err.message || String(err);
      els.model.dataset.state = 'error';
      setStatus(`Could not load /v1/models: ${err.message || err}`, 'error');
    }
  }

  // ---------------------------------------------------------------- wiring

  els.composer.addEventListener('submit', (event) => {
    event.preventDefault();
    send();
  });
  els.prompt.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });
  els.stop.addEventListener('click', stop);
  els.newChat.addEventListener('click', newChat);
  setBusy(false);
  loadModel();
  els.prompt.focus();
})();

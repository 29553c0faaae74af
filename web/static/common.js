// Helpers shared by the storefront and the workshop page. Plain browser
// JavaScript, no build step: everything hangs off one global, FS.
"use strict";

window.FS = (function () {
  // el builds an element. attrs: plain attributes, plus "class", "text"
  // (textContent) and "on<event>" handlers. Children may be strings or nodes.
  // Text from the server only ever goes in as text, never as HTML.
  function el(tag, attrs, ...children) {
    const node = tag.startsWith("svg:")
      ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4))
      : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "text") node.textContent = v;
      else if (k.startsWith("on") && typeof v === "function") node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  // svg is el for SVG elements: svg("rect", {...}).
  function svg(tag, attrs, ...children) {
    return el("svg:" + tag, attrs, ...children);
  }

  // uuid is a fresh v4 UUID per call. crypto.randomUUID exists only in a
  // secure context (https or localhost); over plain http on a LAN address
  // the page falls back to getRandomValues, which exists everywhere.
  function uuid() {
    if (window.crypto && typeof crypto.randomUUID === "function") return crypto.randomUUID();
    const b = crypto.getRandomValues(new Uint8Array(16));
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }

  // api sends one JSON request and never throws: it resolves to
  // {status, data, retryAfter, networkError}. status 0 means no answer
  // arrived (network down, server gone); data is the parsed JSON body or
  // null.
  async function api(method, url, body, headers) {
    const h = Object.assign({ Accept: "application/json" }, headers || {});
    const init = { method, headers: h, cache: "no-store" };
    if (body !== undefined) {
      h["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(url, init);
    } catch (err) {
      return { status: 0, data: null, retryAfter: null, networkError: String(err) };
    }
    let data = null;
    const text = await res.text().catch(() => "");
    if (text) {
      try {
        data = JSON.parse(text);
      } catch (_) {
        data = { error: "not_json", message: text.slice(0, 200) };
      }
    }
    const ra = res.headers.get("Retry-After");
    return { status: res.status, data, retryAfter: ra ? Number(ra) || ra : null, networkError: null };
  }

  // readSSE reads a text/event-stream from a fetch Response and calls
  // onEvent(parsed JSON, event name) for each event. fetch rather than
  // EventSource, because EventSource cannot send an Authorization header
  // and the admin token must not travel in a URL.
  async function readSSE(res, onEvent, signal) {
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    const flush = (block) => {
      let name = "message";
      const data = [];
      for (const line of block.split(/\r?\n/)) {
        if (line.startsWith(":")) continue;
        const i = line.indexOf(":");
        const field = i < 0 ? line : line.slice(0, i);
        let value = i < 0 ? "" : line.slice(i + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "event") name = value;
        else if (field === "data") data.push(value);
      }
      if (!data.length) return;
      let obj;
      try {
        obj = JSON.parse(data.join("\n"));
      } catch (_) {
        return;
      }
      onEvent(obj, name);
    };
    for (;;) {
      if (signal && signal.aborted) break;
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let m;
      while ((m = /\r?\n\r?\n/.exec(buf))) {
        flush(buf.slice(0, m.index));
        buf = buf.slice(m.index + m[0].length);
      }
    }
    if (buf.trim()) flush(buf);
  }

  // store wraps Web Storage: private modes and full disks throw, and a page
  // that cannot remember must still work.
  function store(kind) {
    const s = () => (kind === "session" ? window.sessionStorage : window.localStorage);
    return {
      get(key, fallback) {
        try {
          const v = s().getItem(key);
          return v === null ? fallback : JSON.parse(v);
        } catch (_) {
          return fallback;
        }
      },
      set(key, value) {
        try {
          s().setItem(key, JSON.stringify(value));
        } catch (_) {
          /* not remembered; the page goes on */
        }
      },
      remove(key) {
        try {
          s().removeItem(key);
        } catch (_) {
          /* nothing to forget */
        }
      },
    };
  }

  // say puts an outcome into the page's live region, which a screen reader
  // announces. The region is always in the page (empty, it takes no room):
  // content put into a region that was just made visible is often missed. kind: ok, warn, error, info. action: optional {label, run}
  // for a button beside the message (such as Retry).
  function say(region, kind, text, action) {
    region.replaceChildren();
    region.className = "outcome outcome-" + kind;
    // A fresh child each time makes a repeated message announced again.
    const p = el("p", { text });
    region.append(p);
    if (action) {
      region.append(el("button", { type: "button", class: "btn btn-small", onclick: action.run, text: action.label }));
    }
    region.dataset.kind = kind;
  }

  const moneyFmt = new Intl.NumberFormat("en-US", { style: "currency", currency: "USD" });
  function money(cents) {
    return moneyFmt.format((Number(cents) || 0) / 100);
  }

  // errorText is the server's message for an error answer, or a plain one
  // when the answer carried none.
  function errorText(r, fallback) {
    if (r.status === 0) return "The store did not answer (" + (r.networkError || "network error") + ").";
    if (r.data && r.data.message) return r.data.message;
    if (r.data && r.data.error) return r.data.error;
    return fallback || "The server answered " + r.status + ".";
  }

  return { el, svg, uuid, api, readSSE, store, say, money, errorText };
})();

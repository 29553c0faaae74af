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

  // ---- language ---------------------------------------------------------

  // The pages read in English or in Chinese. The choice is kept per browser;
  // ?lang=zh (or en) in the address picks it for a link and is kept too;
  // without either, the browser's own language decides. The scripts and
  // pages are written in English; zh.json, which the server puts into each
  // page, holds every string's Chinese, and a test fails on a string that
  // has only one of the two. Rung names, scenarios, commands, keys and
  // numbers are never translated.
  const KEY_LANG = "flashsale.lang";
  const lang = (function () {
    const asked = new URLSearchParams(location.search).get("lang");
    if (asked === "en" || asked === "zh") {
      store("local").set(KEY_LANG, asked);
      return asked;
    }
    const kept = store("local").get(KEY_LANG, null);
    if (kept === "en" || kept === "zh") return kept;
    return /^zh\b/i.test(navigator.language || "") ? "zh" : "en";
  })();
  const zh = (function () {
    if (lang !== "zh") return null;
    const data = document.getElementById("zh-strings");
    try {
      return JSON.parse(data ? data.textContent : "");
    } catch (_) {
      return { strings: {}, errors: {} };
    }
  })();

  // t is the page's string for an English one, with {name} filled from
  // params. A string without its Chinese is shown in English and said on the
  // console, where the browser tests see it.
  function t(en, params) {
    let s = en;
    if (zh) {
      s = zh.strings[en];
      if (s === undefined) {
        console.error("no Chinese for: " + en);
        s = en;
      }
    }
    return s.replace(/\{(\w+)\}/g, (m, k) => (params && params[k] !== undefined ? String(params[k]) : m));
  }

  // translatePage puts the page's own words into its language: the text of
  // each element marked data-t and the attributes data-ta names. The other
  // language's name goes on the switch, marked with its own lang.
  function translatePage() {
    document.documentElement.lang = lang === "zh" ? "zh-CN" : "en";
    for (const node of document.querySelectorAll("[data-t]")) {
      node.textContent = t(node.textContent.trim().replace(/\s+/g, " "));
    }
    for (const node of document.querySelectorAll("[data-ta]")) {
      for (const name of node.dataset.ta.split(" ")) {
        if (node.hasAttribute(name)) node.setAttribute(name, t(node.getAttribute(name)));
      }
    }
    const sw = document.getElementById("lang-switch");
    if (!sw) return;
    const to = lang === "zh" ? "en" : "zh";
    sw.textContent = to === "zh" ? "中文" : "English";
    sw.lang = to === "zh" ? "zh-CN" : "en";
    sw.dataset.to = to;
    sw.addEventListener("click", () => {
      store("local").set(KEY_LANG, to);
      const u = new URL(location.href);
      if (u.searchParams.has("lang")) {
        u.searchParams.set("lang", to);
        location.assign(u.href);
      } else location.reload();
    });
  }
  translatePage();

  const moneyFmt = new Intl.NumberFormat(lang === "zh" ? "zh-CN" : "en-US", { style: "currency", currency: "USD" });
  function money(cents) {
    return moneyFmt.format((Number(cents) || 0) / 100);
  }

  // errorText is the server's message for an error answer (in Chinese, the
  // page's own words for its code), or a plain one when it carried none.
  function errorText(r, fallback) {
    if (r.status === 0) return t("The store did not answer ({why}).", { why: zh ? t("network error") : r.networkError || "network error" });
    const code = r.data && r.data.error;
    if (zh && code && zh.errors[code]) return zh.errors[code];
    if (r.data && r.data.message && !zh) return r.data.message;
    if (code) return zh ? t("The server answered {status} ({code}).", { status: r.status, code }) : code;
    return fallback || t("The server answered {status}.", { status: r.status });
  }

  return { el, svg, uuid, api, readSSE, store, say, money, errorText, t, lang };
})();

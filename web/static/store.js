// The storefront: products with live stock, a buy form per product, the seat
// map with click-to-grab, and the orders this browser made. Talks to the
// JSON API of docs/design.md only.
"use strict";

(function () {
  const { el, uuid, api, store, say, money, errorText, t, lang } = window.FS;
  const local = store("local");
  const KEY_USER = "flashsale.user";
  const KEY_VARIANT = "flashsale.variant";
  const KEY_ORDERS = "flashsale.orders";
  const MAX_KEPT = 200;

  const $ = (id) => document.getElementById(id);
  const ui = {
    user: $("user"),
    variant: $("variant"),
    outcome: $("outcome"),
    products: $("products"),
    seatmap: $("seatmap"),
    eventName: $("event-name"),
    orders: $("orders"),
    ordersEmpty: $("orders-empty"),
    forget: $("forget"),
    live: $("live"),
    liveText: $("live-text"),
  };
  const event = new URLSearchParams(location.search).get("event") || "gala";

  // products: sku → {p: product JSON, card parts}; seats: label → seat JSON.
  const products = new Map();
  const seats = new Map();
  let seatOrder = []; // labels in map order, for arrow-key moves
  let focusSeat = null; // the seat that holds the map's single tab stop
  let liveOpen = false;

  // ---- who is shopping --------------------------------------------------

  ui.user.value = local.get(KEY_USER, "");
  ui.variant.value = local.get(KEY_VARIANT, "");
  if (ui.variant.selectedIndex < 0) ui.variant.value = "";
  ui.user.addEventListener("input", () => {
    local.set(KEY_USER, ui.user.value.trim());
    renderSeatStates();
    renderOrders();
  });
  ui.variant.addEventListener("change", () => local.set(KEY_VARIANT, ui.variant.value));
  $("who-form").addEventListener("submit", (e) => e.preventDefault());

  function userName() {
    return ui.user.value.trim();
  }

  // needUser says so and moves focus to the name field when it is empty.
  function needUser() {
    if (userName()) return false;
    say(ui.outcome, "error", t("Bad input: enter your name first, so the order has someone to belong to."));
    ui.user.setAttribute("aria-invalid", "true");
    ui.user.focus();
    return true;
  }
  ui.user.addEventListener("input", () => ui.user.removeAttribute("aria-invalid"));

  function lockHeaders(key) {
    const h = { "Idempotency-Key": key };
    if (ui.variant.value) h["X-Lock-Variant"] = ui.variant.value;
    return h;
  }

  // ---- outcomes ---------------------------------------------------------

  // answer turns a non-201 reply into the message for it. retry repeats the
  // same request with the same Idempotency-Key: 503 and a lost answer mean
  // nothing (or possibly something, for a lost answer) was done, and the
  // key makes a repeat safe either way.
  function answer(r, what, retry) {
    const code = r.data && r.data.error;
    if (r.status === 0) {
      say(ui.outcome, "error", t("No answer from the store for {what}: {why} Retrying is safe.", { what, why: errorText(r) }), { label: t("Retry"), run: retry });
      return;
    }
    if (r.status === 503) {
      const busy = typeof r.retryAfter === "number" ? t("Busy — retry in {s} s.", { s: r.retryAfter }) : t("Busy — retry.");
      say(ui.outcome, "warn", `${busy} ${errorText(r)} (${what})`, { label: t("Retry"), run: retry });
      return;
    }
    if (r.status === 409 && code === "stale_fence") {
      say(ui.outcome, "warn", t("Not done: {why}", { why: errorText(r) }), { label: t("Retry"), run: retry });
      return;
    }
    if (r.status >= 400 && r.status < 500) {
      say(ui.outcome, "error", t("Bad input for {what}: {why}", { what, why: errorText(r) }));
      return;
    }
    say(ui.outcome, "error", t("The store failed on {what}: {why}", { what, why: errorText(r) }), { label: t("Retry"), run: retry });
  }

  // ---- products ---------------------------------------------------------

  // liveStock counts the live stock changes applied. A product list that
  // was requested before one of them may be older than what the page shows,
  // so it is fetched again rather than allowed to overwrite it.
  let liveStock = 0;

  async function loadProducts() {
    const before = liveStock;
    const r = await api("GET", "/api/products");
    if (liveStock !== before && r.status === 200) {
      loadProducts();
      return;
    }
    ui.products.setAttribute("aria-busy", "false");
    if (r.status !== 200 || !Array.isArray(r.data)) {
      ui.products.replaceChildren(el("li", { class: "muted", text: t("Products could not be loaded: {why}", { why: errorText(r) }) }));
      return;
    }
    const seen = new Set(r.data.map((p) => p.sku));
    for (const sku of [...products.keys()]) if (!seen.has(sku)) products.delete(sku);
    const list = [];
    for (const p of r.data) {
      let entry = products.get(p.sku);
      if (!entry) {
        entry = makeCard(p);
        products.set(p.sku, entry);
      }
      entry.p = p;
      renderStock(entry);
      list.push(entry.card);
    }
    if (!list.length) list.push(el("li", { class: "muted", text: t("Nothing is on sale right now.") }));
    // Only when the cards changed: moving a card would drop the keyboard
    // focus inside it.
    const now = [...ui.products.children];
    if (now.length !== list.length || now.some((c, i) => c !== list[i])) ui.products.replaceChildren(...list);
  }

  function makeCard(p) {
    const id = "qty-" + p.sku.replace(/[^A-Za-z0-9_-]/g, "_");
    const entry = { p };
    entry.stock = el("span", { class: "stock-n" });
    entry.stockText = el("p", { class: "stock" });
    entry.meter = el("meter", { min: 0, low: 0.2, high: 0.5, optimum: 1, "aria-hidden": "true" });
    entry.qty = el("input", {
      id, name: "qty", type: "number", inputmode: "numeric", min: 1, max: 10, step: 1, value: 1, required: true,
    });
    entry.buy = el("button", { type: "submit", class: "btn btn-primary", text: t("Buy") });
    entry.name = el("h3", { text: p.name });
    const form = el("form", { class: "buy", novalidate: true, "aria-label": t("Buy {name}", { name: p.name }) },
      el("label", { for: id, text: t("Quantity") }), entry.qty, entry.buy);
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      buy(entry);
    });
    entry.card = el("li", { class: "product", "data-sku": p.sku },
      entry.name,
      el("p", { class: "price", text: money(p.price_cents) }),
      entry.stockText, entry.meter, form);
    return entry;
  }

  function renderStock(entry) {
    const { p } = entry;
    const initial = Math.max(Number(p.initial_stock) || 0, 0);
    const stock = Number(p.stock);
    entry.name.textContent = p.name;
    entry.meter.max = Math.max(initial, 1);
    entry.meter.value = Math.max(stock, 0);
    entry.stock.textContent = String(stock);
    entry.card.dataset.stock = String(stock);
    entry.card.classList.toggle("sold-out", stock <= 0);
    entry.card.classList.toggle("oversold", stock < 0);
    let tail;
    if (stock < 0) tail = t("{stock} — oversold by {n}: the lock let two buyers sell the same units", { n: -stock });
    else if (stock === 0) tail = t("{stock} — sold out");
    else tail = t("{stock} left of {initial}", { initial });
    // The number sits where the language puts it: "100 left of 100",
    // "剩余 100 件，共 100 件".
    const [before, after] = tail.split("{stock}");
    entry.stockText.replaceChildren(before, entry.stock, after);
    entry.buy.disabled = stock <= 0 || entry.busy === true;
    entry.buy.textContent = stock <= 0 ? t("Sold out") : entry.busy ? t("Buying…") : t("Buy");
  }

  function setStock(sku, stock) {
    const entry = products.get(sku);
    if (!entry) {
      loadProducts();
      return;
    }
    liveStock++;
    entry.p = Object.assign({}, entry.p, { stock });
    renderStock(entry);
  }

  async function buy(entry, again) {
    if (needUser()) return;
    const qty = Number(entry.qty.value);
    const max = Number(entry.qty.max) || 10;
    if (!Number.isInteger(qty) || qty < 1 || qty > max) {
      say(ui.outcome, "error", t("Bad input: the quantity must be a whole number from 1 to {max}.", { max }));
      entry.qty.setAttribute("aria-invalid", "true");
      entry.qty.focus();
      return;
    }
    entry.qty.removeAttribute("aria-invalid");
    const req = again || { sku: entry.p.sku, qty, user: userName(), key: uuid() };
    const what = `${req.qty} × ${entry.p.name}`;
    entry.busy = true;
    renderStock(entry);
    say(ui.outcome, "info", t("Buying {what}…", { what }));
    const r = await api("POST", "/api/orders", { sku: req.sku, qty: req.qty, user: req.user }, lockHeaders(req.key));
    entry.busy = false;
    renderStock(entry);
    if (r.status === 201 || r.status === 200) {
      const o = r.data || {};
      const lock = o.lock ? t(", {lock}", { lock: lockText(o) }) : "";
      say(ui.outcome, "ok", t("Bought {what} for {total} (order #{id}{lock}).",
        { what, total: money(o.total_cents ?? entry.p.price_cents * req.qty), id: o.id, lock }));
      remember({
        kind: "order", id: o.id, sku: req.sku, name: entry.p.name, qty: req.qty,
        total_cents: o.total_cents ?? entry.p.price_cents * req.qty, lock: o.lock, fence: o.fence,
        user: req.user, at: o.created_at || new Date().toISOString(), key: req.key,
      });
    } else if (r.status === 409 && r.data && r.data.error === "sold_out") {
      const left = Number(entry.p.stock);
      const detail = left > 0 ? t("only {left} left, fewer than the {qty} you asked for", { left, qty: req.qty })
        : t("{name} is gone", { name: entry.p.name });
      say(ui.outcome, "warn", t("Sold out: {detail}.", { detail }) + " " + errorText(r));
    } else {
      answer(r, what, () => buy(entry, req));
    }
    if (!liveOpen) loadProducts();
  }

  // ---- seats ------------------------------------------------------------

  async function loadSeats() {
    const r = await api("GET", `/api/events/${encodeURIComponent(event)}/seats`);
    if (r.status !== 200 || !r.data || !Array.isArray(r.data.seats)) {
      ui.seatmap.replaceChildren(el("p", { class: "muted", text: t("The seat map could not be loaded: {why}", { why: errorText(r) }) }));
      return;
    }
    ui.eventName.textContent = "— " + (r.data.name || r.data.event || event);
    const labels = r.data.seats.map((s) => s.seat);
    if (labels.length === seatOrder.length && labels.every((l, i) => l === seatOrder[i])) {
      // Same seats: update them in place, so the keyboard focus stays put.
      for (const s of r.data.seats) Object.assign(seats.get(s.seat), { taken: s.taken, user: s.user, bookings: s.bookings });
      renderSeatStates();
      return;
    }
    const focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.seat : null;
    seats.clear();
    for (const s of r.data.seats) seats.set(s.seat, Object.assign({}, s));
    renderSeatMap();
    if (focused && seats.has(focused)) seats.get(focused).button.focus();
  }

  function renderSeatMap() {
    const rows = new Map();
    for (const s of seats.values()) {
      const row = s.row || s.seat.replace(/\d+$/, "");
      if (!rows.has(row)) rows.set(row, []);
      rows.get(row).push(s);
    }
    seatOrder = [];
    const grid = [];
    for (const [row, list] of rows) {
      const buttons = list.map((s) => {
        seatOrder.push(s.seat);
        const b = el("button", { type: "button", class: "seat", "data-seat": s.seat, text: s.seat });
        b.addEventListener("click", () => grab(s.seat));
        s.button = b;
        return b;
      });
      grid.push(el("div", { class: "seat-row" }, el("span", { class: "row-label", "aria-hidden": "true", text: row }), buttons));
    }
    if (!grid.length) grid.push(el("p", { class: "muted", text: t("This event has no seats.") }));
    ui.seatmap.replaceChildren(...grid);
    if (!focusSeat || !seats.has(focusSeat)) focusSeat = seatOrder[0] || null;
    renderSeatStates();
  }

  // mySeats are the seats of this event this browser booked for the user
  // named now: the server tells nobody who holds a seat, so a shopper's own
  // seats are the ones their bookings kept.
  function mySeats() {
    const me = userName();
    return new Set(local.get(KEY_ORDERS, []).filter((o) => o.kind === "seat" && o.event === event && o.user === me).map((o) => o.seat));
  }

  function seatState(s, mine = mySeats()) {
    if (!s.taken) return "free";
    if ((s.bookings || 1) > 1) return "double";
    return mine.has(s.seat) ? "mine" : "taken";
  }

  function renderSeatStates() {
    const mine = mySeats();
    for (const s of seats.values()) {
      if (!s.button) continue;
      const state = seatState(s, mine);
      const b = s.button;
      b.className = "seat seat-" + state;
      b.dataset.state = state;
      b.tabIndex = s.seat === focusSeat ? 0 : -1;
      let label;
      if (state === "free") label = t("Seat {seat}, free", { seat: s.seat });
      else if (state === "mine") label = t("Seat {seat}, yours", { seat: s.seat });
      else if (state === "double") label = t("Seat {seat}, booked {n} times", { seat: s.seat, n: s.bookings });
      else label = s.user ? t("Seat {seat}, taken by {user}", { seat: s.seat, user: s.user }) : t("Seat {seat}, taken", { seat: s.seat });
      b.setAttribute("aria-label", label);
      b.title = label;
    }
  }

  // setSeat marks a seat the stream says was booked. The stream names no
  // one, so a booking of a seat already taken (a double booking, or this
  // browser's own grab answered first) is counted by the seat map itself:
  // one reload for however many such bookings arrive meanwhile.
  let reloadingSeats = false;
  function setSeat(label) {
    const s = seats.get(label);
    if (!s || s.taken) {
      if (reloadingSeats) return;
      reloadingSeats = true;
      loadSeats().finally(() => { reloadingSeats = false; });
      return;
    }
    Object.assign(s, { taken: true, bookings: 1 });
    renderSeatStates();
  }

  // Arrow keys move within the map, one tab stop for the whole map.
  ui.seatmap.addEventListener("keydown", (e) => {
    const b = e.target.closest && e.target.closest("button.seat");
    if (!b) return;
    const i = seatOrder.indexOf(b.dataset.seat);
    const s = seats.get(b.dataset.seat);
    const rowOf = (label) => seats.get(label).row;
    let j = -1;
    switch (e.key) {
      case "ArrowRight": j = Math.min(i + 1, seatOrder.length - 1); break;
      case "ArrowLeft": j = Math.max(i - 1, 0); break;
      case "Home": j = 0; break;
      case "End": j = seatOrder.length - 1; break;
      case "ArrowDown":
      case "ArrowUp": {
        const rows = [...new Set(seatOrder.map(rowOf))];
        const r = rows.indexOf(s.row) + (e.key === "ArrowDown" ? 1 : -1);
        if (r < 0 || r >= rows.length) return;
        const target = seatOrder.filter((l) => rowOf(l) === rows[r]);
        const col = seatOrder.filter((l) => rowOf(l) === s.row).indexOf(s.seat);
        j = seatOrder.indexOf(target[Math.min(col, target.length - 1)]);
        break;
      }
      default:
        return;
    }
    e.preventDefault();
    focusSeat = seatOrder[j];
    renderSeatStates();
    seats.get(focusSeat).button.focus();
  });
  ui.seatmap.addEventListener("focusin", (e) => {
    const b = e.target.closest && e.target.closest("button.seat");
    if (b && focusSeat !== b.dataset.seat) {
      focusSeat = b.dataset.seat;
      renderSeatStates();
    }
  });

  async function grab(label, again) {
    if (needUser()) return;
    const s = seats.get(label);
    if (s && seatState(s) === "mine" && !again) {
      say(ui.outcome, "info", t("Seat {seat} is already yours.", { seat: label }));
      return;
    }
    const req = again || { seat: label, user: userName(), key: uuid() };
    say(ui.outcome, "info", t("Grabbing seat {seat}…", { seat: label }));
    const r = await api("POST", `/api/events/${encodeURIComponent(event)}/seats/${encodeURIComponent(label)}`,
      { user: req.user }, lockHeaders(req.key));
    if (r.status === 201 || r.status === 200) {
      const b = r.data || {};
      const lock = b.lock ? t(" ({lock})", { lock: lockText(b) }) : "";
      say(ui.outcome, "ok", t("Seat {seat} is yours{lock}.", { seat: label, lock }));
      remember({ kind: "seat", id: b.id, event, seat: label, lock: b.lock, fence: b.fence, user: req.user,
        at: b.created_at || new Date().toISOString(), key: req.key });
      if (s) {
        if (!s.taken) Object.assign(s, { taken: true, bookings: 1 });
        renderSeatStates();
      }
    } else if (r.status === 409 && r.data && r.data.error === "seat_taken") {
      say(ui.outcome, "warn", t("Seat taken: {seat} already belongs to someone else — pick another seat.", { seat: label }));
      loadSeats();
    } else {
      answer(r, t("seat {seat}", { seat: label }), () => grab(label, req));
    }
  }

  // ---- my orders --------------------------------------------------------

  // lockText names the lock an order or a seat went through, and its
  // fencing token if it had one: "lock lua+fence fence 1".
  function lockText(o) {
    return t("lock {lock}", { lock: o.lock }) + (o.fence != null ? t(" fence {fence}", { fence: o.fence }) : "");
  }

  function remember(entry) {
    const all = local.get(KEY_ORDERS, []);
    if (entry.key && all.some((o) => o.key === entry.key)) return; // a replayed answer
    all.push(entry);
    local.set(KEY_ORDERS, all.slice(-MAX_KEPT));
    renderOrders();
  }

  function renderOrders() {
    const me = userName();
    const mine = local.get(KEY_ORDERS, []).filter((o) => o.user === me).reverse();
    ui.orders.replaceChildren(...mine.map((o) => {
      const when = new Date(o.at);
      const time = el("time", { datetime: o.at, text: isNaN(when) ? "" : when.toLocaleTimeString(lang === "zh" ? "zh-CN" : "en-US") });
      const lock = o.lock ? el("span", { class: "muted", text: " · " + lockText(o) }) : null;
      if (o.kind === "seat") {
        return el("li", { class: "order" }, time, " " + t("Seat {seat} at {event}", { seat: o.seat, event: o.event }), lock);
      }
      return el("li", { class: "order" }, time, ` ${o.qty} × ${o.name} — ${money(o.total_cents)}`,
        o.id != null ? el("span", { class: "muted", text: " · " + t("order #{id}", { id: o.id }) }) : null, lock);
    }));
    ui.ordersEmpty.hidden = mine.length > 0;
    ui.ordersEmpty.textContent = me ? t("Nothing bought yet under “{me}”.", { me }) : t("Enter your name to see your orders.");
    ui.forget.hidden = mine.length === 0;
  }

  ui.forget.addEventListener("click", () => {
    const me = userName();
    local.set(KEY_ORDERS, local.get(KEY_ORDERS, []).filter((o) => o.user !== me));
    renderOrders();
    renderSeatStates();
    say(ui.outcome, "info", t("This browser forgot your orders (the store still has them)."));
  });
  window.addEventListener("storage", (e) => {
    if (e.key !== KEY_ORDERS) return;
    renderOrders();
    renderSeatStates();
  });

  // ---- live updates -----------------------------------------------------

  function setLive(state, text) {
    ui.live.dataset.state = state;
    ui.liveText.textContent = text;
  }

  function apply(msg) {
    if (!msg || typeof msg !== "object") return;
    switch (msg.type) {
      case "stock":
        if (msg.sku != null && msg.stock != null) setStock(msg.sku, Number(msg.stock));
        break;
      case "seat":
        if (!msg.event || msg.event === event) setSeat(msg.seat);
        break;
      case "reset":
        loadProducts();
        loadSeats();
        break;
    }
  }

  function connect() {
    if (!window.EventSource) {
      setLive("off", t("Live stock: not supported by this browser; reload to refresh."));
      return;
    }
    const es = new EventSource("/api/stream");
    let first = true;
    es.onopen = () => {
      liveOpen = true;
      setLive("open", t("Live stock: on"));
      // Whatever changed while we were away was not streamed to us.
      if (!first) {
        loadProducts();
        loadSeats();
      }
      first = false;
    };
    es.onerror = () => {
      liveOpen = false;
      setLive("reconnecting", t("Live stock: reconnecting…"));
    };
    const handle = (e) => {
      try {
        apply(JSON.parse(e.data));
      } catch (_) {
        /* not ours */
      }
    };
    es.onmessage = handle;
    for (const name of ["stock", "seat", "reset"]) es.addEventListener(name, handle);
  }

  renderOrders();
  loadProducts();
  loadSeats();
  connect();
})();

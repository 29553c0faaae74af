// The workshop: pick a lock variant and a fault, run a flash sale against the
// server's own cluster, watch progress, and read the result as a table row,
// a bar of the chart and a timeline of lock holders, beside the variant's
// source with the lines that differ from the correct variant highlighted.
"use strict";

(function () {
  const { el, svg, api, readSSE, store, say, errorText, t, lang } = window.FS;
  const session = store("session");
  const local = store("local");
  const KEY_TOKEN = "flashsale.adminToken";
  const KEY_FORM = "flashsale.workshop";
  const RUNS = "/api/admin/workshop/runs";

  const $ = (id) => document.getElementById(id);
  const ui = {
    form: $("run-form"),
    variant: $("w-variant"),
    scenario: $("w-scenario"),
    watchdog: $("w-watchdog"),
    fast: $("w-fast"),
    scenarioDoc: $("w-scenario-doc"),
    rate: $("w-rate"),
    duration: $("w-duration"),
    token: $("w-token"),
    run: $("w-run"),
    reset: $("w-reset"),
    progress: $("w-progress"),
    progressLabel: $("w-progress-label"),
    notes: $("w-notes"),
    outcome: $("outcome"),
    runsBody: $("runs-body"),
    metric: $("w-metric"),
    chart: $("chart"),
    timeline: $("timeline"),
    timelineOf: $("timeline-of"),
    timelineSummary: $("timeline-summary"),
    overlaps: $("overlaps"),
    overlapList: $("overlap-list"),
    srcFile: $("src-file"),
    srcCompare: $("src-compare"),
    srcWhy: $("src-why"),
    srcTry: $("src-try"),
    srcScenario: $("src-scenario"),
    srcUse: $("src-use"),
    srcCode: $("src-code"),
    srcRef: $("src-ref"),
    srcRefFile: $("src-ref-file"),
    srcRefCode: $("src-ref-code"),
  };

  const scenarioDocs = {
    "clean": t("Concurrency only: a short critical section and no fault."),
    "crash-between-steps": t("Some acquires are abandoned right after step 1, as by a process dying there."),
    "pause-between-release-steps": t("Some releases pause longer than the TTL between their check and their delete."),
    "pause-in-critical-section": t("Some holders pause longer than the TTL between reading and writing stock."),
    "node-down": t("Mid-run, a minority of the Redis nodes is stopped (never the single-node variants' node)."),
    "node-restart": t("Mid-run, a Redis node restarts without its data while leases hold a bare quorum."),
    "node-restart-unaware": t("As node-restart, with Redlock's restart awareness turned off (Redlock variants only)."),
    "clock-jump": t("Again and again, the clocks of a majority of the nodes jump ahead (every lock key's TTL there cut short): leases expire under their holders."),
    "network-delay": t("Every reply from the nodes to one app instance arrives later than the lease TTL: a grant that comes after its lease ran out."),
    "partition": t("App instance 0 reaches only nodes 0–2, instance 1 only nodes 2–4 (Redlock variants only)."),
    "long-work": t("Every critical section works twice the lease TTL, with no watchdog: every lease runs out under its holder."),
    "long-work-watchdog": t("As long-work, with the lease watchdog on: every lease is extended while its holder works."),
    "pause-after-lease-check": t("Some holders pause longer than the TTL after their last look at the lease, just before writing stock."),
  };

  // runs: newest first; each {id, variant, scenario, rate, duration_s,
  // state, done, total, cell, error}. shown: the run whose timeline is drawn.
  let runs = [];
  let shown = null;
  let running = null;

  // ---- form -------------------------------------------------------------

  const saved = local.get(KEY_FORM, {});
  for (const [k, input] of [["variant", ui.variant], ["scenario", ui.scenario], ["rate", ui.rate], ["duration_s", ui.duration]]) {
    if (saved[k] != null) input.value = saved[k];
  }
  ui.watchdog.checked = saved.watchdog === true;
  ui.fast.checked = saved.fast !== false;
  if (ui.variant.selectedIndex < 0) ui.variant.value = "none";
  if (ui.scenario.selectedIndex < 0) ui.scenario.value = "clean";
  ui.token.value = session.get(KEY_TOKEN, "");

  function saveForm() {
    local.set(KEY_FORM, { variant: ui.variant.value, scenario: ui.scenario.value, rate: ui.rate.value, duration_s: ui.duration.value, watchdog: ui.watchdog.checked, fast: ui.fast.checked });
  }
  ui.form.addEventListener("change", saveForm);
  ui.token.addEventListener("input", () => session.set(KEY_TOKEN, ui.token.value.trim()));
  ui.token.addEventListener("change", () => loadRuns());
  ui.scenario.addEventListener("change", showScenarioDoc);
  ui.variant.addEventListener("change", () => loadSource(ui.variant.value));
  ui.metric.addEventListener("change", renderChart);
  ui.srcUse.addEventListener("click", () => {
    ui.scenario.value = ui.srcScenario.textContent;
    showScenarioDoc();
    saveForm();
    ui.scenario.focus();
  });

  function showScenarioDoc() {
    ui.scenarioDoc.textContent = scenarioDocs[ui.scenario.value] || "";
  }

  function token() {
    return ui.token.value.trim();
  }

  // needToken asks for the admin token before an admin action.
  function needToken() {
    if (token()) return false;
    say(ui.outcome, "error", t("This needs the admin token: enter it first (the server prints it at start-up)."));
    ui.token.setAttribute("aria-invalid", "true");
    ui.token.focus();
    return true;
  }
  ui.token.addEventListener("input", () => ui.token.removeAttribute("aria-invalid"));

  function auth() {
    return { Authorization: "Bearer " + token() };
  }

  // adminError says what went wrong with an admin call, in the page's words
  // for the two answers that mean "fix the token" or "update the server".
  function adminError(r, what) {
    if (r.status === 401 || r.status === 403) {
      ui.token.setAttribute("aria-invalid", "true");
      return t("The admin token was refused ({what}). Check it and try again.", { what });
    }
    if (r.status === 404 && r.data && r.data.error === "not_found") {
      return t("This server has no workshop run API ({what} answered 404).", { what });
    }
    return `${what}: ${errorText(r)}`; // what is already in the page's language
  }

  function readNumber(input, label) {
    const v = Number(input.value);
    const min = Number(input.min);
    const max = Number(input.max);
    if (!Number.isInteger(v) || v < min || v > max) {
      say(ui.outcome, "error", t("Bad input: {label} must be a whole number from {min} to {max}.", { label, min, max }));
      input.setAttribute("aria-invalid", "true");
      input.focus();
      return null;
    }
    input.removeAttribute("aria-invalid");
    return v;
  }

  ui.form.addEventListener("submit", async (e) => {
    e.preventDefault();
    if (running) {
      say(ui.outcome, "warn", t("A run is in progress; wait for its result."));
      return;
    }
    const rate = readNumber(ui.rate, t("the rate"));
    if (rate === null) return;
    const duration = readNumber(ui.duration, t("the duration"));
    if (duration === null) return;
    if (needToken()) return;
    const body = { variant: ui.variant.value, scenario: ui.scenario.value, rate, duration_s: duration, watchdog: ui.watchdog.checked, fast: ui.fast.checked };
    setRunning(true);
    ui.notes.replaceChildren();
    setProgress(0, 1, t("Starting {variant} under {scenario}…", body));
    const r = await api("POST", RUNS, body, auth());
    if (r.status !== 202 && r.status !== 201 && r.status !== 200) {
      setRunning(false);
      setProgress(0, 1, t("Not started."));
      say(ui.outcome, "error", t("The run did not start.") + " " + adminError(r, t("starting the run")));
      return;
    }
    const run = Object.assign({}, body, r.data || {}, { state: "running", done: 0, total: 0 });
    if (run.id == null) run.id = "?";
    runs = [run].concat(runs.filter((x) => String(x.id) !== String(run.id)));
    shown = run;
    renderRuns();
    say(ui.outcome, "info", t("Run {id} started: {variant} under {scenario}", { id: run.id, variant: body.variant, scenario: body.scenario }) +
      (body.watchdog ? t(" with the lease watchdog on") : "") + (body.fast ? "" : t(", speed layer off")) +
      t(", {rate} req/s for {duration} s.", { rate, duration }));
    await follow(run);
    setRunning(false);
  });
  // The page ships its Run button disabled, so nothing submits the form
  // before this listener holds it (the token field has no name either: it
  // is never part of a submitted form).
  ui.run.disabled = false;

  function setRunning(on) {
    running = on;
    ui.run.disabled = on;
    ui.run.textContent = on ? t("Running…") : t("Run");
    ui.run.setAttribute("aria-busy", on ? "true" : "false");
  }

  function setProgress(done, total, text) {
    ui.progress.max = Math.max(total, 1);
    ui.progress.value = Math.min(done, Math.max(total, 1));
    ui.progressLabel.textContent = text;
  }

  // follow reads the run's event stream until its result. If the stream
  // breaks first, the run's record is fetched instead.
  async function follow(run) {
    let res;
    try {
      res = await fetch(`${RUNS}/${encodeURIComponent(run.id)}/stream`, {
        headers: Object.assign({ Accept: "text/event-stream" }, auth()),
        cache: "no-store",
      });
    } catch (err) {
      res = null;
    }
    if (res && res.ok && res.body) {
      try {
        await readSSE(res, (msg) => onRunEvent(run, msg));
      } catch (_) {
        /* the stream broke; fall through to the record */
      }
    }
    if (run.state === "running") {
      const r = await api("GET", `${RUNS}/${encodeURIComponent(run.id)}`, undefined, auth());
      if (r.status === 200 && r.data) absorb(run, r.data);
      if (run.state === "running") {
        run.state = "lost";
        run.error = t("The progress stream ended before the result; reload to see the run when it finishes.");
        say(ui.outcome, "warn", run.error);
      }
      renderRuns();
    }
  }

  function onRunEvent(run, msg) {
    switch (msg.type) {
      case "progress":
        run.done = Number(msg.done) || 0;
        run.total = Number(msg.total) || 0;
        setProgress(run.done, run.total, t("Run {id}: {done} of {total} requests", { id: run.id, done: run.done, total: run.total || "?" }));
        renderRunRow(run);
        break;
      case "note":
        ui.notes.append(note(msg));
        break;
      case "result":
        absorb(run, { state: "done", cell: msg.cell });
        setProgress(1, 1, t("Run {id} finished.", { id: run.id }));
        announceResult(run);
        renderRuns();
        break;
      case "error":
        run.state = "failed";
        run.error = msg.message || msg.error || t("the run failed");
        setProgress(0, 1, t("Run {id} failed.", { id: run.id }));
        say(ui.outcome, "error", t("Run {id} failed: {why}", { id: run.id, why: run.error }));
        renderRuns();
        break;
    }
  }

  // absorb takes a run record (or a bare cell) from the server into run.
  function absorb(run, rec) {
    if (rec.cell || rec.state) {
      if (rec.state) run.state = rec.state === "running" ? "running" : rec.state;
      if (rec.cell) {
        run.cell = rec.cell;
        run.state = "done";
      }
      if (rec.error) {
        run.error = rec.error;
        if (!rec.cell) run.state = "failed";
      }
    } else if (rec.expected || rec.seen) {
      run.cell = rec;
      run.state = "done";
    }
  }

  function announceResult(run) {
    const c = run.cell || {};
    const p = { id: run.id, variant: c.variant || run.variant, scenario: c.scenario || run.scenario, expected: verdictWord(c.expected) };
    let text = c.seen === "breaks" ? t("Run {id}: {variant} broke under {scenario}", p) : t("Run {id}: {variant} held under {scenario}", p);
    text += c.ok === false ? t(", which is NOT what the matrix expects ({expected}).", p) : t(", as expected.");
    const facts = [];
    if (c.oversold_units) facts.push(t("{n} units oversold", { n: c.oversold_units }));
    if (c.lost_updates) facts.push(t("{n} lost updates", { n: c.lost_updates }));
    if (c.double_booked_seats) facts.push(t("{n} seats double-booked", { n: c.double_booked_seats }));
    if (c.stuck_locks) facts.push(t("{n} stuck locks", { n: c.stuck_locks }));
    say(ui.outcome, c.seen === "breaks" ? "warn" : "ok", text + (facts.length ? " " + facts.join(t(", ")) + t(".") : ""));
  }

  ui.reset.addEventListener("click", async () => {
    if (needToken()) return;
    const r = await api("POST", "/api/admin/reset", undefined, auth());
    if (r.status >= 200 && r.status < 300) say(ui.outcome, "ok", t("The sale was reset: stock restored, orders, bookings and locks cleared."));
    else say(ui.outcome, "error", t("Not reset.") + " " + adminError(r, t("resetting the sale")));
  });

  async function loadRuns() {
    if (!token()) return;
    const r = await api("GET", RUNS, undefined, auth());
    if (r.status !== 200) {
      say(ui.outcome, "error", t("Earlier runs could not be loaded.") + " " + adminError(r, t("listing runs")));
      return;
    }
    const list = Array.isArray(r.data) ? r.data : (r.data && r.data.runs) || [];
    const fresh = list.filter((rec) => rec.kind !== "sequence").map((rec, i) => {
      const run = {
        id: rec.id ?? (rec.cell && rec.cell.id) ?? `earlier-${i + 1}`,
        variant: rec.variant ?? (rec.cell && rec.cell.variant),
        scenario: rec.scenario ?? (rec.cell && rec.cell.scenario),
        rate: rec.rate, duration_s: rec.duration_s, started_at: rec.started_at, watchdog: rec.watchdog === true, fast: rec.fast !== false,
        state: "running", done: 0, total: 0,
      };
      absorb(run, rec);
      return run;
    });
    // Keep the run this page is following; take everything else from the server.
    const following = runs.filter((x) => x.state === "running" && running);
    const ids = new Set(following.map((x) => String(x.id)));
    runs = following.concat(fresh.filter((x) => !ids.has(String(x.id))));
    runs.sort((a, b) => newer(b, a));
    if (!shown || !runs.includes(shown)) shown = runs.find((x) => x.cell) || null;
    renderRuns();
  }

  // newer orders runs by start time, else by numeric id.
  function newer(a, b) {
    const ta = Date.parse(a.started_at || "");
    const tb = Date.parse(b.started_at || "");
    if (!isNaN(ta) && !isNaN(tb) && ta !== tb) return ta - tb;
    const na = Number(a.id);
    const nb = Number(b.id);
    if (!isNaN(na) && !isNaN(nb)) return na - nb;
    return 0;
  }

  // ---- results table ----------------------------------------------------

  const dash = "—";
  const num = (v, digits) => (v === undefined || v === null || v === "" ? dash
    : typeof v === "number" && digits !== undefined ? v.toFixed(digits) : String(v));

  // verdictWord is an outcome ("holds", "breaks", "either") in the page's
  // language; the cell keeps the value itself in data-verdict.
  function verdictWord(v) {
    switch (v) {
      case "holds": return t("holds");
      case "breaks": return t("breaks");
      case "either": return t("either");
      default: return v || dash;
    }
  }

  // stateWord is a run's or a step's state in the page's language.
  function stateWord(s) {
    switch (s) {
      case "lost": return t("lost");
      case "failed": return t("failed");
      case "skipped": return t("skipped");
      default: return s || dash;
    }
  }

  // serverText is words the runner wrote (its notes, why a step was
  // skipped): shown as they came, in English, marked so for the reader's
  // screen reader; the page's own words around them are translated.
  function serverText(text) {
    return el("span", { lang: "en", class: "server-text", text: text || "" });
  }

  // note is one line of the runner's notes. The server sends the line as
  // the terminal prints it and, beside it, its event and fields: in Chinese
  // the page says a line it knows from those fields; a line it does not
  // know, and every line in English, reads as the terminal prints it.
  function note(msg) {
    const said = lang === "zh" && noteWords[msg.event || ""];
    return el("li", {}, ...(said ? [].concat(said(msg.fields || {})) : [serverText(msg.message)]));
  }
  const outcomeWord = (o) => (o === "breaks" || o === "holds" ? t(o) : o);
  const noteWords = {
    "cell done": (f) => {
      const figures = [
        f.oversold_units > 0 ? t("; oversold {n} units", { n: f.oversold_units }) : "",
        f.lost_updates > 0 ? t("; {n} lost updates", { n: f.lost_updates }) : "",
        f.double_booked_seats > 0 ? "；" + t("{n} seats double-booked", { n: f.double_booked_seats }) : "",
        f.stuck_locks > 0 ? t("; {n} stuck locks (no TTL)", { n: f.stuck_locks }) : "",
      ].join("");
      const line = t("{variant} × {scenario} done: expected {expected}, seen {seen}, verdict {verdict}", {
        variant: f.variant, scenario: f.scenario, expected: outcomeWord(f.expected), seen: outcomeWord(f.seen), verdict: f.verdict,
      }) + figures;
      // A reason that is no count (the cross-check, a request never
      // answered) is shown as the runner wrote it.
      return figures || !f.reasons ? line : [line + t("; reasons: "), serverText(f.reasons)];
    },
    "node fault": (f) => [t("Node fault: "), serverText(f.step)],
    "localredis: node started": (f) => t("Redis node {node} started at {addr} (pid {pid})", f),
    "localredis: node stopped": (f) => t("Redis node {node} stopped (pid {pid})", f),
    "localredis: node killed": (f) => t("Redis node {node} killed (pid {pid})", f),
    "localredis: node ignored SIGTERM, killing": (f) => t("Redis node {node} ignored SIGTERM and was killed (pid {pid})", f),
    "localredis: in-process node started": (f) => t("In-process Redis node {node} started at {addr}", f),
    "localredis: in-process node stopped": (f) => t("In-process Redis node {node} stopped", f),
    "building the storefront": (f) => t("Building the storefront ({bin})", f),
    "app instance ready": (f) => t("App instance {instance} ready at {url} (pid {pid}, lease TTL {lock_ttl})", f),
    "every cell resets the sale on the targets and sets their fault plan; the last cell leaves its sale and an empty plan behind":
      (f) => t("Every cell resets the sale on {targets} and sets its fault plan; the last cell leaves its sale and an empty plan behind.", f),
    "stopping the local environment": (f) => [t("Stopping the local environment failed: "), serverText(f.err)],
    "starting the sequence's own environment: 5 Redis nodes and 3 app instances":
      () => t("starting the sequence's own environment: 5 Redis nodes and 3 app instances"),
    "node scenarios skipped": (f) => t("Node scenarios are skipped: this instance did not start its own redis-server nodes, and the sequence stops and restarts nodes only where it may start its own.") +
      (f.lease_ttl ? " " + t("The other steps run against this instance, whose lease TTL ({lease_ttl}) is longer than the {sized_for} they are sized for: each lasts longer in proportion, and a rung may still not show its flaw.", f) : ""),
  };

  function outcomeCell(value) {
    if (!value) return el("td", { text: dash });
    return el("td", { class: "verdict verdict-" + value }, el("span", { "data-verdict": value, text: verdictWord(value) }));
  }

  // seenCell is a done cell's outcome and, when the history its shoppers
  // saw is not linearizable, a link to porcupine's picture of it, carried in
  // the run's record. It is a download: the picture runs its own script,
  // which this page's policy would not let a page made here run.
  function seenCell(c) {
    const td = outcomeCell(c.seen);
    if (c.linearizable === false && c.history_html) {
      c.historyURL = c.historyURL || URL.createObjectURL(new Blob([c.history_html], { type: "text/html" }));
      const url = c.historyURL;
      td.append(" ", el("a", { class: "history-link", href: url, download: `history-${c.variant}-${c.scenario}.html`,
        title: t("porcupine's picture of the history the shoppers saw: no order of its operations tells a story one shop counter could have told"),
        text: t("not linearizable: picture") }));
    }
    return td;
  }

  // auditCells are a cell's sold / initial and the audit's figures, a
  // figure above 0 marked bad; dashes before the cell is in.
  function auditCells(c) {
    const bad = (v) => el("td", { class: "num" + (Number(v) > 0 ? " bad" : ""), text: c ? num(v ?? 0) : dash });
    return [
      el("td", { class: "num", text: c ? `${num(c.sold)} / ${num(c.initial)}` : dash }),
      bad(c && c.oversold_units),
      bad(c && c.lost_updates),
      bad(c && c.double_booked_seats),
      bad(c && c.stuck_locks),
    ];
  }

  function runRow(run) {
    const c = run.cell;
    const tr = el("tr", { "data-run": run.id, "data-state": run.state });
    if (c && c.ok === false) tr.classList.add("mismatch");
    if (shown === run) tr.classList.add("shown");
    const pick = el("button", {
      type: "button", class: "btn btn-small run-pick", text: String(run.id),
      "aria-label": t("Run {id}: show its lock timeline", { id: run.id }), "aria-pressed": shown === run ? "true" : "false",
    });
    pick.addEventListener("click", () => {
      shown = run;
      renderRuns();
    });
    const codes = (c && c.codes) || {};
    const load = run.rate && run.duration_s ? `${run.rate}/s × ${run.duration_s}s` : dash;
    let seen;
    if (c) seen = seenCell(c);
    else if (run.state === "running") {
      const pct = run.total ? Math.round((100 * run.done) / run.total) : 0;
      seen = el("td", { class: "pending", text: t("running {pct}%", { pct }) });
    } else seen = el("td", { class: "failed", text: run.error ? t("failed: {why}", { why: run.error }) : stateWord(run.state) });
    tr.append(
      el("th", { scope: "row" }, pick),
      el("td", { text: (c && c.variant) || run.variant || dash }),
      el("td", { text: ((c && c.scenario) || run.scenario || dash) + (run.watchdog ? t(" (watchdog on)") : "") + (run.fast === false ? t(" (speed layer off)") : "") }),
      el("td", { class: "num", text: load }),
      outcomeCell(c && c.expected),
      seen,
      ...auditCells(c),
      el("td", { class: "num", text: c ? num(codes["201"] ?? 0) : dash }),
      el("td", { class: "num", text: c ? num(codes["409"] ?? 0) : dash }),
      el("td", { class: "num", text: c ? num(codes["503"] ?? 0) : dash }),
      el("td", { class: "num", text: c ? num(codes.other ?? 0) : dash }),
      el("td", { class: "num", text: c ? num(c.throughput, 1) : dash }),
      el("td", { class: "num", text: c ? num(c.p50_ms, 1) : dash }),
      el("td", { class: "num", text: c ? num(c.p99_ms, 1) : dash }),
    );
    return tr;
  }

  function renderRunRow(run) {
    const old = ui.runsBody.querySelector(`tr[data-run="${CSS.escape(String(run.id))}"]`);
    if (old) old.replaceWith(runRow(run));
    else renderRuns();
  }

  function renderRuns() {
    if (!runs.length) {
      ui.runsBody.replaceChildren(el("tr", { class: "empty" },
        el("td", { colspan: 18, text: token() ? t("No runs yet.") : t("No runs yet. Enter the admin token to see earlier runs.") })));
    } else {
      ui.runsBody.replaceChildren(...runs.map(runRow));
    }
    renderChart();
    renderTimeline();
  }

  // ---- chart ------------------------------------------------------------

  function renderChart() {
    const metric = ui.metric.value;
    const label = ui.metric.selectedOptions[0].textContent;
    const done = runs.filter((r) => r.cell).slice(0, 12);
    if (!done.length) {
      ui.chart.replaceChildren(el("p", { class: "muted", text: t("Results appear here as runs finish.") }));
      return;
    }
    // Drawn at the box's own width, so the text stays readable on a phone;
    // there the labels go above the bars instead of beside them.
    const W = Math.max(280, Math.round(ui.chart.clientWidth || 640));
    const narrow = W < 520;
    const labelW = narrow ? 0 : Math.min(260, Math.round(W * 0.42));
    const right = 50;
    const barH = 16;
    const labelH = narrow ? 15 : 0;
    const rowH = labelH + barH + 8;
    const top = 4;
    const H = top + done.length * rowH + 18;
    const values = done.map((r) => Number(r.cell[metric]) || 0);
    const peak = Math.max(...values, 1);
    const scale = (W - labelW - right) / peak;
    const root = svg("svg", {
      viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: "bar-chart", role: "img",
      "aria-label": t("{label} per run: ", { label }) + done.map((r, i) => t("run {id} {variant} {scenario} {value}",
        { id: r.id, variant: r.cell.variant, scenario: r.cell.scenario, value: values[i] })).join(t("; ")),
    });
    done.forEach((r, i) => {
      const y = top + i * rowH + labelH;
      const v = values[i];
      const seen = r.cell.seen === "breaks" ? "breaks" : "holds";
      const g = svg("g", { class: "bar bar-" + seen + (r.cell.ok === false ? " bar-mismatch" : "") + (r === shown ? " bar-shown" : "") });
      const name = `${r.id} · ${r.cell.variant} · ${r.cell.scenario}`;
      g.append(
        svg("title", {}, t("Run {id}: {variant} / {scenario} — {label} {value} ({seen}, expected {expected})",
          { id: r.id, variant: r.cell.variant, scenario: r.cell.scenario, label, value: v, seen: verdictWord(seen), expected: verdictWord(r.cell.expected) })),
        narrow
          ? svg("text", { x: 0, y: y - 3, class: "bar-label" }, name)
          : svg("text", { x: labelW - 8, y: y + barH - 4, "text-anchor": "end", class: "bar-label" }, name),
        svg("rect", { x: labelW, y, width: Math.max(v * scale, v > 0 ? 2 : 0.5), height: barH, rx: 2 }),
        svg("text", { x: labelW + v * scale + 6, y: y + barH - 4, class: "bar-value" }, formatValue(v)),
      );
      root.append(g);
    });
    const axisY = H - 14;
    root.append(
      svg("line", { x1: labelW, y1: axisY, x2: W - right, y2: axisY, class: "axis" }),
      svg("text", { x: labelW, y: H - 2, class: "tick" }, "0"),
      svg("text", { x: W - right, y: H - 2, "text-anchor": "end", class: "tick" }, formatValue(peak)),
    );
    ui.chart.replaceChildren(root);
  }

  function formatValue(v) {
    return Number.isInteger(v) ? String(v) : v.toFixed(1);
  }

  // ---- lock holder timeline ---------------------------------------------

  // holders sorts the timeline, assigns lanes greedily (a holder takes the
  // first lane free at its start) and finds the overlaps: for a correct lock
  // everything lands in lane 0.
  function holders(timeline, end) {
    const hs = timeline
      .map((h) => ({
        owner: String(h.owner ?? ""), token: h.token, from: Number(h.from_ms) || 0,
        to: h.to_ms === null || h.to_ms === undefined ? null : Number(h.to_ms),
      }))
      .sort((a, b) => a.from - b.from);
    const laneEnds = [];
    const overlaps = [];
    const active = [];
    for (const h of hs) {
      const to = h.to === null ? end : h.to;
      let lane = laneEnds.findIndex((e) => e <= h.from);
      if (lane < 0) {
        lane = laneEnds.length;
        laneEnds.push(to);
      } else laneEnds[lane] = to;
      h.lane = lane;
      for (let i = active.length - 1; i >= 0; i--) {
        const a = active[i];
        const aTo = a.to === null ? end : a.to;
        if (aTo <= h.from) {
          active.splice(i, 1);
          continue;
        }
        overlaps.push({ from: h.from, to: Math.min(aTo, to), a, b: h });
      }
      active.push(h);
    }
    return { hs, lanes: laneEnds.length, overlaps };
  }

  // merge joins overlapping spans, for drawing one band per stretch.
  function merge(spans) {
    const out = [];
    for (const s of [...spans].sort((a, b) => a.from - b.from)) {
      const last = out[out.length - 1];
      if (last && s.from <= last.to) last.to = Math.max(last.to, s.to);
      else out.push({ from: s.from, to: s.to });
    }
    return out;
  }

  function renderTimeline() {
    const run = shown && shown.cell ? shown : runs.find((r) => r.cell);
    ui.overlaps.hidden = true;
    if (!run) {
      ui.timelineOf.textContent = "";
      ui.timeline.replaceChildren(el("p", { class: "muted", text: t("Run something to see who held the lock.") }));
      ui.timelineSummary.textContent = "";
      return;
    }
    const c = run.cell;
    ui.timelineOf.textContent = t("— run {id}, {variant} under {scenario}", { id: run.id, variant: c.variant, scenario: c.scenario }) +
      (c.timeline_key ? ` (${c.timeline_key})` : "");
    const tl = Array.isArray(c.timeline) ? c.timeline : [];
    if (!tl.length) {
      ui.timeline.replaceChildren(el("p", { class: "muted", text: t("This result has no timeline of lock holders.") }));
      ui.timelineSummary.textContent = "";
      return;
    }
    let end = (Number(run.duration_s) || 0) * 1000;
    for (const h of tl) end = Math.max(end, Number(h.to_ms) || 0, Number(h.from_ms) || 0);
    end = Math.max(end, 1);
    const { hs, lanes, overlaps } = holders(tl, end);
    const bands = merge(overlaps);
    const shownLanes = Math.min(lanes, 8);
    const W = Math.max(280, Math.round(ui.timeline.clientWidth || 1000)); // the box's own width: readable text
    const left = 50;
    const laneH = 20;
    const top = 6;
    const plotH = shownLanes * laneH;
    const H = top + plotH + 28;
    const x = (ms) => left + ((W - left - 24) * ms) / end;
    const root = svg("svg", {
      viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: "timeline-svg", role: "img",
      "aria-label": t("Lock holders over {ms} ms: {holds} holds in {lanes} lanes, {overlaps} overlaps.",
        { ms: Math.round(end), holds: hs.length, lanes, overlaps: overlaps.length }),
    });
    for (let i = 0; i < shownLanes; i++) {
      const y = top + i * laneH;
      root.append(
        svg("rect", { x: left, y, width: W - left - 24, height: laneH, class: i % 2 ? "lane lane-odd" : "lane" }),
        svg("text", { x: left - 6, y: y + laneH - 6, "text-anchor": "end", class: "tick" },
          i === 7 && lanes > 8 ? `${i + 1}+` : t("lane {n}", { n: i + 1 })),
      );
    }
    for (const b of bands) {
      root.append(svg("rect", {
        x: x(b.from), y: top, width: Math.max(x(b.to) - x(b.from), 2), height: plotH, class: "overlap-band",
      }, svg("title", {}, t("two holders at once: {from}–{to} ms", { from: Math.round(b.from), to: Math.round(b.to) }))));
    }
    for (const h of hs) {
      const lane = Math.min(h.lane, 7);
      const to = h.to === null ? end : h.to;
      const y = top + lane * laneH + 3;
      const cls = "hold" + (h.lane > 0 ? " hold-second" : "") + (h.to === null ? " hold-stuck" : "");
      const tok = h.token !== undefined && h.token !== null && h.token !== "" ? t(", token {token}", { token: h.token }) : "";
      root.append(svg("rect", {
        x: x(h.from), y, width: Math.max(x(to) - x(h.from), 1.5), height: laneH - 6, rx: 2, class: cls,
      }, svg("title", {}, `${h.owner}${tok}: ${Math.round(h.from)}–${h.to === null ? t("never released") : Math.round(to) + " ms"}`)));
    }
    // time axis with about six ticks at round numbers
    const axisY = top + plotH + 4;
    root.append(svg("line", { x1: left, y1: axisY, x2: W - 24, y2: axisY, class: "axis" }));
    const step = niceStep(end / Math.max(2, Math.floor(W / 120)));
    for (let t = 0; t <= end + 1e-9; t += step) {
      root.append(
        svg("line", { x1: x(t), y1: axisY, x2: x(t), y2: axisY + 4, class: "axis" }),
        svg("text", { x: x(t), y: axisY + 16, "text-anchor": "middle", class: "tick" }, t >= 1000 ? `${(t / 1000).toFixed(step >= 1000 ? 0 : 1)} s` : `${Math.round(t)} ms`),
      );
    }
    ui.timeline.replaceChildren(root);

    const stuck = hs.filter((h) => h.to === null).length;
    const longest = overlaps.reduce((m, o) => Math.max(m, o.to - o.from), 0);
    let text = t("{holds} holds of the lock in {s} s.", { holds: hs.length, s: (end / 1000).toFixed(1) }) + " ";
    const o = { n: overlaps.length, longest: Math.round(longest) };
    if (!overlaps.length) text += t("Never two holders at once.");
    else if (overlaps.length === 1) text += t("Once two holders held it at once ({longest} ms).", o);
    else text += t("{n} times two holders held it at once (longest {longest} ms).", o);
    if (stuck) text += " " + t("{n} never released.", { n: stuck });
    ui.timelineSummary.textContent = text;
    ui.timelineSummary.className = "timeline-summary " + (overlaps.length || stuck ? "bad" : "good");
    if (overlaps.length) {
      ui.overlapList.replaceChildren(...overlaps.slice(0, 50).map((o) => el("li", {
        text: t("{from}–{to} ms: {a} and {b}", {
          from: Math.round(o.from), to: Math.round(o.to),
          a: o.a.owner + (o.a.token != null ? t(" (token {token})", { token: o.a.token }) : ""),
          b: o.b.owner + (o.b.token != null ? t(" (token {token})", { token: o.b.token }) : ""),
        }),
      })));
      ui.overlaps.hidden = false;
    }
  }

  function niceStep(raw) {
    const p = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1e-9))));
    for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
    return 10 * p;
  }

  // ---- variant source ---------------------------------------------------

  function renderCode(pre, text, differs) {
    const marked = new Set(differs || []);
    const lines = text.replace(/\n$/, "").split("\n");
    const code = el("code");
    lines.forEach((line, i) => {
      const n = i + 1;
      let cls = "line";
      if (marked.has(n)) cls += /^\s*\/\//.test(line) ? " diff diff-comment" : " diff";
      code.append(el("span", { class: cls, "data-n": n },
        el("span", { class: "ln", "aria-hidden": "true", text: String(n) }),
        line + "\n"));
    });
    pre.replaceChildren(code);
  }

  let sourceReq = 0;
  async function loadSource(variant) {
    const mine = ++sourceReq;
    ui.srcFile.textContent = variant;
    const r = await api("GET", `/workshop/source/${encodeURIComponent(variant)}?lang=${lang}`);
    if (mine !== sourceReq) return; // a later pick won
    if (r.status !== 200 || !r.data) {
      ui.srcCompare.textContent = "";
      ui.srcWhy.textContent = t("The source of this variant is not available: {why}", { why: errorText(r) });
      ui.srcCode.replaceChildren();
      ui.srcTry.hidden = true;
      ui.srcRef.hidden = true;
      return;
    }
    const s = r.data;
    ui.srcFile.textContent = `${s.file} (${s.variant})`;
    const n = (s.differs || []).length;
    ui.srcCompare.textContent = s.file === s.reference
      ? (s.file.startsWith("inventory/")
        ? t("This variant takes no lock: this is the store's own code that guards the sale instead.")
        : s.reference === "redlock.go" ? t("This is the correct multi-node variant's own file.") : t("This is the correct single-node variant's own file."))
      : n === 1 ? t("Compared with {file}: 1 highlighted line differs (comments in a lighter shade).", { file: s.reference })
        : t("Compared with {file}: {n} highlighted lines differ (comments in a lighter shade).", { file: s.reference, n });
    ui.srcWhy.textContent = s.why || "";
    ui.srcScenario.textContent = s.shows_with || "";
    ui.srcTry.hidden = !s.shows_with;
    renderCode(ui.srcCode, s.source || "", s.differs);
    if (s.file !== s.reference) {
      ui.srcRefFile.textContent = s.reference;
      renderCode(ui.srcRefCode, s.reference_source || "", s.reference_differs);
      ui.srcRef.hidden = false;
    } else ui.srcRef.hidden = true;
  }

  // Charts are drawn at their box's width: redraw when it changes.
  let lastWidth = 0;
  new ResizeObserver(() => {
    const w = ui.chart.clientWidth;
    if (w && Math.abs(w - lastWidth) > 4) {
      lastWidth = w;
      renderChart();
      renderTimeline();
    }
  }).observe(ui.chart);

  // ---- the whole ladder -------------------------------------------------

  // The labs' sequence, served by the server (one list in Go): a table row
  // per step, filled in from the run's step events as each cell ends. A
  // ?only=variant/scenario,… in the page's address runs just those steps.
  const SEQUENCE = "/api/admin/workshop/sequence";
  const ladder = { button: $("w-ladder"), nodes: $("w-ladder-nodes"), body: $("ladder-body") };
  const only = (new URLSearchParams(location.search).get("only") || "").split(",").filter(Boolean);
  let steps = [];

  async function loadSequence() {
    if (!token()) return false;
    const r = await api("GET", SEQUENCE, undefined, auth());
    if (r.status !== 200 || !r.data) {
      ladder.body.replaceChildren(el("tr", { class: "empty" },
        el("td", { colspan: 11, text: t("The sequence could not be loaded.") + " " + adminError(r, t("loading the sequence")) })));
      return false;
    }
    steps = (r.data.steps || []).filter((s) => !only.length || only.includes(`${s.variant}/${s.scenario}`));
    ladder.nodes.replaceChildren(r.data.node_scenarios
      ? t("Node scenarios run too: the sequence starts Redis nodes and app instances of its own.")
      : t("Node scenarios cannot run here and are skipped:") + " ",
    r.data.node_scenarios ? "" : serverText(r.data.why_no_nodes || t("this instance did not start its own Redis nodes")));
    ladder.nodes.className = r.data.node_scenarios ? "hint" : "hint warn";
    renderLadder();
    return true;
  }

  function ladderRow(s, i) {
    const c = s.cell;
    const tr = el("tr", { "data-step": i, "data-state": s.state || "waiting" });
    if (c && c.ok === false) tr.classList.add("mismatch");
    let seen;
    if (c) seen = seenCell(c);
    else if (s.state === "running") seen = el("td", { class: "pending", text: t("running…") });
    else if (s.state === "skipped" || s.state === "failed") seen = el("td", { class: "failed" }, stateWord(s.state) + t(": "), serverText(s.error || ""));
    else seen = el("td", { class: "muted", text: s.nodes && steps.length ? t("waiting (node scenario)") : t("waiting") });
    tr.append(
      el("th", { scope: "row", text: String(i + 1) }),
      el("td", { text: s.variant }),
      el("td", { text: s.scenario }),
      el("td", { class: "num", text: `${s.rate}/s × ${(s.duration_ms / 1000).toFixed(1)}s` }),
      outcomeCell(s.expected),
      seen,
      ...auditCells(c),
    );
    return tr;
  }

  function renderLadder() {
    if (!steps.length) {
      ladder.body.replaceChildren(el("tr", { class: "empty" }, el("td", { colspan: 11, text: t("The sequence has no steps.") })));
      return;
    }
    ladder.body.replaceChildren(...steps.map(ladderRow));
  }

  function onStep(i, step) {
    if (!steps[i]) return;
    steps[i] = step;
    const old = ladder.body.querySelector(`tr[data-step="${i}"]`);
    if (old) old.replaceWith(ladderRow(step, i));
    if (step.state === "running") {
      setProgress(i, steps.length, t("Ladder: {variant} under {scenario} ({n} of {of})", { variant: step.variant, scenario: step.scenario, n: i + 1, of: steps.length }));
    }
  }

  ladder.button.addEventListener("click", async () => {
    if (running) {
      say(ui.outcome, "warn", t("A run is in progress; wait for its result."));
      return;
    }
    if (needToken()) return;
    if (!(await loadSequence())) return;
    setRunning(true);
    ladder.button.disabled = true;
    ui.notes.replaceChildren();
    const r = await api("POST", SEQUENCE, only.length ? { only } : {}, auth());
    if (r.status !== 202 || !r.data || r.data.id == null) {
      setRunning(false);
      ladder.button.disabled = false;
      say(ui.outcome, "error", t("The ladder did not start.") + " " + adminError(r, t("starting the ladder")));
      return;
    }
    const id = r.data.id;
    say(ui.outcome, "info", t("The ladder started (run {id}): {n} cells, one at a time.", { id, n: steps.length }));
    let ended = false;
    const onEvent = (msg) => {
      switch (msg.type) {
        case "step":
          onStep(Number(msg.index), msg.step);
          break;
        case "note":
          ui.notes.append(note(msg));
          break;
        case "result": {
          ended = true;
          (msg.steps || []).forEach((s, i) => onStep(i, s));
          const off = steps.filter((s) => s.cell && s.cell.ok === false).length;
          const done = steps.filter((s) => s.cell).length;
          setProgress(1, 1, t("The ladder finished."));
          say(ui.outcome, off ? "warn" : "ok", t("The ladder finished: {done} of {n} cells ran, ", { done, n: steps.length }) +
            (off ? t("{off} did NOT do what the matrix expects.", { off }) : t("every one as the matrix expects.")));
          break;
        }
        case "error":
          ended = true;
          say(ui.outcome, "error", t("The ladder failed: {why}", { why: msg.message || t("unknown error") }));
          break;
      }
    };
    try {
      const res = await fetch(`${RUNS}/${encodeURIComponent(id)}/stream`, {
        headers: Object.assign({ Accept: "text/event-stream" }, auth()), cache: "no-store",
      });
      if (res.ok && res.body) await readSSE(res, onEvent);
    } catch (_) {
      /* the stream broke; the record says where the ladder got to */
    }
    if (!ended) {
      const rec = await api("GET", `${RUNS}/${encodeURIComponent(id)}`, undefined, auth());
      if (rec.status === 200 && rec.data && rec.data.steps) rec.data.steps.forEach((s, i) => onStep(i, s));
      say(ui.outcome, "warn", t("The progress stream ended before the ladder did; reload to see the rest."));
    }
    setRunning(false);
    ladder.button.disabled = false;
  });

  ui.token.addEventListener("change", () => { loadSequence(); });

  showScenarioDoc();
  renderRuns();
  loadSource(ui.variant.value);
  loadRuns();
  loadSequence();
})();

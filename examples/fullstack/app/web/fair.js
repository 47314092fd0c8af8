// Fair sale modes of the seckill demo page (-sale-mode queue | draw). In
// first-come mode (the default) /api/activity has no sale_mode and this
// file does nothing.
// - queue: join the waiting room once signed in, show the place (position,
//   ETA) and the moment of admission; the admission pass goes with the
//   access-token request (X-Queue-Pass, via app.js's api()).
// - draw: enter before the start, then show the outcome (winner with a
//   deadline, waitlisted, lost — final once no replacement can change it);
//   only a winner sees the buy button.
// Push first, as for the buy's result: a stream ticket (POST
// /api/fair/ticket), then a WebSocket (/api/fair/ws), else Server-Sent
// Events (/api/fair/events), each message the poll's answer; while no
// stream is open the page polls every second. #fair-status's data-via says
// which brought the last answer ("push" or "poll"). A poll whose answer
// comes back after a pushed message arrived while it was in flight is
// dropped (data-stale counts them): the page cannot tell which of the two
// the server read first, and the stream sends every later change anyway, so
// a late "waiting" never covers a pushed admission.
(() => {
  "use strict";
  const $ = (id) => document.getElementById(id);
  const fair = { mode: "", ticket: "", pass: "", entered: false, stream: null, opening: false, final: false, lastOpen: 0, pushes: 0, stale: 0 };
  window.seckillFairHeaders = (path) =>
    path === "/api/activity/token" && fair.pass ? { "X-Queue-Pass": fair.pass } : {};
  const bearer = () => sessionStorage.getItem("seckill.token") || "";

  async function call(method, path, headers) {
    const h = Object.assign({ "Accept": "application/json", "Authorization": "Bearer " + bearer() }, headers || {});
    let body;
    if (method === "POST") { h["Content-Type"] = "application/json"; body = "{}"; }
    const res = await fetch(path, { method, headers: h, body });
    let data = {};
    try { data = await res.json(); } catch (_) {}
    return { ok: res.ok, code: res.status, data };
  }
  // poll GETs path; null when a push arrived while it was in flight.
  async function poll(path, headers) {
    const n = fair.pushes;
    const r = await call("GET", path, headers);
    if (fair.pushes === n) return r;
    $("fair-status").dataset.stale = String(++fair.stale);
    return null;
  }
  let via = "poll";
  function show(text, state) {
    const el = $("fair-status");
    el.textContent = text;
    el.dataset.state = state;
    el.dataset.via = via;
  }
  const buyButton = (on) => $("buy-btn").classList.toggle("hidden", !on);
  const secs = (ms) => Math.max(1, Math.round(ms / 1000)) + " s";

  async function queueTick() {
    if (!bearer()) return;
    if (!fair.ticket) {
      const j = await call("POST", "/api/queue/join");
      if (!j.ok) { show(j.data.message || "Could not join the queue — retrying…", "error"); return; }
      fair.ticket = j.data.ticket;
    }
    if (fair.stream) return; // pushed
    openPush();
    const r = await poll("/api/queue/poll", { "X-Queue-Ticket": fair.ticket });
    if (!r) return; // a push answered meanwhile
    if (r.code === 403) { fair.ticket = ""; return; } // join again
    if (!r.ok) return;
    renderQueue(r.data, "poll");
  }

  function renderQueue(p, how) {
    via = how;
    if (p.state === "rejoin") { fair.ticket = ""; return; }
    fair.final = p.state !== "waiting"; // polled from then on (done, a lapse)
    $("fair-position").textContent = p.position || "";
    if (p.state === "waiting") {
      buyButton(false);
      show(p.position > 0
        ? "You are number " + p.position + " in the queue" + (p.eta_ms > 0 ? " — about " + secs(p.eta_ms) + " to go." : ".")
        : "You are in the queue. Everyone who joins before the start gets a place by a fair draw at the start.", "waiting");
    } else if (p.state === "admitted") {
      if (!fair.pass) $("fair-admitted").textContent = new Date().toISOString().substring(11, 19) + " UTC";
      fair.pass = p.pass;
      buyButton(true);
      show("It is your turn! Admitted at " + $("fair-admitted").textContent + " — buy before " +
        new Date(p.expiry).toISOString().substring(11, 19) + " UTC.", "admitted");
    } else if (p.state === "done") {
      show("You used your turn.", "done");
    } else {
      fair.pass = ""; buyButton(false);
      show("You left the queue (the page stopped asking, or your turn lapsed).", "left");
    }
  }

  async function drawTick() {
    if (!bearer()) return;
    $("draw-enter").classList.toggle("hidden", fair.entered);
    if (!fair.entered) {
      const o = await call("GET", "/api/draw/outcome");
      if (o.ok && o.data.status !== "not_entered") fair.entered = true; else { show("Enter the draw before the start.", "open"); return; }
    }
    if (fair.stream || fair.final) return; // pushed, or nothing changes any more
    openPush();
    const r = await poll("/api/draw/outcome");
    if (!r || !r.ok) return; // a push answered meanwhile, or no answer
    renderDraw(r.data, "poll");
  }

  function renderDraw(o, how) {
    via = how;
    fair.final = !!o.final;
    buyButton(o.status === "winner");
    if (o.status === "entered") show("You are in the draw. Winners are drawn at the start.", "entered");
    else if (o.status === "winner") show("You won the draw (#" + o.rank + ")!" + (o.deadline ? " Buy before " + new Date(o.deadline).toISOString().substring(11, 19) + " UTC." : ""), "winner");
    else if (o.status === "waitlisted") show("You are on the waitlist (#" + o.position + "): you get a unit if a winner does not buy.", "waitlisted");
    else if (o.status === "lost") show(o.rank ? "Not drawn this time (#" + o.rank + ")." : "Not drawn this time.", "lost");
  }

  // openPush opens the fair stream (at most every 3 s): a WebSocket, else
  // SSE; a stream that closes before a final answer leaves the page
  // polling, which opens another.
  async function openPush() {
    if (fair.stream || fair.opening || fair.final || Date.now() - fair.lastOpen < 3000) return;
    if (fair.mode === "queue" && !fair.ticket) return;
    fair.opening = true;
    fair.lastOpen = Date.now();
    try {
      const t = await call("POST", "/api/fair/ticket");
      if (!t.ok) return;
      const q = "?ticket=" + encodeURIComponent(t.data.ticket) + (fair.mode === "queue" ? "&queue=" + encodeURIComponent(fair.ticket) : "");
      const render = (data) => {
        const v = JSON.parse(data);
        fair.pushes++;
        if (fair.mode === "queue") renderQueue(v, "push"); else renderDraw(v, "push");
      };
      const sse = () => {
        if (!window.EventSource) return;
        const es = new EventSource("/api/fair/events" + q);
        fair.stream = es;
        es.addEventListener("fair", (ev) => render(ev.data));
        es.onerror = () => { es.close(); if (fair.stream === es) fair.stream = null; };
      };
      if (!window.WebSocket) { sse(); return; }
      const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/api/fair/ws" + q);
      let opened = false;
      fair.stream = ws;
      ws.onopen = () => { opened = true; };
      ws.onmessage = (ev) => render(ev.data);
      ws.onclose = () => {
        if (fair.stream === ws) fair.stream = null;
        if (!opened) sse(); // refused or no WebSocket on the way: SSE
      };
    } finally {
      fair.opening = false;
    }
  }

  async function enterDraw() {
    const r = await call("POST", "/api/draw/enter");
    if (r.ok) { fair.entered = true; drawTick(); } else show(r.data.message || "Could not enter the draw.", "error");
  }

  fetch("/api/activity").then((r) => r.json()).then((a) => {
    fair.mode = a.sale_mode || "";
    if (!fair.mode) return;
    $("fair-card").classList.remove("hidden");
    $("fair-title").textContent = fair.mode === "queue" ? "Waiting room" : "Draw";
    buyButton(false);
    if (fair.mode === "draw") $("draw-enter").addEventListener("click", enterDraw);
    const tick = fair.mode === "queue" ? queueTick : drawTick;
    const loop = () => tick().catch(() => {}).finally(() => setTimeout(loop, 1000));
    loop();
  }).catch(() => {});
})();

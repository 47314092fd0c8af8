// seckill demo page. Plain JS, no build step.
// - countdown and buy button from the SERVER clock: a lower bound of the
//   server's time, re-read on every /api/activity (see loadActivity)
// - buy button locked while a request is in flight
// - result pushed over SSE, with polling as a fallback
(() => {
  "use strict";
  const $ = (id) => document.getElementById(id);
  const state = {
    token: sessionStorage.getItem("seckill.token") || "",
    user: sessionStorage.getItem("seckill.user") || "",
    clock: null,        // {server, at}: server time (ms) no later than monotonic instant `at`
    act: null,          // last /api/activity
    captchaID: "",
    inFlight: false,
    attempt: "",        // idempotency key of the purchase attempt in progress (request_id)
    creds: null,        // {token, path} of that attempt, reused by its retries
    done: false,        // a final result was shown
    reservation: "",
    orderNo: "",
    variant: "",        // the size picked (a sale with variants)
    boughtVariant: "",  // the size of the reservation shown
  };

  const MESSAGES = {
    queued: ["Queued — waiting for your order…", "wait"],
    sold_out: ["Sold out. Better luck next time.", "bad"],
    already_bought: ["You already bought this item (one per person).", "bad"],
    limited: ["Too many attempts — slow down and try again in a moment.", "bad"],
    busy: ["The sale is very busy right now — please try again.", "bad"],
    retry: ["Could not place your order — please try again.", "bad"],
    not_started: ["The sale has not started yet.", "bad"],
    ended: ["The sale has ended.", "bad"],
    captcha: ["Wrong captcha — a new one was loaded.", "bad"],
    token: ["Your buy link or access token is not valid — please try again.", "bad"],
    denied: ["Request refused by risk control.", "bad"],
    unauthorized: ["Please sign in again.", "bad"],
    created: ["Success! Your order is placed — pay within the time limit.", "ok"],
    paid: ["Paid. Thank you!", "ok"],
    refunded: ["Your payment was refunded.", "ok"],
    conflict: ["The order was paid already; this payment will be refunded.", "bad"],
    cancelled: ["Your order was cancelled (not paid in time).", "bad"],
    failed: ["Your order could not be completed; the item was released.", "bad"],
  };

  function say(status, extra) {
    const [text, cls] = MESSAGES[status] || [extra || status, "bad"];
    const m = $("message");
    m.textContent = extra && MESSAGES[status] ? text + " " + extra : text;
    m.className = "message " + cls;
    m.dataset.status = status;
  }

  async function api(method, path, body) {
    const headers = { "Accept": "application/json" };
    if (state.token) headers["Authorization"] = "Bearer " + state.token;
    if (state.pow && !state.noDevice) headers["X-Device-ID"] = deviceID(); // -bot-defence: the device rules
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (window.seckillFairHeaders) Object.assign(headers, window.seckillFairHeaders(path)); // fair.js: the queue pass
    const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    let data = {};
    try { data = await res.json(); } catch (_) {}
    return { ok: res.ok, code: res.status, data };
  }

  // The server's clock, never ahead of it: server_time was read before its
  // answer arrived, so server_time plus the time elapsed since the arrival
  // is at most the server's real time. (The middle of the round trip would
  // be a closer guess, but one that runs early whenever the server reads
  // its clock late in a slow request: the page would then open the button
  // before the sale and the buy would be refused.) performance.now() is
  // monotonic and independent of the wall clock, so a wrong or jumping
  // client clock changes nothing.
  const serverNow = () => state.clock.server + (performance.now() - state.clock.at);

  // Date.parse of RFC 3339 with more than 3 fraction digits: cut to
  // milliseconds (never round up, which could put the bound ahead).
  const parseMs = (s) => Date.parse(String(s).replace(/(\.\d{3})\d+/, "$1"));

  function fmt(ms) {
    if (ms < 0) ms = 0;
    const s = Math.floor(ms / 1000), h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
    const p = (n) => String(n).padStart(2, "0");
    return (h ? p(h) + ":" : "") + p(m) + ":" + p(r) + "." + Math.floor((ms % 1000) / 100);
  }

  async function loadActivity() {
    const r = await api("GET", "/api/activity");
    const at = performance.now(); // after the answer (and its server_time) arrived
    if (!r.ok) return;
    const a = r.data;
    state.clock = { server: parseMs(a.server_time), at };
    state.act = a;
    $("name").textContent = a.product_name;
    $("price").textContent = "$" + a.price;
    $("original").textContent = "$" + a.original_price;
    $("remaining").textContent = a.remaining;
    $("total").textContent = a.total_stock;
    $("demo-fill").classList.toggle("hidden", !a.demo);
    showVariants(a.variants || []);
  }

  // A sale with variants: one button per size with its units left, sold
  // out per size; the buyer picks one before buying.
  function showVariants(vs) {
    const box = $("variants");
    box.classList.toggle("hidden", vs.length === 0);
    if (vs.length === 0) return;
    const chosen = vs.find((v) => v.id === state.variant);
    if (chosen && chosen.sold_out && !state.inFlight) state.variant = "";
    box.replaceChildren(...vs.map((v) => {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "variant" + (v.sold_out ? " soldout" : "");
      b.setAttribute("role", "radio");
      b.setAttribute("aria-checked", String(v.id === state.variant));
      b.dataset.variant = v.id;
      b.dataset.remaining = v.remaining;
      b.disabled = v.sold_out;
      const name = document.createElement("span");
      name.textContent = v.id;
      const left = document.createElement("small");
      left.className = "left";
      left.textContent = v.sold_out ? "sold out" : v.remaining + " left";
      b.append(name, left);
      b.addEventListener("click", () => { state.variant = v.id; showVariants(state.act.variants || []); });
      return b;
    }));
    const c = $("chosen");
    c.classList.toggle("hidden", !state.variant);
    c.textContent = state.variant ? "Size " + state.variant : "";
  }

  // needsVariant: the sale has sizes and none is picked.
  const needsVariant = () => !!(state.act && state.act.variants && state.act.variants.length && !state.variant);

  function tick() {
    const a = state.act;
    if (a) {
      const now = serverNow(), start = parseMs(a.start_time), end = parseMs(a.end_time);
      const phase = $("phase"), cd = $("countdown");
      $("servertime").textContent = new Date(now).toISOString().substring(11, 19) + " UTC";
      let open = false;
      if (now < start) {
        phase.textContent = "starts soon"; phase.className = "badge";
        cd.textContent = "starts in " + fmt(start - now);
      } else if (now < end && a.remaining > 0) {
        phase.textContent = "live"; phase.className = "badge live";
        cd.textContent = "ends in " + fmt(end - now);
        open = true;
      } else {
        phase.textContent = a.remaining > 0 ? "ended" : "sold out"; phase.className = "badge over";
        cd.textContent = a.remaining > 0 ? "the sale has ended" : "all units sold";
      }
      $("buy-btn").disabled = !open || state.inFlight || state.done || !state.token || needsVariant();
      const label = needsVariant() ? "Pick a size" : "Buy now";
      if ($("buy-btn").textContent !== label) $("buy-btn").textContent = label;
    }
    requestAnimationFrame(tick);
  }

  function showSignedIn() {
    $("who").textContent = state.user ? "signed in as " + state.user : "not signed in";
    $("buy-card").classList.toggle("hidden", !state.token);
    $("login-card").classList.toggle("hidden", !!state.token);
    if (state.token) loadCaptcha().then(probePoW);
  }

  // -bot-defence=pow: every buy carries a proof of work, solved here
  // invisibly (ALTCHA's v1 format, WebCrypto SHA-256, no widget or CDN);
  // the image captcha is shown only when the server asks for it (risk
  // challenged the buy: "captcha required"). Without it GET /api/pow is
  // 404 and the captcha is asked on every buy, as before.
  function deviceID() { // this tab's device, for the device rules (one per signed-in user in the demo)
    const k = "seckill.device." + state.user;
    let d = sessionStorage.getItem(k);
    if (!d) { d = newAttemptID(); sessionStorage.setItem(k, d); }
    return d;
  }

  async function probePoW() {
    const r = await api("GET", "/api/pow");
    state.pow = r.ok;
    $("captcha-box").classList.toggle("hidden", state.pow && !state.captchaAsked);
  }

  async function solvePoW() {
    const r = await api("GET", "/api/pow");
    if (!r.ok) return "";
    const c = r.data, enc = new TextEncoder(), start = Date.now();
    const hex = (b) => Array.from(new Uint8Array(b), (x) => x.toString(16).padStart(2, "0")).join("");
    for (let n = 0; n <= c.maxnumber; n += 256) { // 256 digests in flight at a time
      const batch = [];
      for (let i = n; i < n + 256 && i <= c.maxnumber; i++) batch.push(crypto.subtle.digest("SHA-256", enc.encode(c.salt + i)));
      const k = (await Promise.all(batch)).findIndex((d) => hex(d) === c.challenge);
      if (k >= 0) {
        $("pow-status").textContent = "proof of work: solved in " + (Date.now() - start) + " ms";
        return btoa(JSON.stringify({ algorithm: c.algorithm, challenge: c.challenge, number: n + k,
          salt: c.salt, signature: c.signature, took: Date.now() - start }));
      }
    }
    return "";
  }

  async function login(ev) {
    ev.preventDefault();
    const name = $("username").value.trim() || "user" + (1 + Math.floor(Math.random() * 1000));
    const r = await api("POST", "/api/login", { username: name });
    if (!r.ok) { alert(r.data.message || "login failed"); return; }
    state.token = r.data.token; state.user = r.data.username;
    sessionStorage.setItem("seckill.token", state.token);
    sessionStorage.setItem("seckill.user", state.user);
    showSignedIn();
  }

  async function loadCaptcha() {
    const r = await api("GET", "/api/captcha");
    if (r.code === 401) return signOut();
    if (!r.ok) return;
    state.captchaID = r.data.id;
    $("captcha-img").src = r.data.image;
    $("captcha-img").dataset.id = r.data.id;
    $("captcha").value = "";
  }

  async function demoFill() {
    const r = await api("GET", "/api/demo/captcha/" + encodeURIComponent(state.captchaID));
    if (r.ok) $("captcha").value = r.data.answer;
  }

  function signOut() {
    state.token = ""; state.user = "";
    sessionStorage.removeItem("seckill.token"); sessionStorage.removeItem("seckill.user");
    showSignedIn();
    say("unauthorized");
  }

  function newAttemptID() {
    const b = new Uint8Array(12);
    crypto.getRandomValues(b);
    return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  }

  async function buy() {
    if (state.inFlight || state.done) return;
    state.inFlight = true;
    $("buy-btn").disabled = true;
    say("queued", "");
    $("message").textContent = "Sending…";
    try {
      // An access token from the pool (stock × 3, one per user), then the
      // signed buy path (released shortly before the start), then the buy.
      // One idempotency key per purchase attempt, kept across retries of
      // that attempt (a lost answer, a 5xx) together with its token and
      // path: the server then returns the reservation the first try made
      // instead of refusing the retry (even once the sale sold out).
      if (!state.attempt) { state.attempt = newAttemptID(); state.creds = null; state.attemptVariant = state.variant; }
      if (!state.creds) {
        const tk = await api("POST", "/api/activity/token", {});
        if (!tk.ok) { state.attempt = ""; finishRefusal(tk); return; }
        const p = await api("GET", "/api/activity/path");
        if (!p.ok) { state.attempt = ""; finishRefusal(p); return; }
        state.creds = { token: tk.data.token, path: p.data.path };
      }
      const body = { token: state.creds.token, request_id: state.attempt };
      // The size goes with the attempt: a retry asks for the same one.
      if (state.attemptVariant) { body.variant = state.attemptVariant; state.boughtVariant = state.attemptVariant; }
      if (state.pow) body.pow = await solvePoW();
      if (!state.pow || state.captchaAsked) { body.captcha_id = state.captchaID; body.captcha = $("captcha").value.trim(); }
      const r = await api("POST", state.creds.path, body);
      if (r.code === 202 || (r.code === 200 && r.data.reservation)) {
        state.attempt = "";
        state.reservation = r.data.reservation;
        say("queued");
        if (r.code === 202) await waitResult(r.data.reservation); else showResult(r.data);
      } else {
        if (r.code < 500) state.attempt = ""; // refused for good: the next try is a new attempt
        finishRefusal(r);
      }
    } catch (e) {
      say("retry", String(e)); // the answer was lost: the next click retries the same attempt
    } finally {
      // Re-read the server's clock and stock before the button can be used
      // again: after a "not started" the countdown shows the server's view.
      await loadActivity().catch(() => {});
      state.inFlight = false;
    }
  }

  function finishRefusal(r) {
    const st = r.data.status || (r.code === 401 ? "unauthorized" : "retry");
    if (state.pow && r.data.message === "captcha required") { // risk challenged: show the image captcha
      state.captchaAsked = true;
      $("captcha-box").classList.remove("hidden");
    }
    say(st, MESSAGES[st] ? "" : r.data.message);
    if (st === "unauthorized") return signOut();
    if (st === "sold_out" && state.act && state.act.variants && state.act.variants.length) {
      state.variant = ""; // that size is gone: pick another (the page marks it sold out)
    } else if (st === "sold_out" || st === "already_bought" || st === "ended") state.done = true;
    loadCaptcha(); // a captcha is single use
  }

  function showResult(res) {
    if (!res || !res.status || res.status === "queued") return false;
    say(res.status);
    if (res.order_no) {
      state.orderNo = res.order_no;
      $("order-no").textContent = res.order_no;
      $("order").classList.remove("hidden");
      $("pay-btn").classList.toggle("hidden", res.status !== "created");
      const size = res.variant || state.boughtVariant;
      $("order-variant").textContent = size ? "size " + size : "";
      $("order-variant").classList.toggle("hidden", !size);
    }
    state.done = true;
    return true;
  }

  // Push first: a WebSocket, else Server-Sent Events (both opened with a
  // one-minute ticket, never the bearer token in the URL); if push fails or
  // stays silent, poll.
  function waitResult(id) {
    return new Promise(async (resolve) => {
      let finished = false, es = null, ws = null, pollTimer = null;
      const path = encodeURIComponent(id);
      const finish = (res) => {
        if (finished || !showResult(res)) return;
        finished = true;
        if (es) es.close();
        if (ws) ws.close();
        clearTimeout(pollTimer);
        resolve();
      };
      const poll = async () => {
        if (finished) return;
        const r = await api("GET", "/api/result/" + path).catch(() => null);
        if (r && r.ok) finish(r.data);
        if (!finished) pollTimer = setTimeout(poll, 1000);
      };
      const sse = (ticket) => {
        if (finished) return;
        if (!window.EventSource || !ticket) { poll(); return; }
        es = new EventSource("/api/events/" + path + "?ticket=" + encodeURIComponent(ticket));
        es.addEventListener("result", (ev) => finish(JSON.parse(ev.data)));
        es.onerror = () => { if (es) es.close(); es = null; if (!finished) poll(); };
      };
      const ticket = await api("POST", "/api/events/" + path + "/ticket").then((r) => (r.ok ? r.data.ticket : null)).catch(() => null);
      if (ticket && window.WebSocket) {
        ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/api/ws/" + path + "?ticket=" + encodeURIComponent(ticket));
        ws.onmessage = (ev) => finish(JSON.parse(ev.data));
        // Closed before a final result (refused, proxy without WebSocket…): SSE.
        ws.onclose = () => { ws = null; sse(ticket); };
      } else {
        sse(ticket);
      }
      pollTimer = setTimeout(poll, 3000); // fallback if push stays silent
    });
  }

  // pay: the fake payment provider charges and calls the shop back (a
  // signed callback, fakepay.go); the answer is the order's state. A paid
  // order is read again now and then: the shop may refund it.
  async function pay() {
    $("pay-btn").disabled = true;
    const r = await api("POST", "/api/pay/fake", { order_no: state.orderNo });
    if (r.ok) { say(r.data.status); $("pay-btn").classList.add("hidden"); watchRefund(); }
    else { say(r.data.status || "retry", r.data.message); $("pay-btn").disabled = false; }
  }

  function watchRefund() {
    const resv = state.reservation;
    const again = async () => {
      if (!resv || resv !== state.reservation) return;
      const r = await api("GET", "/api/result/" + encodeURIComponent(resv)).catch(() => null);
      if (r && r.ok && r.data.status === "refunded") { say("refunded"); return; }
      setTimeout(again, 5000);
    };
    setTimeout(again, 5000);
  }

  $("login-form").addEventListener("submit", login);
  $("captcha-refresh").addEventListener("click", loadCaptcha);
  $("demo-fill").addEventListener("click", demoFill);
  $("buy-btn").addEventListener("click", buy);
  $("pay-btn").addEventListener("click", pay);
  $("username").value = "user" + (1 + Math.floor(Math.random() * 1000));

  loadActivity().then(() => { showSignedIn(); requestAnimationFrame(tick); });
  setInterval(loadActivity, 5000);
})();

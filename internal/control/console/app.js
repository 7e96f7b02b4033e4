// The console polls the API with the token the user gives (kept in this tab only).
"use strict";
let token = sessionStorage.getItem("gpupool-token") || "";
let lastEvent = 0;
let role = "";
const events = [];
const palette = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
function colour(name) {
  let h = 0;
  for (const c of name) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return palette[h % palette.length];
}
async function get(path) {
  const r = await fetch(path, { headers: { Authorization: "Bearer " + token } });
  if (!r.ok) throw new Error(path + ": " + r.status);
  return r.json();
}
function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function drawPool(pool) {
  const root = document.getElementById("pool");
  root.replaceChildren();
  const nodes = new Map();
  for (const s of pool.slices) {
    if (!nodes.has(s.node)) nodes.set(s.node, new Map());
    const gpus = nodes.get(s.node);
    if (!gpus.has(s.gpu)) gpus.set(s.gpu, []);
    gpus.get(s.gpu).push(s);
  }
  for (const [node, gpus] of nodes) {
    const n = el("div", { class: "node", "data-node": node });
    n.append(el("b", {}, node));
    for (const [gpu, slices] of gpus) {
      const g = el("div", { class: "gpu" });
      g.append(el("span", { class: "label" }, gpu + " " + slices[0].board));
      for (const s of slices) {
        const cls = s.tenant ? "slice" : (s.occupied ? "slice other" : "slice");
        const d = el("span", { class: cls, "data-slice": s.id, "data-tenant": s.tenant || "" }, s.kind + (s.tenant ? " " + s.tenant : (s.occupied ? " (other)" : "")));
        if (s.tenant) { d.style.background = colour(s.tenant); d.style.color = "#fff"; }
        g.append(d);
      }
      n.append(g);
    }
    root.append(n);
  }
}
function drawTenants(tenants) {
  const body = document.querySelector("#tenants tbody");
  body.replaceChildren();
  for (const t of tenants) {
    const tr = el("tr", { "data-tenant": t.name });
    tr.append(el("td", {}, t.name), el("td", { class: "demand" }, String(t.demand)), el("td", { class: "granted" }, String(t.granted)),
      el("td", {}, (100 * t.dominantShare).toFixed(1) + "%"), el("td", {}, (100 * t.fairShare).toFixed(1) + "%"));
    const bars = el("td", {});
    const b = el("span", { class: "bar" }); b.style.width = (200 * t.dominantShare) + "px";
    const f = el("span", { class: "fair" }); f.style.width = (200 * Math.max(0, t.fairShare - t.dominantShare)) + "px";
    bars.append(b, f);
    tr.append(bars);
    const c = t.cost || {};
    const money = v => v === undefined || v === null ? "—" : v.toFixed(2) + " " + c.currency;
    tr.append(el("td", { class: "chargeback" }, money(c.chargebackPerHour)), el("td", { class: "showback" }, money(c.showbackPerHour)),
      el("td", { class: "carbon" }, c.gCO2ePerHourLocationBased === undefined ? "—" : c.gCO2ePerHourLocationBased.toFixed(0)));
    body.append(tr);
  }
}
function drawGates(gates) {
  const panel = document.getElementById("gates-panel");
  panel.hidden = role !== "operator";
  const body = document.querySelector("#gates tbody");
  body.replaceChildren(...(gates || []).map(g => {
    const tr = el("tr", { "data-gate": String(g.id) });
    for (const v of [g.id, g.node, g.gpu, g.from || "—", g.layout, g.state, g.attempts, g.reason || ""]) tr.append(el("td", {}, String(v)));
    return tr;
  }));
  if (!gates || gates.length === 0) body.append(el("tr", {}, "none in progress"));
}
function drawEvents(fresh) {
  for (const e of fresh) { events.push(e); lastEvent = e.seq; }
  while (events.length > 200) events.shift();
  const root = document.getElementById("events");
  root.replaceChildren(...events.slice().reverse().map(e => el("div", { class: "event" }, new Date(e.at).toLocaleTimeString() + " " + e.code + " " + e.message)));
}
async function refresh() {
  if (!token) return;
  try {
    const [pool, fresh, gates] = await Promise.all([get("/v1/pool"), get("/v1/events?after=" + lastEvent),
      role === "operator" ? get("/v1/gates") : Promise.resolve([])]);
    drawPool(pool); drawTenants(pool.tenants); drawEvents(fresh); drawGates(gates);
    document.getElementById("status").textContent = "revision " + pool.revision + ", " + pool.capacity + " slices";
  } catch (err) {
    document.getElementById("status").textContent = String(err);
  }
}
async function start() {
  try {
    const me = await get("/v1/whoami");
    role = me.role;
    document.getElementById("who").textContent = "— " + me.role + (me.tenant ? " " + me.tenant : "");
  } catch (err) { document.getElementById("status").textContent = String(err); return; }
  await refresh();
}
document.getElementById("go").onclick = () => {
  token = document.getElementById("token").value.trim();
  sessionStorage.setItem("gpupool-token", token);
  events.length = 0; lastEvent = 0;
  start();
};
if (location.hash.startsWith("#token=")) {
  token = decodeURIComponent(location.hash.slice(7));
  sessionStorage.setItem("gpupool-token", token);
  history.replaceState(null, "", location.pathname);
}
setInterval(refresh, 500);
start();

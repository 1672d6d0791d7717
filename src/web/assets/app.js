// SPDX-License-Identifier: Apache-2.0
// The dashboard's client: keeps a model of whatever the /ws feed publishes
// (fleet, racks, trays, compute domains, events) and redraws the current view from it.
"use strict";

(function () {
  const MAX_EVENTS = 100;
  const state = { fleet: null, racks: new Map(), domains: null, events: [], connected: false };
  let backoffMs = 1000;
  let renderPending = false;

  // ---- the feed ---------------------------------------------------------

  function feedUrl() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    return scheme + location.host + "/ws";
  }

  function connect() {
    let ws;
    try {
      ws = new WebSocket(feedUrl(), "nvl72.feed.v1");
    } catch (e) {
      retry();
      return;
    }
    ws.onopen = function () {
      backoffMs = 1000;
      // The server replays every retained topic: start from a clean model
      // so that objects deleted while we were away disappear.
      state.fleet = null;
      state.racks.clear();
      state.domains = null;
      setConnected(true);
    };
    ws.onmessage = function (ev) {
      let msg;
      try {
        msg = JSON.parse(ev.data);
      } catch (e) {
        return;
      }
      if (msg && typeof msg.topic === "string") {
        apply(msg.topic, msg.data);
        scheduleRender();
      }
    };
    ws.onclose = function () {
      setConnected(false);
      retry();
    };
  }

  function retry() {
    setTimeout(connect, backoffMs);
    backoffMs = Math.min(backoffMs * 2, 30000);
  }

  function setConnected(up) {
    state.connected = up;
    const el = document.getElementById("conn");
    el.textContent = up ? "Live" : "Disconnected, retrying…";
    el.className = "conn " + (up ? "conn-up" : "conn-down");
  }

  function apply(topic, data) {
    const parts = topic.split("/");
    if (topic === "fleet") {
      state.fleet = data;
    } else if (parts[0] === "rack" && parts.length === 2) {
      if (data === null) state.racks.delete(parts[1]);
      else state.racks.set(parts[1], data);
    } else if (parts[0] === "tray" && parts.length === 3) {
      applyTray(parts[1], Number(parts[2]), data);
    } else if (topic === "domains") {
      state.domains = Array.isArray(data) ? data : null;
    } else if (topic === "events") {
      // The retained list of recent events, newest first.
      state.events = Array.isArray(data) ? data.slice(0, MAX_EVENTS) : [];
    } else if (topic === "event" && data) {
      state.events.unshift(data);
      state.events.length = Math.min(state.events.length, MAX_EVENTS);
    }
  }

  function applyTray(rackName, index, tray) {
    const rack = state.racks.get(rackName);
    if (!rack || !Number.isInteger(index)) return;
    rack.trays = Array.isArray(rack.trays) ? rack.trays : [];
    const at = rack.trays.findIndex(function (t) { return t.index === index; });
    if (tray === null) {
      if (at >= 0) rack.trays.splice(at, 1);
    } else if (at >= 0) {
      rack.trays[at] = tray;
    } else {
      rack.trays.push(tray);
    }
  }

  // ---- states, labels, colours ------------------------------------------

  // Every state maps to a class (colour) and a short text label, so the
  // colour is never the only carrier of meaning.
  function gpuState(gpu, trayOnline) {
    if (!trayOnline || !gpu) return { cls: "st-none", label: "N/A" };
    const fabric = gpu.fabricState || "Unknown";
    const health = gpu.health || "Unknown";
    if (gpu.fabricStatus && gpu.fabricStatus !== "Success" && fabric === "Completed")
      return { cls: "st-bad", label: "FAIL" };
    if (health === "Unhealthy") return { cls: "st-bad", label: "FAIL" };
    if (fabric === "Completed")
      return health === "Degraded" ? { cls: "st-warn", label: "DEG" }
                                   : { cls: "st-ok", label: "OK" };
    if (fabric === "InProgress" || fabric === "NotStarted")
      return { cls: "st-wait", label: "WAIT" };
    return { cls: "st-none", label: "N/A" };
  }

  function healthClass(h) {
    switch (h) {
      case "Healthy": return "st-ok";
      case "Degraded": return "st-warn";
      case "Progressing": return "st-wait";
      case "Unhealthy": return "st-bad";
      default: return "st-none";
    }
  }

  // ---- DOM helpers (text only: nothing from the feed becomes markup) ----

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function str(v, dflt) {
    return v === undefined || v === null || v === "" ? (dflt || "–") : String(v);
  }

  // ---- views --------------------------------------------------------------

  function rackList() {
    const seen = new Map();
    if (state.fleet && Array.isArray(state.fleet.racks))
      state.fleet.racks.forEach(function (r) { if (r && r.name) seen.set(r.name, r); });
    state.racks.forEach(function (r, name) {
      if (!seen.has(name)) seen.set(name, summarise(r));
    });
    return Array.from(seen.values()).sort(function (a, b) {
      return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
    });
  }

  // A fleet entry derived from a rack snapshot, for racks the fleet topic
  // has not described yet.
  function summarise(rack) {
    const trays = Array.isArray(rack.trays) ? rack.trays : [];
    let gpus = 0, gpusReady = 0;
    trays.forEach(function (t) {
      (t.gpus || []).forEach(function (g) {
        gpus++;
        if (gpuState(g, t.ready !== false).cls === "st-ok") gpusReady++;
      });
    });
    return {
      name: rack.name, platform: rack.platform, health: rack.health,
      stack: rack.stack, upgrade: rack.upgrade,
      capacity: {
        trays: trays.length,
        traysReady: trays.filter(function (t) { return t.ready; }).length,
        gpus: gpus, gpusReady: gpusReady,
      },
    };
  }

  function renderFleet() {
    const list = rackList();
    const ul = document.getElementById("rack-tiles");
    clear(ul);
    const bad = list.filter(function (r) { return r.health && r.health !== "Healthy"; }).length;
    document.getElementById("fleet-summary").textContent = list.length === 0
      ? (state.connected ? "No racks published yet." : "Waiting for data from the operator.")
      : list.length + " racks, " + bad + " not healthy.";
    list.forEach(function (r) {
      const li = el("li");
      const a = el("a", "tile " + healthClass(r.health));
      a.href = "#/rack/" + encodeURIComponent(r.name);
      a.appendChild(el("h3", null, r.name));
      const p = el("p");
      p.appendChild(el("span", "badge " + healthClass(r.health), str(r.health, "Unknown")));
      p.appendChild(document.createTextNode(" " + str(r.platform, "")));
      a.appendChild(p);
      const cap = r.capacity || {};
      a.appendChild(el("p", null, "Trays " + str(cap.traysReady, "?") + "/" + str(cap.trays, "18") +
        " ready, GPUs " + str(cap.gpusReady, "?") + "/" + str(cap.gpus, "72")));
      const st = r.stack || {};
      a.appendChild(el("p", null, "Stack " + str(st.observed) +
        (st.desired && st.desired !== st.observed ? " → " + st.desired : "")));
      if (r.upgrade && r.upgrade.phase)
        a.appendChild(el("p", null, "Upgrade: " + r.upgrade.phase));
      if (r.cordoned) a.appendChild(el("p", null, "Cordoned"));
      li.appendChild(a);
      ul.appendChild(li);
    });
  }

  function trayRow(t) {
    // Only a stale heartbeat greys the GPUs out: a tray that is online but
    // not Ready still shows which of its GPUs is the cause.
    const online = t.online !== false;
    const tr = el("tr", !online ? "offline" : t.ready === false ? "notready" : null);
    const th = el("th", null, str(t.index));
    th.scope = "row";
    tr.appendChild(th);
    tr.appendChild(el("td", null, str(t.node) +
      (!online ? " (offline)" : t.ready === false ? " (not ready)" : "")));
    const gpus = Array.isArray(t.gpus) ? t.gpus : [];
    for (let i = 0; i < 4; i++) {
      const g = gpus.find(function (x) { return x && x.index === i; }) || gpus[i];
      const s = gpuState(g, online);
      const td = el("td");
      const chip = el("span", "chip " + s.cls, s.label);
      chip.title = "GPU " + i + ": fabric " + str(g && g.fabricState, "unknown") +
        ", health " + str(g && g.health, "unknown");
      td.appendChild(chip);
      td.appendChild(el("span", "sr-only", " " + chip.title));
      tr.appendChild(td);
    }
    tr.appendChild(el("td", null, str(t.clique)));
    const imex = t.imex || {};
    tr.appendChild(el("td", null, str(imex.daemon) + (imex.domain ? " / " + imex.domain : "")));
    tr.appendChild(el("td", null, str(t.driver)));
    tr.appendChild(el("td", null, str(t.maintenance, "None") + (t.cordoned ? ", cordoned" : "")));
    return tr;
  }

  function renderRack(name) {
    const rack = state.racks.get(name);
    document.getElementById("rack-title").textContent = "Rack " + name;
    const tbody = document.querySelector("#tray-table tbody");
    clear(tbody);
    const conds = document.getElementById("rack-conditions");
    clear(conds);
    const sw = document.getElementById("switch-list");
    clear(sw);
    const groups = document.getElementById("group-list");
    clear(groups);
    if (!rack) {
      document.getElementById("rack-summary").textContent = "No data for this rack.";
      return;
    }
    const st = rack.stack || {};
    document.getElementById("rack-summary").textContent =
      str(rack.health, "Unknown") + " · " + str(rack.platform, "") +
      " · stack " + str(st.observed) + (st.desired && st.desired !== st.observed ? " → " + st.desired : "") +
      (rack.upgrade && rack.upgrade.phase ? " · upgrade " + rack.upgrade.phase : "") +
      (rack.clusterUUID ? " · domain " + rack.clusterUUID : "");
    (rack.conditions || []).forEach(function (c) {
      const good = c.type === "Degraded" || c.type === "UpgradeInProgress"
        ? c.status === "False" : c.status === "True";
      const b = el("span", "badge " + (good ? "st-ok" : "st-warn"), c.type + ": " + c.status);
      if (c.message) b.title = c.message;
      conds.appendChild(b);
    });
    const trays = (Array.isArray(rack.trays) ? rack.trays.slice() : [])
      .sort(function (a, b) { return a.index - b.index; });
    trays.forEach(function (t) { tbody.appendChild(trayRow(t)); });
    (rack.switchTrays || []).forEach(function (s) {
      const li = el("li");
      li.appendChild(el("span", "badge " + healthClass(s.state), str(s.state, "Unknown")));
      li.appendChild(document.createTextNode(" switch " + str(s.index) + " " + str(s.name, "") +
        (s.firmware ? " · " + s.firmware : "")));
      sw.appendChild(li);
    });
    (rack.partitions || []).forEach(function (p) {
      groups.appendChild(el("li", null, "Partition " + str(p.name) + ": trays " +
        (p.trays || []).join(", ") + " · " + str(p.phase)));
    });
    (rack.domains || []).forEach(function (d) {
      groups.appendChild(el("li", null, "Compute domain " + str(d.name) + ": trays " +
        (d.trays || []).join(", ") + " · " + str(d.status)));
    });
  }

  function domainClass(status) {
    return status === "Ready" ? "st-ok" : status === "NotReady" ? "st-bad" : "st-wait";
  }

  function renderDomains() {
    const tbody = document.querySelector("#domain-table tbody");
    clear(tbody);
    const list = state.domains || [];
    const ready = list.filter(function (d) { return d.status === "Ready"; }).length;
    document.getElementById("domains-summary").textContent = state.domains === null
      ? (state.connected ? "No compute domains published yet." : "Waiting for data from the operator.")
      : list.length + " compute domains, " + ready + " Ready.";
    list.forEach(function (d) {
      const tr = el("tr");
      const th = el("th", null, str(d.namespace) + "/" + str(d.name));
      th.scope = "row";
      tr.appendChild(th);
      const td = el("td");
      const b = el("span", "badge " + domainClass(d.status), str(d.status, "Pending"));
      td.appendChild(b);
      if (d.message) td.appendChild(el("span", "note", " " + d.message));
      tr.appendChild(td);
      const nodes = Array.isArray(d.nodes) ? d.nodes : [];
      tr.appendChild(el("td", null, nodes.length + " of " + str(d.numNodes, "?")));
      tr.appendChild(el("td", null, str(d.rack) + (d.partition ? " · " + d.partition : "")));
      tr.appendChild(el("td", null, str(d.clique)));
      const members = el("td");
      const ul = el("ul", "members");
      nodes.slice().sort(function (a, c) { return a.index - c.index; }).forEach(function (n) {
        const li = el("li");
        li.appendChild(el("span", "chip " + domainClass(n.status), str(n.status, "–")));
        li.appendChild(document.createTextNode(" " + str(n.index) + ": " + str(n.name) +
          (n.ipAddress ? " (" + n.ipAddress + ")" : "")));
        ul.appendChild(li);
      });
      members.appendChild(ul);
      tr.appendChild(members);
      tbody.appendChild(tr);
    });
  }

  function renderEvents() {
    const tbody = document.getElementById("event-list");
    clear(tbody);
    const warnings = state.events.filter(function (e) { return e.type === "Warning"; }).length;
    document.getElementById("events-summary").textContent = state.events.length === 0
      ? "No events yet."
      : state.events.length + " recent events, " + warnings + " warnings; newest first.";
    state.events.forEach(function (e) {
      const tr = el("tr", e.type === "Warning" ? "event warning" : "event");
      tr.appendChild(el("td", null, str(e.time)));
      const td = el("td");
      td.appendChild(el("span", "badge " + (e.type === "Warning" ? "st-warn" : "st-ok"),
        str(e.type, "Normal")));
      tr.appendChild(td);
      tr.appendChild(el("td", null, str(e.reason)));
      tr.appendChild(el("td", null, str(e.object)));
      tr.appendChild(el("td", null, str(e.message)));
      tbody.appendChild(tr);
    });
  }

  // ---- routing --------------------------------------------------------------

  // Upgrades is a reserved place: the upgrade controller will publish its
  // own topic; until then the view only says so.
  const VIEWS = ["fleet", "rack", "domains", "events", "upgrades"];

  function route() {
    const h = location.hash.replace(/^#/, "") || "/";
    if (h.indexOf("/rack/") === 0)
      return { view: "rack", name: decodeURIComponent(h.slice(6)) };
    if (h === "/events") return { view: "events" };
    if (h === "/domains") return { view: "domains" };
    if (h === "/upgrades") return { view: "upgrades" };
    return { view: "fleet" };
  }

  function render() {
    renderPending = false;
    const r = route();
    VIEWS.forEach(function (v) {
      document.getElementById("view-" + v).hidden = r.view !== v;
      const nav = document.getElementById("nav-" + v);
      if (nav) nav.setAttribute("aria-current", r.view === v ? "page" : "false");
    });
    if (r.view === "fleet") renderFleet();
    else if (r.view === "rack") renderRack(r.name);
    else if (r.view === "domains") renderDomains();
    else if (r.view === "events") renderEvents();
  }

  function scheduleRender() {
    if (renderPending) return;
    renderPending = true;
    window.requestAnimationFrame(render);
  }

  window.addEventListener("hashchange", function () {
    render();
    document.getElementById("main").focus();
  });
  document.addEventListener("DOMContentLoaded", function () {
    render();
    connect();
  });
})();

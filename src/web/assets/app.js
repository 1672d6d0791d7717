// SPDX-License-Identifier: Apache-2.0
// The dashboard's client: keeps a model of whatever the /ws feed publishes
// (fleet, racks, trays, compute domains, upgrades, events) and redraws the current view
// from it.
"use strict";

(function () {
  const MAX_EVENTS = 100;
  const TOKEN_KEY = "nvl72.dashboard.token";
  const state = {
    fleet: null, racks: new Map(), domains: null, upgrades: null, events: [], connected: false,
    // Per-namespace topics (domains/<ns>, events/<ns>): only those this
    // reader may see arrive; the views show their union.
    domainsByNs: new Map(), clusterEvents: [], eventsByNs: new Map(),
  };
  let backoffMs = 1000;
  let renderPending = false;
  let ws = null;
  let awaitingToken = false;

  // ---- the token ----------------------------------------------------------
  // Kept in this tab's sessionStorage (gone with the tab), sent once per
  // connection as the feed's first message; never in the URL.

  function storedToken() {
    try {
      return sessionStorage.getItem(TOKEN_KEY) || "";
    } catch (e) {
      return "";
    }
  }

  function storeToken(t) {
    try {
      if (t) sessionStorage.setItem(TOKEN_KEY, t);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch (e) {
      // Storage refused (private mode): the token lasts this page only.
    }
    document.getElementById("signout").hidden = !t;
  }

  let pageToken = "";

  function token() {
    return storedToken() || pageToken;
  }

  function showSignin(message) {
    const form = document.getElementById("signin");
    form.hidden = false;
    document.getElementById("signin-msg").textContent = message || "";
    document.getElementById("token").focus();
  }

  function sendToken() {
    awaitingToken = false;
    ws.send(JSON.stringify({ token: token() }));
    setConn("Checking the token…", false);
  }

  // ---- the feed ---------------------------------------------------------

  function feedUrl() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    return scheme + location.host + "/ws";
  }

  function connect() {
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
      state.domainsByNs.clear();
      state.clusterEvents = [];
      state.eventsByNs.clear();
      state.events = [];
      state.upgrades = null;
      setConnected(true);
    };
    ws.onmessage = function (ev) {
      let msg;
      try {
        msg = JSON.parse(ev.data);
      } catch (e) {
        return;
      }
      if (msg && msg.topic === "auth") {
        authMessage(msg.data || {});
      } else if (msg && typeof msg.topic === "string") {
        apply(msg.topic, msg.data);
        scheduleRender();
      }
    };
    ws.onclose = function (ev) {
      setConnected(false);
      // The server's refusals (docs/internals/dashboard-feed.md): a bad or
      // unauthorised token waits for a new one; the rest retry.
      if (ev.code === 4401 || ev.code === 4403 || ev.code === 4400) {
        storeToken("");
        pageToken = "";
        showSignin(ev.code === 4401 ? "The API server did not accept that token."
          : ev.code === 4403 ? "That token may not read the dashboard: it needs get on /ws."
            : "The token is malformed.");
        setConn("Token needed", false);
        return;
      }
      retry();
    };
  }

  function authMessage(data) {
    if (data.required) {
      if (token()) {
        sendToken();
      } else {
        awaitingToken = true;
        showSignin("");
        setConn("Token needed", false);
      }
    } else if (data.allowed) {
      document.getElementById("signin").hidden = true;
      setConnected(true);
      scheduleRender();
    }
  }

  function retry() {
    setTimeout(connect, backoffMs);
    backoffMs = Math.min(backoffMs * 2, 30000);
  }

  function setConn(text, up) {
    const el = document.getElementById("conn");
    el.textContent = text;
    el.className = "conn " + (up ? "conn-up" : "conn-down");
  }

  function setConnected(up) {
    state.connected = up;
    setConn(up ? "Live" : "Disconnected, retrying…", up);
  }

  // Sorted by namespace, each namespace's list as published.
  function union(byNs) {
    const out = [];
    Array.from(byNs.keys()).sort().forEach(function (ns) {
      (byNs.get(ns) || []).forEach(function (x) { out.push(x); });
    });
    return out;
  }

  function mergeEvents() {
    const all = state.clusterEvents.slice();
    state.eventsByNs.forEach(function (list) {
      list.forEach(function (e) { all.push(e); });
    });
    // RFC 3339 in UTC compares as text; newest first.
    all.sort(function (a, b) { return str(b.time) < str(a.time) ? -1 : str(b.time) > str(a.time) ? 1 : 0; });
    state.events = all.slice(0, MAX_EVENTS);
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
    } else if (parts[0] === "domains" && parts.length === 2) {
      if (Array.isArray(data)) state.domainsByNs.set(parts[1], data);
      else state.domainsByNs.delete(parts[1]);
      state.domains = union(state.domainsByNs);
    } else if (topic === "upgrades") {
      state.upgrades = Array.isArray(data) ? data : null;
    } else if (topic === "events") {
      // The retained list of recent events of cluster objects.
      state.clusterEvents = Array.isArray(data) ? data : [];
      mergeEvents();
    } else if (parts[0] === "events" && parts.length === 2) {
      if (Array.isArray(data)) state.eventsByNs.set(parts[1], data);
      else state.eventsByNs.delete(parts[1]);
      mergeEvents();
    }
    // "event" (one Event, live) is also in the retained lists that follow
    // it, which the view is drawn from.
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
      if (r.upgrade && r.upgrade.phase) {
        const up = el("p", "tile-upgrade", "Upgrade ");
        up.appendChild(el("span", "badge " + upgradeClass(r.upgrade.phase), r.upgrade.phase));
        a.appendChild(up);
      }
      if (r.cordoned) a.appendChild(el("p", null, "Cordoned"));
      li.appendChild(a);
      ul.appendChild(li);
    });
  }

  // The VBIOS most of the rack's GPUs report ("" when none does): the one
  // the VBIOS column measures the others against.
  function commonVbios(trays) {
    const n = new Map();
    let best = "";
    trays.forEach(function (t) {
      (t.gpus || []).forEach(function (g) {
        if (!g || !g.vbios) return;
        n.set(g.vbios, (n.get(g.vbios) || 0) + 1);
        if (!best || n.get(g.vbios) > n.get(best)) best = g.vbios;
      });
    });
    return best;
  }

  // One tray's VBIOS: the version when its GPUs agree, else each GPU's; a
  // GPU off the rack's common version marks the cell (the Rack's
  // VersionsConsistent condition names it too).
  function vbiosCell(gpus, common) {
    const seen = [];
    const odd = [];
    gpus.forEach(function (g) {
      if (!g || !g.vbios) return;
      if (seen.indexOf(g.vbios) < 0) seen.push(g.vbios);
      if (common && g.vbios !== common) odd.push("GPU " + g.index + ": " + g.vbios);
    });
    const text = seen.length <= 1 ? str(seen[0])
      : gpus.filter(function (g) { return g && g.vbios; })
        .map(function (g) { return g.index + ": " + g.vbios; }).join(", ");
    const td = el("td", odd.length ? "vbios skew" : "vbios", text);
    if (odd.length) {
      td.title = odd.join("; ") + " (rack: " + common + ")";
      td.appendChild(el("span", "sr-only", " differs from the rack's " + common));
    }
    return td;
  }

  function trayRow(t, common) {
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
        ", health " + str(g && g.health, "unknown") +
        (g && g.healthSource === "mask" ? " (from the health mask)" : "") +
        (g && g.pciBusId ? ", PCI " + g.pciBusId : "") +
        (g && g.vbios ? ", VBIOS " + g.vbios : "");
      td.appendChild(chip);
      td.appendChild(el("span", "sr-only", " " + chip.title));
      tr.appendChild(td);
    }
    tr.appendChild(el("td", null, str(t.clique)));
    const imex = t.imex || {};
    tr.appendChild(el("td", null, str(imex.daemon) + (imex.domain ? " / " + imex.domain : "")));
    tr.appendChild(el("td", null, str(t.driver)));
    tr.appendChild(vbiosCell(gpus, common));
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
    const common = commonVbios(trays);
    trays.forEach(function (t) { tbody.appendChild(trayRow(t, common)); });
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
    document.getElementById("domains-summary").textContent = list.length === 0
      ? (state.connected ? "No compute domains in a namespace this token may read."
        : "Waiting for data from the operator.")
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

  // ---- upgrades ----------------------------------------------------------

  // The RackUpgrade phases along the normal path, in order; Halted, Paused,
  // Aborted, RollingBack and RolledBack leave it and are shown after the
  // last phase reached.
  const UPGRADE_PATH = ["Proposed", "Notice", "AwaitingApproval", "Scheduled", "Canary",
    "Validating", "RollingOut", "Completed"];

  function upgradeClass(phase) {
    switch (phase) {
      case "Completed": return "st-ok";
      case "Halted": return "st-bad";
      case "Aborted": return "st-none";
      case "RollingBack": return "st-warn";
      case "RolledBack": return "st-warn";
      case "Paused": case "AwaitingApproval": return "st-warn";
      default: return "st-wait";
    }
  }

  function stepClass(phase) {
    switch (phase) {
      case "Succeeded": return "st-ok";
      case "Failed": return "st-bad";
      case "Running": return "st-wait";
      default: return "st-none";
    }
  }

  // [1, 2, 3, 5] -> "1–3, 5"
  function trayRanges(trays) {
    const t = (Array.isArray(trays) ? trays : []).filter(Number.isInteger)
      .slice().sort(function (a, b) { return a - b; });
    const out = [];
    for (let i = 0; i < t.length; i++) {
      let j = i;
      while (j + 1 < t.length && t[j + 1] === t[j] + 1) j++;
      out.push(j > i ? t[i] + "–" + t[j] : String(t[i]));
      i = j;
    }
    return out.length ? out.join(", ") : "–";
  }

  // Where an upgrade that left the normal path had got to.
  function reachedIndex(u) {
    const at = UPGRADE_PATH.indexOf(u.phase);
    if (at >= 0) return at;
    const steps = Array.isArray(u.steps) ? u.steps : [];
    const started = steps.filter(function (s) { return s.startTime; });
    // A rolled-back canary never got past its gate.
    if (steps.some(function (s) { return s.action === "RollBack"; }))
      return UPGRADE_PATH.indexOf("Validating");
    if (started.some(function (s) { return s.wave > 0; })) return UPGRADE_PATH.indexOf("RollingOut");
    if (started.some(function (s) { return s.action === "Validate"; }))
      return UPGRADE_PATH.indexOf("Validating");
    if (started.length) return UPGRADE_PATH.indexOf("Canary");
    if (u.scheduledStart) return UPGRADE_PATH.indexOf("Scheduled");
    const ap = u.approvals || {};
    if (Array.isArray(ap.required) && ap.required.length) return UPGRADE_PATH.indexOf("AwaitingApproval");
    return u.noticeEnd ? UPGRADE_PATH.indexOf("Notice") : 0;
  }

  function phaseTimeline(u) {
    const ol = el("ol", "timeline");
    ol.setAttribute("aria-label", "Phases of " + str(u.name));
    const onPath = UPGRADE_PATH.indexOf(u.phase) >= 0;
    const reached = reachedIndex(u);
    UPGRADE_PATH.forEach(function (p, i) {
      const now = onPath && i === reached;
      const li = el("li", i < reached || (!onPath && i === reached) ? "tl-done"
        : now ? "tl-now " + upgradeClass(p) : "tl-next", p);
      li.appendChild(el("span", "sr-only", i < reached || (!onPath && i === reached)
        ? " (passed)" : now ? " (current)" : " (ahead)"));
      if (now) li.setAttribute("aria-current", "step");
      ol.appendChild(li);
    });
    if (!onPath) {
      const li = el("li", "tl-now " + upgradeClass(u.phase), str(u.phase));
      li.appendChild(el("span", "sr-only", " (current)"));
      li.setAttribute("aria-current", "step");
      ol.appendChild(li);
    }
    return ol;
  }

  function field(dl, name, value) {
    dl.appendChild(el("dt", null, name));
    dl.appendChild(el("dd", null, value));
  }

  function table(caption, heads, rows, cls) {
    const t = el("table", "trays " + (cls || ""));
    t.appendChild(el("caption", null, caption));
    const tr = el("tr");
    heads.forEach(function (h) {
      const th = el("th", null, h);
      th.scope = "col";
      tr.appendChild(th);
    });
    const thead = el("thead");
    thead.appendChild(tr);
    t.appendChild(thead);
    const tbody = el("tbody");
    rows.forEach(function (r) { tbody.appendChild(r); });
    t.appendChild(tbody);
    const wrap = el("div", "scroll");
    wrap.appendChild(t);
    return wrap;
  }

  function chipCell(cls, label) {
    const td = el("td");
    td.appendChild(el("span", "chip " + cls, label));
    return td;
  }

  function approvalsBlock(u) {
    const ap = u.approvals || {};
    const div = el("div", "approvals");
    const req = Array.isArray(ap.required) ? ap.required : [];
    const pend = Array.isArray(ap.pending) ? ap.pending : [];
    div.appendChild(el("p", "approvals-summary", req.length === 0
      ? "No approval required."
      : "Required: " + req.join(", ") + ". " +
        (pend.length ? "Pending: " + pend.join(", ") + "." : "All given.")));
    const ul = el("ul", "members approvals-given");
    (Array.isArray(ap.given) ? ap.given : []).forEach(function (a) {
      const li = el("li");
      const rejected = a.decision === "Rejected";
      li.appendChild(el("span", "chip " + (rejected ? "st-bad" : a.counted ? "st-ok" : "st-none"),
        rejected ? "Rejected" : "Approved"));
      li.appendChild(document.createTextNode(" " + str(a.layer) + " by " + str(a.user, "(not stamped)") +
        (a.time ? " at " + a.time : "") + (a.counted ? "" : " (not counted)")));
      ul.appendChild(li);
    });
    div.appendChild(ul);
    return div;
  }

  function upgradeCard(u) {
    const art = el("article", "upgrade");
    art.id = "upgrade-" + str(u.name);
    art.setAttribute("aria-labelledby", art.id + "-title");
    const h = el("h3", null, str(u.name) + " ");
    h.id = art.id + "-title";
    const badge = el("span", "badge phase " + upgradeClass(u.phase), str(u.phase, "Proposed"));
    h.appendChild(badge);
    art.appendChild(h);
    const t = u.target || {};
    const racks = Array.isArray(u.racks) ? u.racks : [];
    const what = u.rack ? "Rack " + str(u.rack) + ": " + str(u.fromStack) :
      "Selector (" + racks.length + " racks)";
    art.appendChild(el("p", "summary", what + " → " +
      str(t.stack) + " · " + str(u["class"], "routine") +
      (Array.isArray(u.cves) && u.cves.length ? " (" + u.cves.join(", ") + ")" : "") +
      (u.phaseTime ? " · " + str(u.phase) + " since " + u.phaseTime : "") +
      (u.paused ? " · paused" : "") + (u.abort ? " · abort requested" : "")));
    if (u.message) art.appendChild(el("p", "upgrade-message", u.message));
    art.appendChild(phaseTimeline(u));

    const dl = el("dl", "facts");
    field(dl, "Notice ends", str(u.noticeEnd));
    field(dl, "Scheduled start", str(u.scheduledStart) + (u.window ? " (window " + u.window + ")" : ""));
    const c = u.canary;
    field(dl, "Canary", c ? str(c.partition, "(trays)") + ": trays " + trayRanges(c.trays) : "none");
    art.appendChild(dl);

    art.appendChild(el("h4", null, "Approvals"));
    art.appendChild(approvalsBlock(u));

    if (racks.length) {
      art.appendChild(table("Racks of " + str(u.name), ["Rack", "Upgrade", "Phase", "Slot", "Message"],
        racks.map(function (r) {
          const tr = el("tr");
          [r.name, r.upgrade, r.phase, r.slotTime, r.message].forEach(function (v) {
            tr.appendChild(el("td", null, str(v)));
          });
          return tr;
        })));
    }

    const waves = Array.isArray(u.waves) ? u.waves : [];
    const rollback = (Array.isArray(u.steps) ? u.steps : [])
      .filter(function (s) { return s.action === "RollBack"; }).map(function (s) { return s.wave; });
    if (waves.length) {
      art.appendChild(table("Waves of " + str(u.name), ["Wave", "Trays", "Phase", "Started", "Completed"],
        waves.map(function (w) {
          const tr = el("tr");
          const th = el("th", null, w.index === 0 ? "0 (canary)"
            : rollback.indexOf(w.index) >= 0 ? w.index + " (rollback)" : str(w.index));
          th.scope = "row";
          tr.appendChild(th);
          // A wave with no compute tray is a stage's rack-wide switch-tray step.
          tr.appendChild(el("td", null, Array.isArray(w.trays) && w.trays.length === 0
            ? "switch trays (rack-wide)" : trayRanges(w.trays)));
          tr.appendChild(chipCell(stepClass(w.phase), str(w.phase, "Pending")));
          tr.appendChild(el("td", null, str(w.startTime)));
          tr.appendChild(el("td", null, str(w.completionTime)));
          return tr;
        }), "waves"));
    }

    const steps = Array.isArray(u.steps) ? u.steps : [];
    const gates = steps.filter(function (s) { return s.evidence; });
    if (gates.length) {
      art.appendChild(table("Validation gates of " + str(u.name),
        ["Step", "Wave", "Trays", "Bus bandwidth", "Fabric / IMEX", "Result"],
        gates.map(function (s) {
          const e = s.evidence;
          const tr = el("tr", e.passed ? "gate" : "gate failed");
          const th = el("th", null, str(s.index));
          th.scope = "row";
          tr.appendChild(th);
          tr.appendChild(el("td", null, str(s.wave)));
          tr.appendChild(el("td", null, trayRanges(s.trays)));
          tr.appendChild(el("td", null, str(e.busBandwidthGBps, "?") + " GB/s vs floor " +
            str(e.floorGBps, "?") + " GB/s, tolerance " + str(e.tolerancePercent, "0") + " %" +
            (e.transport ? " (" + e.transport + ")" : "")));
          tr.appendChild(el("td", null, str(e.fabricState) + " / " + str(e.imexDomainState)));
          tr.appendChild(chipCell(e.passed ? "st-ok" : "st-bad", e.passed ? "PASS" : "FAIL"));
          return tr;
        }), "gates"));
    }
    if (steps.length) {
      const det = el("details", "steps");
      det.appendChild(el("summary", null, steps.length + " steps"));
      det.appendChild(table("Steps of " + str(u.name),
        ["#", "Action", "Wave", "Trays", "Phase", "Started", "Completed", "Message"],
        steps.map(function (s) {
          const tr = el("tr");
          const th = el("th", null, str(s.index));
          th.scope = "row";
          tr.appendChild(th);
          tr.appendChild(el("td", null, str(s.action)));
          tr.appendChild(el("td", null, str(s.wave)));
          tr.appendChild(el("td", null, trayRanges(s.trays)));
          tr.appendChild(chipCell(stepClass(s.phase), str(s.phase, "Pending")));
          tr.appendChild(el("td", null, str(s.startTime)));
          tr.appendChild(el("td", null, str(s.completionTime)));
          tr.appendChild(el("td", null, str(s.message)));
          return tr;
        })));
      art.appendChild(det);
    }
    return art;
  }

  function renderUpgrades() {
    const box = document.getElementById("upgrade-list");
    // Keep open step lists open across redraws.
    const open = new Set(Array.from(box.querySelectorAll("details[open]")).map(function (d) {
      return d.parentNode.id;
    }));
    clear(box);
    const list = state.upgrades || [];
    const active = list.filter(function (u) {
      return u.phase !== "Completed" && u.phase !== "Aborted" && u.phase !== "RolledBack";
    }).length;
    document.getElementById("upgrades-summary").textContent = state.upgrades === null
      ? (state.connected ? "No upgrades published yet." : "Waiting for data from the operator.")
      : list.length === 0 ? "No RackUpgrades."
      : list.length + " upgrades, " + active + " in progress.";
    list.forEach(function (u) {
      const card = upgradeCard(u);
      const det = card.querySelector("details");
      if (det && open.has(card.id)) det.open = true;
      box.appendChild(card);
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
    else if (r.view === "upgrades") renderUpgrades();
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
    document.getElementById("signin").addEventListener("submit", function (ev) {
      ev.preventDefault();
      const input = document.getElementById("token");
      const t = input.value.trim();
      input.value = "";
      if (!t) return;
      pageToken = t;
      storeToken(t);
      document.getElementById("signin").hidden = true;
      if (ws && ws.readyState === WebSocket.OPEN && awaitingToken) sendToken();
      else if (!ws || ws.readyState === WebSocket.CLOSED) connect();
    });
    document.getElementById("signout").addEventListener("click", function () {
      storeToken("");
      pageToken = "";
      if (ws) ws.close();
    });
    document.getElementById("signout").hidden = !storedToken();
    render();
    connect();
  });
})();

// extraction-eval report: the item table (filter, sort, page) and the per-item highlight.
// Every piece of data is put into the page with textContent / attributes, never as HTML.
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("report-data").textContent);
  var RUNS = D.runs, ITEMS = D.items, TWO = RUNS.length === 2, PAGE = 50;
  var LETTERS = RUNS.map(function (_, i) { return String.fromCharCode(65 + i); });
  var state = { q: "", failing: false, category: "", type: "", changed: false,
    sort: "index", dir: 1, page: 0, open: {} };
  var view = [];

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    if (attrs) for (var k in attrs) {
      if (k === "text") node.textContent = attrs[k];
      else if (k === "cls") node.className = attrs[k];
      else node.setAttribute(k, attrs[k]);
    }
    (children || []).forEach(function (c) { if (c != null) node.appendChild(c); });
    return node;
  }
  function fmt(v) { return v == null ? "—" : v.toFixed(3); }
  function byId(id) { return document.getElementById(id); }

  // ---- filters and sort ------------------------------------------------------------------
  function fillSelect(id, values) {
    var s = byId(id);
    values.forEach(function (v) { s.appendChild(el("option", { value: v, text: v })); });
  }
  function failing(item) {
    return item.runs.some(function (r) { return r === null || r.fail; });
  }
  function hasCategory(item, cat) {
    return item.runs.some(function (r) { return r !== null && r.cats[cat]; });
  }
  function delta(item) {
    var a = item.runs[0], b = item.runs[1];
    return a && b && a.ef1 != null && b.ef1 != null ? b.ef1 - a.ef1 : null;
  }
  function problems(r) {
    if (r === null) return Infinity;
    var n = r.err ? 1000 : 0;
    for (var k in r.cats) n += r.cats[k];
    return n;
  }
  var SORTS = {
    index: function (it, i) { return i; },
    id: function (it) { return it.id; },
    delta: function (it) { return delta(it); }
  };
  RUNS.forEach(function (_, r) {
    SORTS["ef1:" + r] = function (it) { return it.runs[r] ? it.runs[r].ef1 : null; };
    SORTS["rf1:" + r] = function (it) { return it.runs[r] ? it.runs[r].rf1 : null; };
    SORTS["fail:" + r] = function (it) { return problems(it.runs[r]); };
  });

  function applyView() {
    var q = state.q.toLowerCase(), out = [];
    for (var i = 0; i < ITEMS.length; i++) {
      var it = ITEMS[i];
      if (state.failing && !failing(it)) continue;
      if (state.category && !hasCategory(it, state.category)) continue;
      if (state.type && it.types.indexOf(state.type) < 0) continue;
      if (state.changed && !it.chg) continue;
      if (q && it.id.toLowerCase().indexOf(q) < 0 && it.text.toLowerCase().indexOf(q) < 0) continue;
      out.push(i);
    }
    var key = SORTS[state.sort], dir = state.dir;
    if (state.sort !== "index" || dir !== 1) {
      var keys = {};
      out.forEach(function (i) { keys[i] = key(ITEMS[i], i); });
      out.sort(function (x, y) {
        var a = keys[x], b = keys[y];
        if (a === b) return x - y;
        if (a == null) return 1;  // missing values last, whichever direction
        if (b == null) return -1;
        return (a < b ? -1 : 1) * dir;
      });
    }
    view = out;
    state.page = Math.min(state.page, Math.max(0, Math.ceil(view.length / PAGE) - 1));
  }

  // ---- table ---------------------------------------------------------------------------
  var COLUMNS = [{ key: null, title: "" }, { key: "id", title: "item" }];
  RUNS.forEach(function (_, r) {
    var L = LETTERS[r];
    COLUMNS.push({ key: "ef1:" + r, title: L + " entity F1" });
    COLUMNS.push({ key: "rf1:" + r, title: L + " rel. F1" });
    COLUMNS.push({ key: "fail:" + r, title: L + " failures" });
  });
  if (TWO) COLUMNS.push({ key: "delta", title: "Δ entity F1" });
  COLUMNS.push({ key: null, title: "text" });

  function renderHead() {
    var tr = el("tr");
    COLUMNS.forEach(function (c) {
      var th = el("th", { text: c.title });
      if (c.key) {
        th.setAttribute("data-sort", c.key);
        if (state.sort === c.key) th.setAttribute("aria-sort", state.dir > 0 ? "ascending" : "descending");
        th.addEventListener("click", function () {
          if (state.sort === c.key) state.dir = -state.dir; else { state.sort = c.key; state.dir = 1; }
          state.page = 0; refresh();
        });
      }
      tr.appendChild(th);
    });
    byId("item-head").replaceChildren(tr);
  }

  function failureCell(r) {
    var td = el("td", { cls: "failures" });
    if (r === null) { td.appendChild(el("span", { cls: "err", text: "no result" })); return td; }
    if (r.err) td.appendChild(el("span", { cls: "cat err", title: r.err, text: "error: " + (r.ek || "") }));
    Object.keys(r.cats).sort().forEach(function (k) {
      td.appendChild(el("span", { cls: "cat", "data-category": k, text: k + " " + r.cats[k] }));
    });
    return td;
  }

  function renderRow(i) {
    var it = ITEMS[i];
    var tr = el("tr", { cls: "item-row", "data-item": it.id });
    var btn = el("button", { cls: "expand", type: "button", "aria-expanded": String(!!state.open[it.id]),
      title: "show the text with highlighted evidence", text: state.open[it.id] ? "▾" : "▸" });
    btn.addEventListener("click", function () { toggle(it.id); });
    tr.appendChild(el("td", null, [btn]));
    tr.appendChild(el("td", { cls: "id", text: it.id }));
    it.runs.forEach(function (r) {
      tr.appendChild(el("td", { cls: "num", text: r ? fmt(r.ef1) : "—" }));
      tr.appendChild(el("td", { cls: "num", text: r ? fmt(r.rf1) : "—" }));
      tr.appendChild(failureCell(r));
    });
    if (TWO) {
      var d = delta(it);
      tr.appendChild(el("td", { cls: "num", text: d == null ? "—" : (d > 0 ? "+" : "") + d.toFixed(3) }));
    }
    tr.appendChild(el("td", { cls: "preview", text: it.text.slice(0, 160) }));
    if (tr.classList && state.open[it.id]) tr.classList.add("open");
    return tr;
  }

  function renderBody() {
    var body = byId("item-body"), rows = [];
    var start = state.page * PAGE, end = Math.min(view.length, start + PAGE);
    for (var n = start; n < end; n++) {
      rows.push(renderRow(view[n]));
      if (state.open[ITEMS[view[n]].id]) rows.push(renderDetail(ITEMS[view[n]]));
    }
    if (!rows.length) rows.push(el("tr", null, [el("td", { colspan: String(COLUMNS.length), text: "no item matches" })]));
    body.replaceChildren.apply(body, rows);
    var pages = Math.max(1, Math.ceil(view.length / PAGE));
    byId("page-label").textContent = "page " + (state.page + 1) + " of " + pages;
    byId("prev").disabled = state.page === 0;
    byId("next").disabled = state.page >= pages - 1;
    byId("item-count").textContent = view.length === ITEMS.length
      ? ITEMS.length + " items"
      : view.length + " of " + ITEMS.length + " items";
    byId("item-count").setAttribute("data-shown", String(view.length));
    byId("item-count").setAttribute("data-total", String(ITEMS.length));
  }

  function toggle(id) {
    if (state.open[id]) delete state.open[id]; else state.open[id] = true;
    renderBody();
  }

  // ---- one item: highlighted text, objects, diff ---------------------------------------------
  function objectsOf(it, r) {
    var run = it.runs[r], gold = (run && run.gold) || it.gold, out = [];
    gold.forEach(function (g, j) {
      out.push({ id: "g" + j, side: "gold", o: g, st: run ? run.gst[j] : "missed" });
    });
    if (run) run.pred.forEach(function (p, j) { out.push({ id: "p" + j, side: "predicted", o: p, st: p.st }); });
    return out;
  }

  // Spans are Python offsets (code points); a JavaScript string counts UTF-16 units, so
  // after a character outside the BMP (an emoji) the two differ: map one to the other.
  function unitOffsets(text) {
    if (!/[\uD800-\uDFFF]/.test(text)) return null;
    var map = [], u = 0;
    for (var i = 0; i < text.length; ) {
      map.push(u);
      var c = text.charCodeAt(i), n = c >= 0xD800 && c <= 0xDBFF && i + 1 < text.length ? 2 : 1;
      i += n; u += n;
    }
    map.push(u);
    return map;
  }

  function highlight(text, objs) {
    var cuts = [0, text.length], spans = [], units = unitOffsets(text);
    function at(cp) { return units ? units[Math.max(0, Math.min(units.length - 1, cp))] : cp; }
    // sp: where the evidence is; mn: the object's names inside it. A piece of a long quote
    // outside every mention is marked lightly (class ev), the mention itself fully.
    objs.forEach(function (x) {
      [[x.o.sp, false], [x.o.mn, true]].forEach(function (list) {
        (list[0] || []).forEach(function (s) {
          var a = Math.max(0, Math.min(text.length, at(s[0]))), b = Math.max(a, Math.min(text.length, at(s[1])));
          if (b > a) { spans.push([a, b, x, list[1]]); cuts.push(a, b); }
        });
      });
    });
    cuts = cuts.filter(function (v, i, all) { return all.indexOf(v) === i; }).sort(function (a, b) { return a - b; });
    var box = el("div", { cls: "text" });
    for (var c = 0; c + 1 < cuts.length; c++) {
      var a = cuts[c], b = cuts[c + 1], piece = text.slice(a, b);
      var covering = spans.filter(function (s) { return s[0] <= a && s[1] >= b; });
      if (!covering.length) { box.appendChild(document.createTextNode(piece)); continue; }
      // quiet only when every object here has a mention elsewhere in its quote
      var mention = covering.some(function (s) { return s[3] || !(s[2].o.mn && s[2].o.mn.length); });
      var cover = covering.map(function (s) { return s[2]; }).filter(function (x, i, all) { return all.indexOf(x) === i; });
      var ids = [], classes = mention ? ["hl"] : ["hl", "ev"], titles = [];
      cover.forEach(function (x) {
        if (ids.indexOf(x.id) < 0) ids.push(x.id);
        if (classes.indexOf("st-" + x.st) < 0) classes.push("st-" + x.st);
        titles.push(x.side + " " + (x.o.k === "e" ? "entity" : "relationship") + " " + x.o.label + " [" + x.o.type + "]: " + x.st);
      });
      box.appendChild(el("mark", { cls: classes.join(" "), "data-o": ids.join(" "), title: titles.join("\n"), text: piece }));
    }
    return box;
  }

  function objectTable(objs, panel) {
    var head = el("tr", null, ["", "side", "kind", "object", "type", "status", "evidence", "located by"].map(function (t) { return el("th", { text: t }); }));
    var rows = objs.map(function (x) {
      var status = x.st + (x.o.cat && x.o.cat !== x.st ? " (" + x.o.cat + ")" : "");
      var tr = el("tr", { "data-obj": x.id }, [
        el("td", { text: x.id }),
        el("td", { text: x.side }),
        el("td", { text: x.o.k === "e" ? "entity" : "relationship" }),
        el("td", null, [el("span", { cls: "hl st-" + x.st, text: x.o.label })]),
        el("td", { text: x.o.type }),
        el("td", { text: status }),
        el("td", { cls: "quote", title: x.o.ev == null ? "" : x.o.ev, text: quote(x.o.ev) }),
        el("td", { text: x.o.via || (x.o.ev ? "not found" : "—") })
      ]);
      tr.addEventListener("mouseenter", function () { focusObj(panel, x.id, true); });
      tr.addEventListener("mouseleave", function () { focusObj(panel, x.id, false); });
      return tr;
    });
    return el("table", { cls: "objects" }, [el("thead", null, [head]), el("tbody", null, rows)]);
  }

  function quote(ev) {  // long quotes shortened in the list (the text shows them whole)
    if (ev == null) return "";
    return "“" + (ev.length > 60 ? ev.slice(0, 57) + "…" : ev) + "”";
  }

  function focusObj(panel, id, on) {
    panel.querySelectorAll("mark").forEach(function (m) {
      if ((" " + m.getAttribute("data-o") + " ").indexOf(" " + id + " ") >= 0) m.classList.toggle("focus", on);
    });
  }

  function diffBlock(it) {
    var a = it.runs[0], b = it.runs[1], box = el("div", { cls: "diff" });
    box.appendChild(el("h4", { text: "A → B" }));
    if (!a || !b) { box.appendChild(el("p", { text: "only one run has a result for this item" })); return box; }
    var lists = it.diff || {};
    Object.keys(lists).forEach(function (k) {
      var vals = lists[k];
      if (!vals || !vals.length) return;
      var p = el("p", { cls: k.replace(/ /g, "-"), "data-diff": k });
      p.appendChild(el("strong", { text: k + " (" + vals.length + "): " }));
      p.appendChild(document.createTextNode(vals.join("; ")));
      box.appendChild(p);
    });
    if (box.childNodes.length === 1) box.appendChild(el("p", { text: "nothing changed between A and B" }));
    return box;
  }

  function renderDetail(it) {
    var panels = el("div", { cls: "panels" });
    it.runs.forEach(function (run, r) {
      var panel = el("div", { cls: "panel", "data-run": String(r) });
      panel.appendChild(el("h4", { text: LETTERS[r] + ": " + RUNS[r].name }));
      if (run === null) { panel.appendChild(el("p", { cls: "error-box", text: "no result in this run" })); panels.appendChild(panel); return; }
      if (run.err) panel.appendChild(el("p", { cls: "error-box", text: (run.ek || "error") + ": " + run.err }));
      // only an http(s) URL becomes a link: a javascript: one would run on click
      if (run.url && /^https?:\/\//i.test(run.url)) panel.appendChild(el("p", null, [el("a", { href: run.url, rel: "noopener noreferrer", text: "trace" })]));
      var objs = objectsOf(it, r);
      panel.appendChild(highlight(run.text != null ? run.text : it.text, objs));
      panel.appendChild(objs.length ? objectTable(objs, panel)
        : el("p", { cls: "note", text: "no object in the gold, none predicted" }));
      panels.appendChild(panel);
    });
    var cell = el("td", { colspan: String(COLUMNS.length) }, [panels]);
    if (TWO) cell.appendChild(diffBlock(it));
    return el("tr", { cls: "detail", "data-detail": it.id }, [cell]);
  }

  // ---- wiring --------------------------------------------------------------------------------
  function refresh() { applyView(); renderHead(); renderBody(); }
  fillSelect("f-category", D.categories);
  fillSelect("f-type", D.types);
  byId("f-q").addEventListener("input", function (e) { state.q = e.target.value; state.page = 0; refresh(); });
  byId("f-failing").addEventListener("change", function (e) { state.failing = e.target.checked; state.page = 0; refresh(); });
  byId("f-category").addEventListener("change", function (e) { state.category = e.target.value; state.page = 0; refresh(); });
  byId("f-type").addEventListener("change", function (e) { state.type = e.target.value; state.page = 0; refresh(); });
  if (byId("f-changed")) byId("f-changed").addEventListener("change", function (e) { state.changed = e.target.checked; state.page = 0; refresh(); });
  byId("prev").addEventListener("click", function () { state.page -= 1; renderBody(); });
  byId("next").addEventListener("click", function () { state.page += 1; renderBody(); });
  refresh();
  document.body.setAttribute("data-ready", "true");
})();

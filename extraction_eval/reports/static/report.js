// extraction-eval report: the item table (filter, sort, page) and the per-item highlight.
// Every piece of data is put into the page with textContent / attributes, never as HTML.
// The item table is columns (T: one array per field, one value per item); an item's details
// (objects, spans, diff) are in compressed chunks, decoded when the item is first expanded.
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("report-data").textContent);
  var T = JSON.parse(document.getElementById("report-table").textContent);
  var RUNS = D.runs, N = T.id.length, TWO = RUNS.length === 2, PAGE = 50, CHUNK = D.chunk;
  var chunks = {}, details = {};
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
  // run r of item i: st 0 = no result, 1 = ok, 2 = errored; cats = [category index, count, ...]
  function failing(i) {
    return T.runs.some(function (c) { return c.st[i] !== 1 || c.cats[i].length > 0; });
  }
  function hasCategory(i, cat) {
    return T.runs.some(function (c) {
      var f = c.cats[i];
      for (var j = 0; j < f.length; j += 2) if (f[j] === cat) return true;
      return false;
    });
  }
  function delta(i) {
    if (!TWO) return null;
    var a = T.runs[0].ef1[i], b = T.runs[1].ef1[i];
    return T.runs[0].st[i] && T.runs[1].st[i] && a != null && b != null ? b - a : null;
  }
  function problems(c, i) {
    if (!c.st[i]) return Infinity;
    var n = c.st[i] === 2 ? 1000 : 0, f = c.cats[i];
    for (var j = 1; j < f.length; j += 2) n += f[j];
    return n;
  }
  var SORTS = {
    index: function (i) { return i; },
    id: function (i) { return T.id[i]; },
    delta: delta
  };
  T.runs.forEach(function (c, r) {
    SORTS["ef1:" + r] = function (i) { return c.st[i] ? c.ef1[i] : null; };
    SORTS["rf1:" + r] = function (i) { return c.st[i] ? c.rf1[i] : null; };
    SORTS["fail:" + r] = function (i) { return problems(c, i); };
  });
  var lowered = null;  // lower-cased texts, made on the first search

  function applyView() {
    var q = state.q.toLowerCase(), out = [];
    var cat = state.category ? D.categories.indexOf(state.category) : -1;
    var type = state.type ? D.types.indexOf(state.type) : -1;
    if (q && !lowered) lowered = T.text.map(function (t) { return t.toLowerCase(); });
    for (var i = 0; i < N; i++) {
      if (state.failing && !failing(i)) continue;
      if (state.category && !hasCategory(i, cat)) continue;
      if (state.type && T.types[i].indexOf(type) < 0) continue;
      if (state.changed && !(T.chg && T.chg[i])) continue;
      if (q && T.id[i].toLowerCase().indexOf(q) < 0 && lowered[i].indexOf(q) < 0) continue;
      out.push(i);
    }
    var key = SORTS[state.sort], dir = state.dir;
    if (state.sort !== "index" || dir !== 1) {
      var keys = {};
      out.forEach(function (i) { keys[i] = key(i); });
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
    COLUMNS.push({ key: "fail:" + r, title: L + " mistakes" });
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

  function failureCell(c, i) {
    var td = el("td", { cls: "failures" });
    if (!c.st[i]) { td.appendChild(el("span", { cls: "err", text: "no result" })); return td; }
    if (c.st[i] === 2) td.appendChild(el("span", { cls: "cat err", title: c.err[i] || "", text: "error: " + (c.ek[i] || "") }));
    var f = c.cats[i], cats = [];
    for (var j = 0; j < f.length; j += 2) cats.push([D.categories[f[j]], f[j + 1]]);
    cats.sort(function (x, y) { return x[0] < y[0] ? -1 : 1; }).forEach(function (x) {
      td.appendChild(el("span", { cls: "cat", "data-category": x[0], text: x[0] + " " + x[1] }));
    });
    return td;
  }

  function renderRow(i) {
    var id = T.id[i];
    var tr = el("tr", { cls: "item-row", "data-item": id });
    var btn = el("button", { cls: "expand", type: "button", "aria-expanded": String(!!state.open[i]),
      title: "show the text with highlighted evidence", text: state.open[i] ? "▾" : "▸" });
    btn.addEventListener("click", function () { toggle(i); });
    tr.appendChild(el("td", null, [btn]));
    tr.appendChild(el("td", { cls: "id", text: id }));
    T.runs.forEach(function (c) {
      tr.appendChild(el("td", { cls: "num", text: c.st[i] ? fmt(c.ef1[i]) : "—" }));
      tr.appendChild(el("td", { cls: "num", text: c.st[i] ? fmt(c.rf1[i]) : "—" }));
      tr.appendChild(failureCell(c, i));
    });
    if (TWO) {
      var d = delta(i);
      tr.appendChild(el("td", { cls: "num", text: d == null ? "—" : (d > 0 ? "+" : "") + d.toFixed(3) }));
    }
    tr.appendChild(el("td", { cls: "preview", text: T.text[i].slice(0, 160) }));
    if (tr.classList && state.open[i]) tr.classList.add("open");
    return tr;
  }

  function renderBody() {
    var body = byId("item-body"), rows = [];
    var start = state.page * PAGE, end = Math.min(view.length, start + PAGE);
    for (var n = start; n < end; n++) {
      var i = view[n];
      rows.push(renderRow(i));
      if (state.open[i]) {
        if (details[i]) rows.push(renderDetail(i, details[i]));
        else load(i);
      }
    }
    if (!rows.length) rows.push(el("tr", null, [el("td", { colspan: String(COLUMNS.length), text: "no item matches" })]));
    body.replaceChildren.apply(body, rows);
    var pages = Math.max(1, Math.ceil(view.length / PAGE));
    byId("page-label").textContent = "page " + (state.page + 1) + " of " + pages;
    byId("prev").disabled = state.page === 0;
    byId("next").disabled = state.page >= pages - 1;
    byId("item-count").textContent = view.length === N
      ? N + " items"
      : view.length + " of " + N + " items";
    byId("item-count").setAttribute("data-shown", String(view.length));
    byId("item-count").setAttribute("data-total", String(N));
  }

  function toggle(i) {
    if (state.open[i]) delete state.open[i]; else state.open[i] = true;
    renderBody();
  }

  // ---- details: one compressed chunk (base64 of zlib JSON) decoded on first use ---------------
  function chunk(c) {
    if (!chunks[c]) {
      var bin = atob(byId("chunk-" + c).textContent), bytes = new Uint8Array(bin.length);
      for (var k = 0; k < bin.length; k++) bytes[k] = bin.charCodeAt(k);
      var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
      chunks[c] = new Response(stream).text().then(JSON.parse);
    }
    return chunks[c];
  }

  function load(i) {
    var c = Math.floor(i / CHUNK);
    chunk(c).then(function (list) {
      list.forEach(function (d, k) { details[c * CHUNK + k] = d; });
      renderBody();
    }, function (e) {
      byId("item-count").setAttribute("data-error", String(e));
      console.error("cannot read the details of item " + T.id[i] + ": " + e);
    });
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

  // the item's judged matches (--judge): not string matches; each with who settled it and why
  function judgedBlock(run, id) {
    var found = run && run.items ? run.items[id] : null;
    if (!found || !found.length) return null;
    var head = el("tr", null, ["kind", "prediction", "", "gold", "source", "reason"].map(function (t) { return el("th", { text: t }); }));
    var rows = found.map(function (m) {
      return el("tr", { cls: "judged-match" }, [m.kind, m.pred_name, "≈", m.gold_name, m.source, m.reason].map(function (v) {
        return el("td", { text: v == null ? "" : String(v) });
      }));
    });
    return el("div", { cls: "judged" }, [
      el("h5", { text: "judged matches by " + run.judge + " (not string matches)" }),
      el("table", { cls: "objects" }, [el("thead", null, [head]), el("tbody", null, rows)])
    ]);
  }

  function renderDetail(i, it) {
    var panels = el("div", { cls: "panels" });
    it.runs.forEach(function (run, r) {
      var panel = el("div", { cls: "panel", "data-run": String(r) });
      panel.appendChild(el("h4", { text: LETTERS[r] + ": " + RUNS[r].name }));
      if (run === null) { panel.appendChild(el("p", { cls: "error-box", text: "no result in this run" })); panels.appendChild(panel); return; }
      if (run.err) panel.appendChild(el("p", { cls: "error-box", text: (run.ek || "error") + ": " + run.err }));
      if (run.rep) panel.appendChild(el("p", { cls: "note repairs", text: "answer repaired: " + run.rep.join(", ") }));
      // the model's raw reply (failed or repaired items), as text: never markup
      if (run.raw != null) panel.appendChild(el("details", { cls: "raw-reply" }, [el("summary", { text: "raw reply" }), el("pre", { text: run.raw })]));
      // only an http(s) URL becomes a link: a javascript: one would run on click
      if (run.url && /^https?:\/\//i.test(run.url)) panel.appendChild(el("p", null, [el("a", { href: run.url, rel: "noopener noreferrer", text: "trace" })]));
      var objs = objectsOf(it, r);
      panel.appendChild(highlight(run.text != null ? run.text : T.text[i], objs));
      panel.appendChild(objs.length ? objectTable(objs, panel)
        : el("p", { cls: "note", text: "no object in the gold, none predicted" }));
      var judged = judgedBlock((D.judged || [])[r], T.id[i]);
      if (judged) panel.appendChild(judged);
      panels.appendChild(panel);
    });
    var cell = el("td", { colspan: String(COLUMNS.length) }, [panels]);
    if (TWO) cell.appendChild(diffBlock(it));
    return el("tr", { cls: "detail", "data-detail": T.id[i] }, [cell]);
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

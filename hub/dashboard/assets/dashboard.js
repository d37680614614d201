// Filters and self-refresh for the fleet page; no framework, no build.
(function () {
  "use strict";
  var form = document.getElementById("filters");
  var region = document.getElementById("fleet");
  var note = document.getElementById("refresh");
  var count = document.getElementById("f-count");

  function applyFilters() {
    var fleet = form.elements.fleet.value;
    var state = form.elements.state.value;
    var label = form.elements.label.value.trim();
    var rows = region.querySelectorAll("tbody.cluster");
    var shown = 0;
    for (var i = 0; i < rows.length; i++) {
      var d = rows[i].dataset;
      var ok = (!fleet || d.fleets.indexOf(" " + fleet + " ") >= 0) &&
        (!state || d.state === state) &&
        (!label || d.labels.indexOf(label.indexOf("=") >= 0 ? " " + label + " " : " " + label + "=") >= 0);
      rows[i].hidden = !ok;
      if (ok) shown++;
    }
    count.textContent = shown + " of " + rows.length + " clusters shown";
  }

  // The units of clusters whose units are all Ready come as data, drawn
  // into the same table the server draws for the others when opened.
  function el(tag, text, attrs) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== "") e.textContent = String(text);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    return e;
  }
  var quiet = null; // the parsed #quiet-units of the region's content
  function drawUnits(details) {
    var p = details.querySelector("p.quiet");
    if (!details.open || !p) return;
    if (!quiet) quiet = JSON.parse((document.getElementById("quiet-units") || {}).textContent || "null") || {};
    var units = quiet[p.dataset.cluster];
    if (!units) return;
    var applied = details.closest("tbody.cluster").querySelector("td.applied a, td.applied code");
    var table = el("table", "", { "class": "units" });
    table.appendChild(el("caption", "Units of " + p.dataset.cluster));
    var head = el("tr");
    ["Unit", "Revision", "Health", "Last error", "Objects", "Drift corrections"].forEach(function (h) {
      head.appendChild(el("th", h, { scope: "col" }));
    });
    table.appendChild(el("thead")).appendChild(head);
    var body = table.appendChild(el("tbody"));
    units.forEach(function (u) {
      var tr = el("tr", "", { "data-unit": u[0] });
      tr.appendChild(el("th", u[0], { scope: "row" }));
      var rev = el("td");
      if (u[1]) {
        var code = el("code", u[1]);
        if (u[2]) { var a = el("a", "", { href: u[2] }); a.appendChild(code); code = a; }
        rev.appendChild(code);
      } else if (applied) {
        rev.appendChild(applied.cloneNode(true));
      }
      tr.appendChild(rev);
      tr.appendChild(el("td")).appendChild(el("span", "Ready", { "class": "state st-Ready" }));
      tr.appendChild(el("td", "", { "class": "lasterror" }));
      tr.appendChild(el("td", u[3]));
      tr.appendChild(el("td", u[4]));
      body.appendChild(tr);
    });
    p.replaceWith(table);
  }
  // toggle does not bubble: listen while it goes down.
  region.addEventListener("toggle", function (e) {
    if (e.target.tagName === "DETAILS") drawUnits(e.target);
  }, true);

  form.addEventListener("input", applyFilters);
  form.addEventListener("change", applyFilters);
  applyFilters();

  var url = note.dataset.fragment;
  var interval = parseInt(note.dataset.interval, 10);
  if (!url || !(interval > 0)) return;

  function refresh() {
    // Keep what the reader opened or closed across the swap.
    var open = {};
    region.querySelectorAll("details[data-key]").forEach(function (d) { open[d.dataset.key] = d.open; });
    var ctl = new AbortController();
    var timer = setTimeout(function () { ctl.abort(); }, Math.max(interval * 1000, 5000));
    fetch(url, { cache: "no-store", signal: ctl.signal }).then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      return r.text();
    }).then(function (html) {
      region.setAttribute("aria-busy", "true");
      region.innerHTML = html;
      quiet = null;
      region.querySelectorAll("details[data-key]").forEach(function (d) {
        if (d.dataset.key in open) d.open = open[d.dataset.key];
      });
      applyFilters();
      region.setAttribute("aria-busy", "false");
      note.textContent = "Refreshes every " + interval + "s; last refreshed " + new Date().toLocaleTimeString() + ".";
    }).catch(function (e) {
      note.textContent = "Refresh failed (" + e.message + "); retrying in " + interval + "s.";
    }).finally(function () {
      clearTimeout(timer);
      setTimeout(refresh, interval * 1000);
    });
  }
  setTimeout(refresh, interval * 1000);
})();

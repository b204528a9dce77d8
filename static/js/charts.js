// Service page: success rate, p95 latency and request volume per version (uPlot), history
// from the metrics API on load and on a new range, then live from /ws/live/ `metrics`
// messages, with policy revisions, instance events and release decisions marked on the time
// axis.
//
// What the charts show is also on their elements, for tests and for people with screen
// readers: #chart-success[data-last] holds each version's newest plotted point
// ({"V1": {"ts": ..., "value": ...}}), #traffic[data-markers] the markers.
(function () {
  "use strict";
  var card = document.getElementById("traffic");
  if (!card || !window.uPlot || !window.graylaneChartMarkers) return;
  var service = card.dataset.service;
  // Below these many requests a point is a gap, and a version "not enough data": a
  // success rate of 100 % over three requests says nothing.
  var MIN_POINT_REQUESTS = Number(card.dataset.minPointRequests || 10);
  var MIN_REQUESTS = Number(card.dataset.minRequests || 50);
  var STATUS_WINDOW = "5m";
  var COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2"];
  var MARKER_STYLES = {
    revision: { color: "#7c3aed" },
    instance: { color: "#b45309", dash: [2, 2] },
    release: { color: "#0f766e" },
  };
  // {"kinds": [release event kinds drawn], "markers": [{ts, label}]}, from the page.
  var releaseIsland = document.getElementById("release-markers");
  var releaseMarkers = releaseIsland ? JSON.parse(releaseIsland.textContent) : { kinds: [], markers: [] };

  var range = 900;
  // version -> {ts: {rate, p95, perSecond, total}}; history points per step, live per second.
  var points = {};
  var live = {}; // version -> the newest metrics message
  var loaded = {}; // version -> {total, ok} of the last 5 minutes in the history loaded
  var markers = [];
  var charts = {};
  var statusList = document.getElementById("version-status");
  var markerInfo = document.getElementById("marker-info");

  function now() { return Math.floor(Date.now() / 1000); }
  function stepFor(seconds) { return seconds <= 3600 ? 60 : seconds <= 21600 ? 300 : 900; }
  function api(path) {
    return fetch(path, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; });
  }
  function point(version, ts) {
    var series = (points[version] = points[version] || {});
    return (series[ts] = series[ts] || {});
  }

  function loadHistory() {
    var step = stepFor(range);
    var since = now() - range;
    var query = "?service=" + encodeURIComponent(service) + "&since=" + since + "&step=" + step;
    points = {};
    return Promise.all([
      api("/api/v1/metrics/success-rate/" + query),
      api("/api/v1/metrics/latency/" + query),
      loadMarkers(since),
    ]).then(function (answers) {
      var rates = answers[0], latencies = answers[1];
      loaded = {};
      if (rates) Object.keys(rates.series).forEach(function (version) {
        var last5 = (loaded[version] = { total: 0, ok: 0 });
        rates.series[version].forEach(function (p) {
          var at = point(version, p[0]);
          at.rate = p[1]; at.total = p[2]; at.perSecond = p[2] / step;
          if (p[0] >= now() - 300) { last5.total += p[2]; last5.ok += p[2] * p[1] / 100; }
        });
      });
      if (latencies) Object.keys(latencies.series).forEach(function (version) {
        latencies.series[version].forEach(function (p) { point(version, p[0]).p95 = p[1]; });
      });
      render();
    });
  }

  function loadMarkers(since) {
    var iso = new Date(since * 1000).toISOString();
    markers = markers.filter(function (m) { return m.live && m.ts >= since; });
    return Promise.all([
      api("/api/v1/revisions/?page_size=200"),
      api("/api/v1/audit/?page_size=200&since=" + encodeURIComponent(iso)),
    ]).then(function (answers) {
      releaseMarkers.markers.forEach(function (m) { addMarker(m.ts, "release", m.label, false); });
      if (answers[0]) answers[0].results.forEach(function (revision) {
        if (Date.parse(revision.created_at) / 1000 < since) return;
        addRevision(revision);
        // The list has no diff; the detail says what changed, for the marker's label.
        api("/api/v1/revisions/" + revision.revision + "/").then(function (detail) {
          if (detail) { addRevision(detail); render(); }
        });
      });
      if (answers[1]) answers[1].results.forEach(function (entry) {
        if (entry.action.indexOf("instance.") === 0 && String(entry.object).indexOf(service) !== -1) {
          addMarker(Date.parse(entry.at) / 1000, "instance", entry.action + " " + entry.object + " by " + entry.actor, false);
        }
      });
    });
  }

  function changes(diff) {
    return (diff || []).map(function (change) {
      if (change.added !== undefined) {
        return change.field + " +" + change.added.length + " −" + change.removed.length;
      }
      return change.field + ": " + JSON.stringify(change.before) + " → " + JSON.stringify(change.after);
    }).join("; ").substring(0, 300);
  }

  // One marker per revision; a later call with its diff completes the label.
  function addRevision(revision) {
    var key = "revision " + revision.revision;
    var label = key + (revision.comment ? ": " + revision.comment : "") +
      (revision.author ? " (" + revision.author + ")" : "") +
      (revision.diff && revision.diff.length ? " — " + changes(revision.diff) : "");
    markers = markers.filter(function (m) { return m.key !== key || label.length < m.label.length; });
    if (!markers.some(function (m) { return m.key === key; })) {
      addMarker(Date.parse(revision.created_at) / 1000, "revision", label, false, key);
    }
  }

  function addMarker(ts, kind, label, isLive, key) {
    if (ts < now() - range) return;
    key = key || kind + " " + label;
    if (!markers.some(function (m) { return m.key === key; })) {
      markers.push({ ts: ts, kind: kind, label: label, live: isLive, key: key });
    }
  }

  function versions() { return Object.keys(points).sort(); }

  function aligned(field) {
    var all = {};
    var names = versions();
    names.forEach(function (v) { Object.keys(points[v]).forEach(function (ts) { all[ts] = true; }); });
    var xs = Object.keys(all).map(Number).sort(function (a, b) { return a - b; });
    var data = [xs];
    names.forEach(function (v) {
      data.push(xs.map(function (ts) {
        var p = points[v][ts];
        if (!p || p.total === undefined || p.total < MIN_POINT_REQUESTS) return null;
        return p[field] === undefined ? null : p[field];
      }));
    });
    return data;
  }

  function currentMarkers() { return markers; }
  var drawMarkers = window.graylaneChartMarkers.draw(currentMarkers, MARKER_STYLES);
  var showMarkerNear = window.graylaneChartMarkers.near(currentMarkers, markerInfo);

  function chart(id, title, field, unit) {
    var element = document.getElementById(id);
    var data = aligned(field);
    var names = versions();
    var existing = charts[id];
    var same = existing && existing.names.join() === names.join();
    if (same) {
      existing.plot.setData(data);
      existing.plot.setScale("x", { min: now() - range, max: now() });
    } else {
      if (existing) existing.plot.destroy();
      var series = [{}].concat(names.map(function (v, i) {
        return { label: v, stroke: COLORS[i % COLORS.length], width: 2, spanGaps: false,
                 value: function (u, value) { return value == null ? "—" : value.toFixed(2) + unit; } };
      }));
      var plot = new uPlot({
        title: title,
        width: Math.max(element.clientWidth, 300),
        height: 180,
        series: series,
        scales: { x: { time: true, range: function () { return [now() - range, now()]; } } },
        axes: [{}, { size: 60 }],
        hooks: { draw: [drawMarkers], setCursor: [showMarkerNear] },
      }, data, element);
      charts[id] = { plot: plot, names: names };
    }
    var last = {};
    names.forEach(function (v, i) {
      var ys = data[i + 1];
      for (var k = ys.length - 1; k >= 0; k--) {
        if (ys[k] != null) { last[v] = { ts: data[0][k], value: ys[k] }; break; }
      }
    });
    element.dataset.last = JSON.stringify(last);
  }

  // A version's headline: the newest live message's figures, those the chart's newest
  // point plots (its 10 s window: `now`) and its 5 minutes. The server sends them every
  // second while a version has requests in its 5 minutes, so once they stop for 10 s it
  // has none. Before the first message: the 5 minutes of the history loaded, and no `now`.
  function statusOf(version) {
    var message = live[version];
    if (message && message.ts < now() - 10) return { total: 0, rate: null, now: null };
    if (message) {
      var w = message.windows[STATUS_WINDOW];
      return {
        total: w.total, rate: w.success_rate,
        now: message.total >= MIN_POINT_REQUESTS ? message.success_rate : null,
      };
    }
    var history = loaded[version] || { total: 0, ok: 0 };
    return { total: history.total, rate: history.total ? 100 * history.ok / history.total : null, now: null };
  }

  function renderStatus() {
    statusList.textContent = "";
    versions().forEach(function (v) {
      var status = statusOf(v);
      var item = document.createElement("li");
      item.dataset.version = v;
      item.dataset.now = status.now == null ? "" : String(status.now);
      var now = status.now == null ? "" : status.now.toFixed(2) + " % now · ";
      if (status.total < MIN_REQUESTS) {
        item.dataset.state = "insufficient";
        item.textContent = v + ": " + now + "not enough data (" + status.total + " requests in 5 min)";
      } else {
        item.dataset.state = "ok";
        item.textContent = v + ": " + now + status.rate.toFixed(2) + " % of " + status.total + " requests in 5 min";
      }
      statusList.appendChild(item);
    });
  }

  function prune() {
    var oldest = now() - range;
    Object.keys(points).forEach(function (v) {
      Object.keys(points[v]).forEach(function (ts) { if (Number(ts) < oldest) delete points[v][ts]; });
    });
    markers = markers.filter(function (m) { return m.ts >= oldest; });
  }

  var pending = false;
  function render() {
    if (pending) return;
    pending = true;
    window.requestAnimationFrame(function () {
      pending = false;
      prune();
      chart("chart-success", "Success rate", "rate", " %");
      chart("chart-latency", "p95 latency", "p95", " ms");
      chart("chart-volume", "Requests per second", "perSecond", "/s");
      renderStatus();
      card.dataset.markers = JSON.stringify(markers.map(function (m) {
        return { ts: m.ts, kind: m.kind, label: m.label };
      }));
    });
  }

  window.graylaneLive.on("metrics", function (message) {
    if (message.service !== service) return;
    live[message.version] = message;
    var at = point(message.version, message.ts);
    at.rate = message.success_rate == null ? undefined : message.success_rate;
    at.p95 = message.latency_ms_p95 == null ? undefined : message.latency_ms_p95;
    at.total = message.total;
    at.perSecond = message.rate_per_s;
    render();
  });
  window.graylaneLive.on("revision", function (revision) { addRevision(revision); render(); });
  window.graylaneLive.on("instance", function (event) {
    if (event.service !== service) return;
    addMarker(now(), "instance", event.host + ":" + event.port + " (" + (event.version || "no version") + ") " + event.state, true);
    render();
  });
  window.graylaneLive.on("release", function (message) {
    var release = message.release, event = message.event;
    if (release.service !== service || releaseMarkers.kinds.indexOf(event.kind) === -1) return;
    addMarker(Date.parse(event.at) / 1000, "release", "release " + release.id + " " +
      release.to_version + ": " + event.kind + " (step " + (event.step + 1) + ")", true);
    render();
  });
  window.graylaneLive.on("open", loadHistory);
  window.graylaneLive.subscribe([service]);

  document.querySelectorAll("[data-range]").forEach(function (button) {
    button.addEventListener("click", function () {
      range = Number(button.dataset.range);
      document.querySelectorAll("[data-range]").forEach(function (b) {
        b.classList.toggle("active", b === button);
        b.setAttribute("aria-pressed", b === button ? "true" : "false");
      });
      loadHistory();
    });
  });
  // Messages stop when a version has had no requests for 5 minutes: the headline says so
  // without one.
  setInterval(renderStatus, 2000);
  window.addEventListener("resize", function () {
    Object.keys(charts).forEach(function (id) {
      charts[id].plot.setSize({ width: Math.max(document.getElementById(id).clientWidth, 300), height: 180 });
    });
  });
  loadHistory();
})();

// Release page: prod and gray success rate and p95 over the release's span (uPlot, as the
// service page draws them), with its decisions (started, advanced, paused, ...) marked on
// the time axis. The figures are the page's (#release-chart, from the per-minute rollups).
//
// What is drawn is also on the elements, for tests and screen readers: each chart's
// [data-series] ({"prod V1": points drawn, "gray V2": ...}), #release-chart-card[data-markers].
(function () {
  "use strict";
  var island = document.getElementById("release-chart");
  var card = document.getElementById("release-chart-card");
  if (!island || !card || !window.uPlot || !window.graylaneChartMarkers) return;
  var found = JSON.parse(island.textContent);
  var LINES = [
    { version: found.from_version, label: "prod " + found.from_version, stroke: "#24439a" },
    { version: found.to_version, label: "gray " + found.to_version, stroke: "#6b46c1" },
  ];
  var GO = { color: "#1f8a4c" }, HOLD = { color: "#b7791f" }, BACK = { color: "#c53030" };
  var MARKER_STYLES = {
    started: GO, advanced: GO, resumed: GO, promoted: { color: "#2f5bd3", dash: [] },
    paused: HOLD, insufficient_data: HOLD, rolled_back: BACK, aborted: BACK, failed: BACK,
  };
  function markers() { return found.markers; }
  var info = document.getElementById("release-marker-info");
  var drawMarkers = window.graylaneChartMarkers.draw(markers, MARKER_STYLES);
  var showMarkerNear = window.graylaneChartMarkers.near(markers, info);

  // [xs, prod ys, gray ys] over the union of both versions' steps.
  function aligned(series) {
    var byVersion = LINES.map(function (line) {
      var at = {};
      (series[line.version] || []).forEach(function (p) { at[p[0]] = p[1]; });
      return at;
    });
    var all = {};
    byVersion.forEach(function (at) { Object.keys(at).forEach(function (ts) { all[ts] = true; }); });
    var xs = Object.keys(all).map(Number).sort(function (a, b) { return a - b; });
    return [xs].concat(byVersion.map(function (at) {
      return xs.map(function (ts) { return at[ts] === undefined ? null : at[ts]; });
    }));
  }

  function chart(id, title, series, unit) {
    var element = document.getElementById(id);
    var data = aligned(series);
    // The first step starts at or before the release did (steps are whole minutes and up).
    var first = Math.min(found.start, data[0].length ? data[0][0] : found.start);
    new uPlot({
      title: title,
      width: Math.max(element.clientWidth, 300),
      height: 180,
      series: [{}].concat(LINES.map(function (line) {
        return { label: line.label, stroke: line.stroke, width: 2, spanGaps: false,
                 points: { show: true },
                 value: function (u, value) { return value == null ? "—" : value.toFixed(2) + unit; } };
      })),
      scales: { x: { time: true, range: function () { return [first, found.end + found.step]; } } },
      axes: [{}, { size: 60 }],
      hooks: { draw: [drawMarkers], setCursor: [showMarkerNear] },
    }, data, element);
    var drawn = {};
    LINES.forEach(function (line, i) {
      drawn[line.label] = data[i + 1].filter(function (y) { return y != null; }).length;
    });
    element.dataset.series = JSON.stringify(drawn);
  }

  chart("release-chart-success", "Success rate", found.success_rate, " %");
  chart("release-chart-latency", "p95 latency", found.latency, " ms");
  card.dataset.markers = JSON.stringify(found.markers.map(function (m) {
    return { ts: m.ts, kind: m.kind, label: m.label };
  }));
})();

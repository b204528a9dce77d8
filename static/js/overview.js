// Service tables: per version, one line: a sparkline of the live success rate (10 s
// windows, the last 60 updates), the success rate over the last minute ("—" below
// data-min-requests requests) and its request count; then the gray-vs-prod delta, from
// /ws/live/. The lines read as templates/dashboard/_minute_health.html renders them.
(function () {
  "use strict";
  var table = document.getElementById("service-table");
  if (!table || !window.graylaneLive || !window.graylaneNumbers) return;
  var numbers = window.graylaneNumbers;
  var MIN_REQUESTS = Number(table.dataset.minRequests || 50);
  var KEEP = 60;
  var SVG = "http://www.w3.org/2000/svg";
  var history = {}; // service -> version -> [success rate or null]
  var latest = {}; // service -> version -> metrics message

  function rows(service) {
    return Array.prototype.filter.call(table.querySelectorAll("tr[data-service]"), function (row) {
      return row.dataset.service === service;
    });
  }

  function sparkline(values) {
    var svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("class", "sparkline");
    svg.setAttribute("width", "60");
    svg.setAttribute("height", "16");
    svg.setAttribute("viewBox", "0 0 60 16");
    var path = "";
    values.forEach(function (value, i) {
      if (value == null) return;
      var x = (i / Math.max(KEEP - 1, 1)) * 60;
      var y = 15 - (Math.max(value - 50, 0) / 50) * 14; // 50 %..100 %
      path += (path && values[i - 1] != null ? "L" : "M") + x.toFixed(1) + " " + y.toFixed(1);
    });
    var line = document.createElementNS(SVG, "path");
    line.setAttribute("d", path);
    line.setAttribute("fill", "none");
    line.setAttribute("stroke", "currentColor");
    svg.appendChild(line);
    return svg;
  }

  function requests(message) {
    return message ? message.windows["1m"].total : 0;
  }

  function minute(message) {
    return requests(message) >= MIN_REQUESTS ? message.windows["1m"].success_rate : null;
  }

  function render(service) {
    var versions = latest[service] || {};
    rows(service).forEach(function (row) {
      var cell = row.querySelector('[data-field="health"]');
      cell.textContent = "";
      [row.dataset.prod, row.dataset.gray].forEach(function (version, i) {
        if (i === 1 && version === row.dataset.prod) return;
        var item = document.createElement("span");
        item.className = "version-health";
        item.dataset.version = version;
        var rate = minute(versions[version]);
        item.appendChild(document.createTextNode(version));
        if (history[service] && history[service][version]) {
          item.appendChild(document.createTextNode(" "));
          item.appendChild(sparkline(history[service][version]));
        }
        var count = requests(versions[version]);
        item.appendChild(document.createTextNode(" " + (rate == null ? "—" : numbers.rate(rate)) +
          ", " + count + " request" + (count === 1 ? "" : "s")));
        cell.appendChild(item);
      });
      var prod = minute(versions[row.dataset.prod]);
      var gray = minute(versions[row.dataset.gray]);
      if (row.dataset.gray !== row.dataset.prod && prod != null && gray != null) {
        var delta = document.createElement("span");
        var difference = gray - prod;
        delta.className = "overview-delta" + (difference < -1 ? " worse" : "");
        delta.dataset.delta = difference.toFixed(4);
        delta.textContent = "gray " + numbers.points(difference);
        cell.appendChild(delta);
      }
    });
  }

  window.graylaneLive.on("metrics", function (message) {
    var versions = (latest[message.service] = latest[message.service] || {});
    versions[message.version] = message;
    var series = (history[message.service] = history[message.service] || {});
    var values = (series[message.version] = series[message.version] || []);
    values.push(message.total >= 10 ? message.success_rate : null);
    if (values.length > KEEP) values.shift();
    render(message.service);
  });
  window.graylaneLive.subscribe(["*"]);
})();

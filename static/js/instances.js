// Service page: instance rows follow `instance` events from the live websocket, and their
// traffic the service's `metrics` messages.
(function () {
  "use strict";
  var table = document.getElementById("instances");
  if (!table || !window.graylaneLive) return;
  var service = table.dataset.service;

  function time(iso) {
    return iso ? new Date(iso).toISOString().substring(11, 19) : "—";
  }

  // As the server renders a float (Python's str): 1 → "1.0", 0.5 → "0.5".
  function weight(value) {
    return Number.isInteger(value) ? value.toFixed(1) : String(value);
  }

  function show(event) {
    var row = table.querySelector('tr[data-instance-id="' + event.id + '"]');
    if (!row) { window.location.reload(); return; }
    var state = row.querySelector('[data-field="state"]');
    state.textContent = event.state;
    state.className = "state state-" + event.state.toLowerCase();
    row.querySelector('[data-field="note"]').textContent = event.note || "";
    row.querySelector('[data-field="healthy"]').innerHTML = event.healthy ? "healthy" : '<span class="bad">unhealthy</span>';
    row.querySelector('[data-field="weight"]').textContent = weight(event.weight);
    row.querySelector('[data-field="last_seen"]').textContent = time(event.last_seen);
    row.querySelectorAll("form[data-show]").forEach(function (form) {
      form.hidden = (form.dataset.show === "offline") !== Boolean(event.offline_intent);
    });
    // The flash of the Take offline that drained it is over once the drain is.
    var drained = document.querySelector('.flash[data-about="draining-' + event.id + '"]');
    if (drained && event.state === "OFFLINE") {
      drained.textContent = event.host + ":" + event.port + " is offline: out of traffic.";
    }
  }

  window.graylaneLive.on("instance", function (event) {
    if (event.service === service) show(event);
  });
  window.graylaneLive.on("open", function () {
    var url = "/api/v1/services/" + encodeURIComponent(service) + "/instances/?page_size=500";
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (body) { if (body) body.results.forEach(show); });
  });
  window.graylaneLive.on("registry", function () { window.location.reload(); });

  // Each instance's traffic of the last minute (the cells as the server renders them),
  // fetched again while the service's figures come in, every 5 s at most.
  var trafficAt = 0;
  window.graylaneLive.on("metrics", function (message) {
    if (message.service !== service || Date.now() - trafficAt < 5000) return;
    trafficAt = Date.now();
    fetch(table.dataset.trafficUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (body) {
        if (!body) return;
        Object.keys(body.cells).forEach(function (id) {
          var cell = table.querySelector('tr[data-instance-id="' + id + '"] [data-field="traffic"]');
          if (cell) cell.innerHTML = body.cells[id];
        });
      });
  });
})();

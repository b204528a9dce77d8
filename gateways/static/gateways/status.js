// Live updates of the gateways page from `gateway` events (static/js/app.js connects).
(function () {
  "use strict";
  var badges = JSON.parse(document.getElementById("gateway-badges").textContent);

  function shown(field, value) {
    if (field === "last_seen") return value ? value.replace("T", " ").slice(0, 19) : "never";
    if (value === null) return "—"; // a revision of a generation forgotten or not made yet
    if (field === "last_error") return value.length > 200 ? value.slice(0, 199) + "…" : value;
    if (field === "fronts") return value.length ? value.join(", ") : "all";
    if (field === "last_refused") {
      return Object.keys(value).sort().map(function (service) {
        return service + " " + value[service];
      }).join(", ");
    }
    return String(value);
  }

  // A lane a gateway cannot carry is the skipped record `lanes[<name>]`, or `lanes` for
  // all of them but gray (gateways/lane_support.py); the page names them so.
  var LANE_RECORD = /^lanes\[(.+)\]$/;

  function recordLabel(record) {
    var lane = LANE_RECORD.exec(record);
    var label = document.createElement(lane || record === "lanes" ? "b" : "code");
    if (lane) {
      label.appendChild(document.createTextNode("cannot carry lane "));
      var link = document.createElement("a");
      link.href = document.getElementById("gateways").dataset.lanesUrl + "#lane-" + lane[1];
      link.textContent = lane[1];
      label.appendChild(link);
    } else {
      label.textContent = record === "lanes" ? "cannot carry any lane but gray" : record;
    }
    return label;
  }

  // The records a gateway runs its generation without, one per line (as the page renders).
  function showSkipped(cell, skipped) {
    cell.replaceChildren();
    if (!skipped.length) {
      var none = document.createElement("span");
      none.className = "muted";
      none.textContent = "none";
      cell.appendChild(none);
      return;
    }
    skipped.forEach(function (entry) {
      var line = document.createElement("div");
      line.appendChild(recordLabel(entry.record));
      line.appendChild(document.createTextNode(": " + entry.reason));
      cell.appendChild(line);
    });
  }

  window.graylaneLive.on("gateway", function (event) {
    var row = document.querySelector('tr[data-gateway="' + CSS.escape(event.name) + '"]');
    if (!row) {
      // A gateway created meanwhile; a table showing some gateways only (the overview's)
      // just does not show it.
      if (!document.querySelector("#gateways[data-partial]")) window.location.reload();
      return;
    }
    row.querySelectorAll("[data-field]").forEach(function (cell) {
      var field = cell.dataset.field;
      if (field === "skipped") {
        showSkipped(cell, event.skipped || []);
      } else if (field === "engine_label") {
        cell.textContent = event.engine ? event.engine + " " + (event.engine_version || "") : "—";
      } else if (field in event) {
        cell.textContent = shown(field, event[field]);
      }
    });
    var status = row.querySelector('[data-field="status"]');
    status.className = "state " + (badges[event.status] || "");
    var current = document.getElementById("current-generation");
    if (event.desired_generation > Number(current.textContent)) {
      current.textContent = String(event.desired_generation);
      var revision = document.getElementById("current-revision");
      if (revision) revision.textContent = shown("desired_revision", event.desired_revision);
    }
  });
})();

// Release page: follows `release` messages from /ws/live/ for this release: its state, the
// current step, the actions it allows now and new rows of its timeline.
(function () {
  "use strict";
  var island = document.getElementById("release-data");
  if (!island || !window.graylaneLive || !window.graylaneNumbers) return;
  var numbers = window.graylaneNumbers;
  var release = JSON.parse(island.textContent);
  var timeline = document.querySelector("#release-timeline tbody");

  function cell(row, text, className) {
    var td = document.createElement("td");
    if (className) td.className = className;
    td.textContent = text;
    row.appendChild(td);
    return td;
  }

  // As templates/dashboard/_release_event_kind.html shows a kind: "insufficient data".
  function words(identifier) {
    return identifier.replace(/_/g, " ");
  }

  function figures(window) {
    if (!window) return "";
    return window.requests + " req, " + numbers.rate(window.error_rate);
  }

  // A step event's convergence, as templates/dashboard/_release_convergence.html says it.
  function convergence(detail) {
    if (detail.converged == null) return "";
    var text = "generation " + (detail.generation == null ? "—" : detail.generation) + ", " +
      detail.acked + " / " + detail.gateways + " gateways acked";
    var propagation = detail.propagation_ms || {};
    if (propagation.max != null) {
      text += ", propagation p50 " + propagation.p50 + " ms / max " + propagation.max + " ms";
    }
    if (!detail.converged) text += ", not converged";
    if (detail.stale_gateways && detail.stale_gateways.length) {
      text += "; stale: " + detail.stale_gateways.join(", ");
    }
    return text;
  }

  function addRow(event) {
    var empty = timeline.querySelector("td.muted[colspan]");
    if (empty) empty.parentNode.remove();
    var detail = event.detail || {};
    var row = document.createElement("tr");
    row.dataset.kind = event.kind;
    cell(row, event.at.substring(11, 19));
    var kind = cell(row, "");
    var label = document.createElement("span");
    label.className = "release-event release-" + event.kind;
    label.textContent = words(event.kind);
    kind.appendChild(label);
    if (detail.verdict && detail.verdict !== event.kind) {
      kind.appendChild(document.createTextNode(" " + words(detail.verdict)));
    }
    cell(row, String(event.step + 1));
    cell(row, figures(detail.window && detail.window.gray));
    cell(row, figures(detail.window && detail.window.prod));
    var test = cell(row, detail.test ? numbers.points(detail.test.increase_points) + ", ratio " +
      numbers.ratio(detail.test.likelihood_ratio) + ", " + numbers.pValue(detail.test.p_value) : "");
    (detail.metrics || []).forEach(function (metric) {
      var line = document.createElement("div");
      line.className = "small";
      line.dataset.metric = metric.name;
      line.dataset.verdict = metric.verdict;
      line.textContent = metric.name + ": " + (metric.figure == null ? "—" : metric.figure) +
        (metric.bound == null ? "" : " (bound " + metric.bound + ")") + ", " + metric.verdict;
      test.appendChild(line);
    });
    var why = cell(row, detail.reason || detail.routing || "", "small");
    var converged = convergence(detail);
    if (converged) {
      var line = document.createElement("div");
      line.className = "muted";
      line.dataset.convergence = "";
      line.textContent = converged;
      why.appendChild(line);
    }
    timeline.insertBefore(row, timeline.firstChild);
  }

  function show(current) {
    var state = document.getElementById("release-state");
    state.textContent = current.state;
    state.className = "release-state release-" + current.state;
    document.querySelectorAll("#release-steps li").forEach(function (li) {
      var n = Number(li.dataset.step);
      li.classList.toggle("current", n === current.step);
      li.classList.toggle("done", n < current.step);
      if (n === current.step) li.setAttribute("aria-current", "step");
      else li.removeAttribute("aria-current");
    });
    var canOperate = document.getElementById("release-actions").dataset.canOperate === "true";
    document.querySelectorAll("#release-actions form, #release-schedule").forEach(function (form) {
      form.hidden = !(canOperate && current.allowed_actions.indexOf(form.dataset.action) !== -1);
    });
  }

  // Events sent while the socket was down are not replayed: after a reconnect, reload.
  var opened = false;
  window.graylaneLive.on("open", function () {
    if (opened) window.location.reload();
    opened = true;
  });
  window.graylaneLive.on("release", function (message) {
    if (message.release.id !== release.id) return;
    addRow(message.event);
    show(message.release);
  });
})();

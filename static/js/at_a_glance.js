// Overview, "Needs action" and the services' states (templates/dashboard/_at_a_glance.html).
// A service's state follows its versions' `metrics` messages (the last minute), decided as
// MinuteHealth.state decides it (dashboard/minute_health.py): gray worse than prod by more
// than data-worse-points, else "not enough data" while a version has fewer than
// data-min-requests requests, else healthy. The badges are the server's
// (dashboard/attention.py): fetched again after an event that may change them, and at their
// data-next-change, when time alone does (a freeze window begins or ends, a gateway goes
// quiet).
document.addEventListener("DOMContentLoaded", function () {
  "use strict";
  var card = document.getElementById("at-a-glance");
  if (!card || !window.graylaneLive || !window.graylaneNumbers) return;
  var numbers = window.graylaneNumbers;
  var MIN_REQUESTS = Number(card.dataset.minRequests || 50);
  var WORSE_POINTS = Number(card.dataset.worsePoints || 1);
  var latest = {}; // service -> version -> the last minute's window

  function minute(service, version) {
    var last = (latest[service] || {})[version];
    var total = last ? last.total : 0;
    return { total: total, rate: total >= MIN_REQUESTS ? last.success_rate : null };
  }

  function show(item) {
    var service = item.dataset.service, prod = item.dataset.prod, gray = item.dataset.gray;
    var versions = gray === prod ? [prod] : [prod, gray];
    var figures = versions.map(function (version) { return minute(service, version); });
    var requests = figures.reduce(function (sum, f) { return sum + f.total; }, 0);
    var delta = figures.length === 2 && figures[0].rate != null && figures[1].rate != null
      ? figures[1].rate - figures[0].rate : null;
    var state, text;
    if (delta != null && delta < -WORSE_POINTS) {
      state = "worse"; text = "gray worse (" + numbers.points(delta) + ")";
    } else if (figures.some(function (f) { return f.rate == null; })) {
      state = "insufficient";
      text = "not enough data (" + requests + " request" + (requests === 1 ? "" : "s") +
        " in the last minute)";
    } else {
      state = "healthy"; text = "healthy";
    }
    item.dataset.state = state;
    item.querySelector('[data-field="state"]').textContent = text;
  }

  window.graylaneLive.on("metrics", function (message) {
    (latest[message.service] = latest[message.service] || {})[message.version] =
      message.windows["1m"];
    card.querySelectorAll("#service-states li[data-service]").forEach(function (item) {
      if (item.dataset.service === message.service) show(item);
    });
  });

  var box = document.getElementById("needs-action");
  var timer = null;
  var waiting = false;
  function refresh() {
    waiting = false;
    fetch(box.dataset.url, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        if (html == null) return;
        box.innerHTML = html;
        schedule();
      });
  }
  // Events come in bursts (a release's step, every gateway's ack): one fetch for a burst.
  function soon() {
    if (waiting) return;
    waiting = true;
    setTimeout(refresh, 300);
  }
  function schedule() {
    clearTimeout(timer);
    var list = box.querySelector("[data-next-change]");
    if (!list) return;
    var wait = Number(list.dataset.nextChange) * 1000 - Date.now() + 500;
    timer = setTimeout(refresh, Math.min(Math.max(wait, 1000), 2147483647));
  }
  ["open", "release", "gateway", "revision", "freeze"].forEach(function (type) {
    window.graylaneLive.on(type, soon);
  });
  window.graylaneLive.subscribe(["*"]);
  schedule();
});

// Service page: the lifecycle timeline (templates/dashboard/_lifecycle.html) is fetched
// again, as the server renders it, on each `lifecycle` event of this service, and on a
// (re)connect (events sent while no socket was open are not replayed).
(function () {
  "use strict";
  if (!document.getElementById("lifecycle") || !window.graylaneLive) return;
  var service = document.getElementById("lifecycle").dataset.service;
  var waiting = false;

  function refresh() {
    waiting = false;
    var card = document.getElementById("lifecycle");
    fetch(card.dataset.url, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) { if (html != null) document.getElementById("lifecycle").outerHTML = html; });
  }
  // An instance stopping reports several steps within a second: one fetch for them.
  function soon() {
    if (waiting) return;
    waiting = true;
    setTimeout(refresh, 200);
  }

  window.graylaneLive.on("lifecycle", function (event) { if (event.service === service) soon(); });
  window.graylaneLive.on("open", soon);
})();

// The overview's service graph, live: when calls are recorded (`call_edges` from /ws/live/),
// and after a reconnect, the graph is fetched again as the server draws it
// (templates/dashboard/_service_graph.html) and swapped in. Reports from many instances
// come in bursts: one fetch follows a burst, and fetches are at least GAP_MS apart.
(function () {
  "use strict";
  var GAP_MS = 2000;
  var BURST_MS = 300;
  if (!document.getElementById("service-graph") || !window.graylaneLive) return;
  var busy = false;
  var again = false;
  var opened = false;

  function swap(html) {
    var current = document.getElementById("service-graph");
    var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("service-graph");
    if (!current || !fresh) return; // signed out: the answer was the login page
    var table = current.querySelector("details");
    var freshTable = fresh.querySelector("details");
    if (table && freshTable) freshTable.open = table.open;
    var focused = document.activeElement && current.contains(document.activeElement)
      ? document.activeElement.getAttribute("data-service") : null;
    current.replaceWith(document.importNode(fresh, true));
    if (focused) {
      var node = Array.prototype.find.call(
        document.querySelectorAll("#service-graph a[data-service]"),
        function (link) { return link.getAttribute("data-service") === focused; });
      if (node) node.focus();
    }
  }

  function refresh() {
    busy = true;
    again = false;
    var url = document.getElementById("service-graph").dataset.url;
    fetch(url, { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) { if (html) swap(html); })
      // Unreachable: the socket drops too, and its reconnect fetches again.
      .catch(function () {})
      .then(function () {
        setTimeout(function () {
          busy = false;
          if (again) refresh();
        }, GAP_MS);
      });
  }

  function changed() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    setTimeout(refresh, BURST_MS);
  }

  window.graylaneLive.on("call_edges", changed);
  window.graylaneLive.on("open", function () {
    if (opened) changed(); // events sent while no socket was open are not replayed
    opened = true;
  });
})();

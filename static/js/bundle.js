// Bundle page: what it shows (states, steps, the actions allowed) follows from all its
// releases together, as the server decides it; when a `release` message from /ws/live/
// changes one of them, reload rather than decide it a second time here.
(function () {
  "use strict";
  var island = document.getElementById("bundle-data");
  if (!island || !window.graylaneLive) return;
  var shown = {};
  JSON.parse(island.textContent).releases.forEach(function (release) {
    shown[release.id] = release;
  });

  // After an action's form is sent its own events arrive before its answer: a reload then
  // would race the redirect (and eat its message), which shows them anyway. A form whose
  // confirmation was dismissed (app.js) is not sent: the page still follows the releases.
  var leaving = false;
  document.addEventListener("submit", function (event) {
    if (!event.defaultPrevented) leaving = true;
  });
  function reload() {
    if (!leaving) window.location.reload();
  }

  // Events sent while the socket was down are not replayed: after a reconnect, reload.
  var opened = false;
  window.graylaneLive.on("open", function () {
    if (opened) reload();
    opened = true;
  });
  window.graylaneLive.on("release", function (message) {
    var before = shown[message.release.id];
    if (!before) return;
    if (before.state !== message.release.state || before.step !== message.release.step) {
      reload();
    }
  });
})();
